"""Run-time errors are typed by `ErrorKind` and built in one module (issue 10, shape 4).

`failures.py` owns every `RhaiRuntimeError` the interpreter raises, so a kind
is spelled once; callers that compare `err.kind` with the reference's name
(rhai_adapter.py, hosts) keep working, and a `catch` map shows the plain name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agentkernel import rhai
from agentkernel.rhai import Engine, Limits, RhaiRuntimeError
from agentkernel.rhai.errors import ErrorKind

PACKAGE = Path(rhai.__file__).resolve().parent


def test_kinds_are_the_reference_names_and_compare_as_strings() -> None:
    assert all(kind.value.startswith("Error") for kind in ErrorKind)
    plain: str = "ErrorArithmetic"  # typed as a plain str: what a caller holding a name compares
    assert plain == ErrorKind.ARITHMETIC
    assert "ErrorDataTooLarge" in {ErrorKind.DATA_TOO_LARGE}
    with pytest.raises(RhaiRuntimeError) as stopped:
        Engine(limits=Limits(max_operations=50)).eval("loop {}")
    assert stopped.value.kind is ErrorKind.TOO_MANY_OPERATIONS
    name: str = "ErrorTooManyOperations"
    assert stopped.value.kind == name  # what rhai_adapter.py compares


def test_a_catch_map_shows_the_plain_name() -> None:
    caught = Engine().eval("try { 1 / 0 } catch (e) { return e }")
    assert caught["error"] == "ErrorArithmetic"
    assert type(caught["error"]) is str  # a Rhai string, not a Python enum
    assert Engine().eval("try { 1 / 0 } catch (e) { return type_of(e.error) + e.error.len() }") == "string15"


def test_every_run_time_error_is_built_in_failures() -> None:
    builders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "failures.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RhaiRuntimeError":
                builders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert builders == [], "build run-time errors with a failures.py constructor"
