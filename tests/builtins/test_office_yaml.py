"""make_docx.yaml and fill_contract.yaml: valid tool YAML whose `tests:` blocks pass (ISSUE15 §2, §3).

Until `agentkernel tool test` lands, each case is run here the way it will
run it: through the one dispatch path (`Kernel.run_tool`), in a fresh
session of a throw-away project, and the `expect:` fields compared.
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
from tests.conftest import BUILTINS_ON, write_kernel_yaml

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
    with Kernel(load_kernel_config(write_kernel_yaml(tmp_path, BUILTINS_ON))) as kernel:
        caller = kernel.caller(session_id="case", user_id=case.get("user", "test-user"))
        result = kernel.run_tool(name, case["args"], caller)
    text = str(result.content if result.success else result.error)
    expect = case["expect"]
    assert result.success is expect.get("success", True), text
    for part in expect.get("contains", []):
        assert part in text
    if "error_contains" in expect:
        assert expect["error_contains"] in text
    if "matches" in expect:
        assert re.search(expect["matches"], text)
    if "visual" in expect:
        assert result.visual and result.visual[0]["type"] == expect["visual"]["type"]
