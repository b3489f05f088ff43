"""A script that runs out of memory fails its own call, and only it (S21.1, S3.3).

QuickJS as released frees the error it is building a stack trace for when an
allocation fails on the way, then uses it: the whole process died of SIGSEGV
(vendor/quickjs/README.md). These scripts reach their memory limit in the ways
that crashed it, at limits from 1 to 16 MiB, in kept and fresh contexts alike.
They run in a child process, so a crash fails this test instead of killing the
test worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agentkernel import Kernel
from tests.conftest import ToolFactory

#: Scripts that fill their heap with small allocations: the failing one leaves too little room for
#: the error's stack trace, the case that crashed.
FILLERS = {
    "strings": "function run() { const a = []; for (;;) a.push('x'.repeat(1000) + a.length); }",
    "objects": "function run() { const a = []; for (;;) a.push({ i: a.length, s: 'y'.repeat(20) }); }",
    "caught": """
        function run() {
          const a = [];
          try { for (;;) a.push('x'.repeat(1 << 16)); } catch (e) {}
          try { for (;;) a.push('x'.repeat(100)); } catch (e) {}
          try { for (;;) a.push({}); } catch (e) {}
          for (let i = 0; i < 100; i++) { try { null.x; } catch (e) { a.push(e); } }
          throw new Error('near the limit');
        }
    """,
    "module": "export function run() { const m = new Map(); for (let i = 0;; i++) m.set('k' + i, [i]); }",
}
LIMITS_MB = [1, 2, 3, 4, 6, 8, 12, 16]
CALLS = 3

CHILD = """
import json, sys
from pathlib import Path
from agentkernel import Kernel
from agentkernel.config import load_kernel_config
names, calls = json.loads(sys.argv[2]), int(sys.argv[3])
with Kernel(load_kernel_config(Path(sys.argv[1]))) as kernel:
    for name in names:
        for _ in range(calls):
            print(json.dumps(kernel.run_tool(name, {}).to_json()["content"]), flush=True)
    print(json.dumps(kernel.run_tool("after", {}).to_json()["content"]), flush=True)
"""


def test_running_out_of_memory_fails_the_call_not_the_process(project: Path, make_tool: ToolFactory) -> None:
    names = []
    for kind, source in FILLERS.items():
        for limit in LIMITS_MB:
            name = f"{kind}_{limit}"
            ext = ".mjs" if kind == "module" else ".js"
            make_tool(name, source, ext=ext, yaml_extra=f"memory_limit_mb: {limit}\ntimeout_secs: 30\n")
            names.append(name)
    make_tool("after", "function run() { return 'still here'; }")
    config = str(project / "config" / "kernel.yaml")
    child = subprocess.run(
        [sys.executable, "-c", CHILD, config, json.dumps(names), str(CALLS)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, f"the process died ({child.returncode}): {child.stderr[-2000:]}"
    answers = [json.loads(line) for line in child.stdout.splitlines()]
    assert answers[-1] == "still here"
    failures = answers[:-1]
    assert len(failures) == len(names) * CALLS
    for answer in failures:
        assert "out of memory" in str(answer) or "near the limit" in str(answer), answer


def test_a_builtin_out_of_memory_throws_an_error_a_catch_sees(kernel: Kernel, make_tool: ToolFactory) -> None:
    """`normalize` failed without an exception: a `catch` got a value printed `[unsupported type]`."""
    make_tool(
        "normalize",
        """
        function run() {
          try { return 'x'.repeat(1e7).normalize('NFD').length; } catch (e) { return 'caught ' + e; }
        }
        """,
    )
    assert kernel.run_tool("normalize", {}).to_json()["content"] == "caught InternalError: out of memory"
