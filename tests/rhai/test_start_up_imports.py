"""What running a compiled script imports: `agentkernel rhai run` pays for every module at each start.

Each probe imports in a fresh interpreter (a real subprocess: this process has
imported everything already) and lists which of the unwanted modules came in.
"""

from __future__ import annotations

import json
import subprocess
import sys


def _loaded(imports: list[str], unwanted: list[str]) -> list[str]:
    """Which of `unwanted` a fresh interpreter holds after importing `imports`."""
    found = f"sorted(set({unwanted!r}) & set(sys.modules))"
    probe = f"import json, sys\nimport {', '.join(imports)}\nprint(json.dumps({found}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_the_runtime_and_library_import_neither_dataclasses_nor_inspect() -> None:
    """Together they cost milliseconds (`dataclasses` imports `inspect`, which imports `ast`, `dis`
    and `tokenize`); the interpreter's value classes are records (syntax/records.py)."""
    imports = ["agentkernel.rhai.runtime.runtime", "agentkernel.rhai.stdlib"]
    assert _loaded(imports, ["dataclasses", "inspect"]) == []


def test_what_compiled_code_is_bound_to_needs_no_front_end_nor_code_generator() -> None:
    """The generated code's globals (codegen/abi.py) and the parse options (the compile cache's
    key) come without the lexer, the syntax tree, the parser or the code generator's parts."""
    imports = ["agentkernel.rhai.codegen.abi", "agentkernel.rhai.syntax.parse_support"]
    front_end = [
        "agentkernel.rhai.syntax.lexer",
        "agentkernel.rhai.syntax.ast",
        "agentkernel.rhai.syntax.parser",
        "agentkernel.rhai.codegen.operands",
        "agentkernel.rhai.codegen.nesting",
        "agentkernel.rhai.codegen.variables",
    ]
    assert _loaded(imports, [*front_end, "dataclasses", "inspect"]) == []


def test_what_a_script_run_from_the_compile_cache_imports_needs_no_typing() -> None:
    """`typing` costs about 1.5 ms, a sixth of `python -c pass`: the modules `agentkernel rhai run`
    imports when the compile cache holds the script name it for type checkers only
    (`TYPE_CHECKING = False`; the Protocols' bases are plain at run time)."""
    imports = [
        "agentkernel.cli.rhai_cmd",
        "agentkernel.rhai.runner",
        "agentkernel.rhai.engine",
        "agentkernel.rhai.compile_cache",
        "agentkernel.rhai.compiled",
        "agentkernel.rhai.runtime.runtime",
        "agentkernel.rhai.stdlib",
    ]
    assert _loaded(imports, ["typing"]) == []
