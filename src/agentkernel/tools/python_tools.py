"""Running a built-in `python_tool` (issue 15 §1: office documents need python-docx).

A python_tool's YAML names `function: module:callable`, always below
agentkernel.builtins (config/scripts.py refuses the kind anywhere else).
The callable takes what a script's `run` takes plus the call itself:

    def make_docx(args: JSONObject, config: JSONObject, call: ScriptCall) -> JSONValue

`call` is the `ScriptCall` helpers receive (the caller, its budget and
deadline, the kernel's limits), so a built-in reaches the kernel's services
through the same doors scripts do. What it returns is normalised like a
script's result; a `ScriptError` it raises is a failed result with that
message. The module is imported on the tool's first call, never at load.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from agentkernel.builtins import PACKAGE
from agentkernel.config import ToolSpec
from agentkernel.errors import ScriptError
from agentkernel.scripting.helper_table import ScriptCall
from agentkernel.types import JSONObject, JSONValue

PythonTool = Callable[[JSONValue, JSONObject, ScriptCall], JSONValue]


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


def run_python_tool(spec: ToolSpec, args: JSONValue, call: ScriptCall) -> JSONValue:
    """Call the tool's function with its arguments, its YAML (`config`) and the call."""
    return python_function(spec)(args, spec.raw, call)


__all__ = ["PythonTool", "python_function", "run_python_tool"]
