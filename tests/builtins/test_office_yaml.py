"""make_docx.yaml and fill_contract.yaml: valid tool YAML whose `tests:` blocks pass (ISSUE15 §2, §3).

Until the python_tool plumbing and `agentkernel tool test` land, each case
is run here the way they will run it: the arguments checked against the
tool's `parameters`, then the function named by `function:` called in a
fresh session of a throw-away project, and the `expect:` fields compared.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.errors import ScriptError
from agentkernel.scripting.helper_table import ScriptCall
from tests.conftest import write_kernel_yaml

TOOLS = Path(__file__).resolve().parents[2] / "src" / "agentkernel" / "builtins" / "tools"
NAMES = ("make_docx", "fill_contract")


def spec(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((TOOLS / f"{name}.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def cases() -> list[Any]:
    return [
        pytest.param(name, case, id=f"{name}: {case.get('name', index)}")
        for name in NAMES
        for index, case in enumerate(spec(name)["tests"])
    ]


@pytest.mark.parametrize("name", NAMES)
def test_the_yaml_names_its_function_and_a_valid_schema(name: str) -> None:
    loaded = spec(name)
    assert (loaded["kind"], loaded["name"], loaded["function"]) == ("python_tool", name, f"office:{name}")
    Draft202012Validator.check_schema(loaded["parameters"])
    module, _, attribute = loaded["function"].partition(":")
    assert callable(getattr(importlib.import_module(f"agentkernel.builtins.{module}"), attribute))
    outcomes = {case["expect"].get("success", True) for case in loaded["tests"]}
    assert outcomes == {True, False}  # success paths and bad input both


@pytest.mark.parametrize(("name", "case"), cases())
def test_each_yaml_case_passes(name: str, case: dict[str, Any], tmp_path: Path) -> None:
    loaded = spec(name)
    kernel = Kernel(load_kernel_config(write_kernel_yaml(tmp_path)))
    call = ScriptCall(kernel.caller(session_id="case", user_id=case.get("user", "test-user")), name)
    module, _, attribute = loaded["function"].partition(":")
    function = getattr(importlib.import_module(f"agentkernel.builtins.{module}"), attribute)
    config = {k: v for k, v in loaded.items() if k != "tests"}
    problem = next(iter(Draft202012Validator(loaded["parameters"]).iter_errors(case["args"])), None)
    try:
        if problem is not None:
            raise ScriptError(problem.message)
        result = function(case["args"], config, call)
        success, text, visual = True, result["content"], result["visual"]
    except ScriptError as exc:
        success, text, visual = False, str(exc), None
    expect = case["expect"]
    assert success is expect.get("success", True), text
    for part in expect.get("contains", []):
        assert part in text
    if "error_contains" in expect:
        assert expect["error_contains"] in text
    if "matches" in expect:
        assert re.search(expect["matches"], text)
    if "visual" in expect:
        assert visual and visual[0]["type"] == expect["visual"]["type"]
