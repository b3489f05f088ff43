"""The JUnit report of `tool test` (issue 15 §2): counts per suite and overall, a broken block as an error."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from agentkernel.errors import LoadProblem
from agentkernel.testing.cases import Expectation, ToolCase
from agentkernel.testing.junit import write_junit
from agentkernel.testing.runner import CaseOutcome


def outcome(tool: str, name: str, *failures: str) -> CaseOutcome:
    case = ToolCase(tool, 0, name, {}, "test-user", (), Expectation(success=True), Path("t.yaml"), 3)
    return CaseOutcome(case, failures, 0.25)


def test_suites_per_tool_and_a_broken_block_as_an_error(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    outcomes = [
        outcome("a", "one"),
        outcome("a", "two", "content: expected 'x', got 'y'"),
        outcome("b", "три"),
    ]
    problem = LoadProblem(Path("c.yaml"), "tests[0].expect (case 'x'): unknown key 'y'", 7)
    write_junit(report, outcomes, [problem])
    text = report.read_text(encoding="utf-8")
    assert text.startswith("<?xml version='1.0' encoding='utf-8'?>")
    root = ET.fromstring(text.encode("utf-8"))
    assert {k: root.get(k) for k in ("tests", "failures", "errors")} == {
        "tests": "4",
        "failures": "1",
        "errors": "1",
    }
    assert re.fullmatch(r"0\.750000", root.get("time", ""))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert [(n, s.get("tests"), s.get("failures")) for n, s in suites.items()] == [
        ("a", "2", "1"),
        ("b", "1", "0"),
        ("tests: blocks", "1", "0"),
    ]
    error = suites["tests: blocks"].find("testcase/error")
    assert error is not None and error.get("message") == "tests[0].expect (case 'x'): unknown key 'y'"
    assert error.text == "c.yaml:7: tests[0].expect (case 'x'): unknown key 'y'"
    assert [c.get("name") for c in suites["b"].iter("testcase")] == ["три"]
