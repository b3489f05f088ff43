"""Running a built-in `python_tool` (office documents need python-docx).

A python_tool's YAML names `function: module:callable`, always below
agentkernel.builtins (config/scripts.py refuses the kind anywhere else).
The callable takes what a script's `run` takes plus the call and a worker:

    def make_docx(args: JSONObject, config: JSONObject, call: ScriptCall, worker: Worker) -> JSONValue

`call` is the `ScriptCall` helpers receive (the caller, its budget and
deadline, the kernel's limits), so a built-in reaches the kernel's services
through the same doors scripts do, in the kernel. `worker` runs the part
untrusted input can make expensive in a worker process that the call's
deadline kills and its memory limit caps (tools/isolated.py): a Python
function cannot be stopped on a thread, and would hold the GIL for every
other user meanwhile. What the tool returns is normalised like a script's
result; a `ScriptError` it raises is a failed result with that message.
The module is imported on the tool's first call, never at load.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar, cast

from agentkernel.builtins import PACKAGE, Worker
from agentkernel.config import CallBudget, ToolSpec
from agentkernel.errors import ScriptError
from agentkernel.helpers.table import ScriptCall
from agentkernel.tools.isolated import WorkerPool
from agentkernel.types import JSONObject, JSONValue

PythonTool = Callable[[JSONValue, JSONObject, ScriptCall, Worker], JSONValue]
T = TypeVar("T")


def python_function(spec: ToolSpec) -> PythonTool:
    """The callable a python_tool's `function` names; raises ScriptError saying what is missing."""
    if spec.function is None:
        raise ScriptError(f"tool {spec.name!r} is not a python_tool")
    module_name, _, attribute = spec.function.partition(":")
    module_path = f"{PACKAGE}.{module_name}"
    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        raise ScriptError(f"function {spec.function!r}: cannot import {module_path}: {exc}") from exc
    found = getattr(module, attribute, None)
    if not callable(found):
        raise ScriptError(f"function {spec.function!r}: {module_path} has no function {attribute!r}")
    return cast(PythonTool, found)


def pool_worker(pool: WorkerPool, label: str, budget: CallBudget, user: str | None) -> Worker:
    """A `Worker` running each function in `pool` within `budget`, as `user`'s call (its fair share);
    `label` names the tool in errors."""

    def worker(function: Callable[..., T], /, *args: Any) -> T:
        return pool.run(label, budget, function, *args, user=user)

    return worker


def run_python_tool(spec: ToolSpec, args: JSONValue, call: ScriptCall, worker: Worker) -> JSONValue:
    """Call the tool's function with its arguments, its YAML (`config`), the call and its worker."""
    return python_function(spec)(args, spec.raw, call, worker)


__all__ = ["PythonTool", "pool_worker", "python_function", "run_python_tool"]
