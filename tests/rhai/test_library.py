"""The interpreter is a library of its own: it imports nothing else of agentkernel (issue 25 §5).

Its host hands it what it needs (a module resolver, natives); its compile
cache is keyed by its own version. A fresh interpreter proves it: compiling
and running a script, with an import through a resolver of the test's own,
loads no module of agentkernel but the package root (which Python imports
first, and which imports nothing) and `agentkernel.rhai`'s own.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

PROGRAM = """
import json, sys
from pathlib import Path
import agentkernel.rhai
from agentkernel.rhai import Engine, Limits
from agentkernel.rhai.runtime.module_files import FileModuleResolver, SourceFile

def read(start: Path, name: str) -> SourceFile:
    return SourceFile(str(start / name), 0, "fn twice(x) { x * 2 }")

engine = Engine(limits=Limits(max_operations=10_000), module_resolver=FileModuleResolver("/m", read))
script = engine.compile('import "lib" as m; let a = [1, 2, 3].map(|x| m::twice(x)); `${a}`')
print(json.dumps({"value": engine.run(script), "version": agentkernel.rhai.__version__,
                  "loaded": sorted(name for name in sys.modules if name.startswith("agentkernel"))}))
"""


def test_the_interpreter_loads_nothing_else_of_agentkernel() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    report = json.loads(done.stdout)
    assert report["value"] == "[2, 4, 6]"
    assert report["version"]
    others = [
        name for name in report["loaded"] if name != "agentkernel" and not name.startswith("agentkernel.rhai")
    ]
    assert others == [], others
    assert "agentkernel.rhai.engine" in report["loaded"]  # the check saw the interpreter itself load
