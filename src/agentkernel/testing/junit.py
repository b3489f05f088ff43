"""Tool test outcomes as JUnit XML, the report format CI systems read (GitLab, Jenkins, GitHub actions).

One `<testsuite>` per tool or hook, one `<testcase>` per case (`classname` the tool,
`name` the case); a failed case carries a `<failure>` whose message is the
runner's reason. A `tests:` block that could not run (its problems) is an
`<error>` case named after the file, so CI shows it rather than a green run.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentkernel.errors import LoadProblem
    from agentkernel.testing.runner import CaseOutcome

SUITES_NAME = "agentkernel tool test"


def _suite(root: ET.Element, name: str) -> ET.Element:
    for suite in root.iter("testsuite"):
        if suite.get("name") == name:
            return suite
    return ET.SubElement(root, "testsuite", name=name, tests="0", failures="0", errors="0", time="0")


def _count(element: ET.Element, field: str, by: float = 1) -> None:
    value = float(element.get(field, "0")) + by
    element.set(field, f"{value:.6f}" if field == "time" else str(int(value)))


def junit_tree(outcomes: Sequence[CaseOutcome], problems: Sequence[LoadProblem] = ()) -> ET.ElementTree:
    """The report as an element tree."""
    root = ET.Element("testsuites", name=SUITES_NAME, tests="0", failures="0", errors="0", time="0")
    for outcome in outcomes:
        suite = _suite(root, outcome.case.subject)
        case = ET.SubElement(
            suite,
            "testcase",
            classname=outcome.case.subject,
            name=outcome.case.name,
            time=f"{outcome.secs:.6f}",
        )
        for element in (suite, root):
            _count(element, "tests")
            _count(element, "time", outcome.secs)
        if not outcome.passed:
            ET.SubElement(case, "failure", message=outcome.why).text = "\n".join(outcome.failures)
            for element in (suite, root):
                _count(element, "failures")
    for problem in problems:
        suite = _suite(root, "tests: blocks")
        case = ET.SubElement(suite, "testcase", classname="tests: blocks", name=str(problem.path), time="0")
        ET.SubElement(case, "error", message=problem.reason).text = str(problem)
        for element in (suite, root):
            _count(element, "tests")
            _count(element, "errors")
    return ET.ElementTree(root)


def write_junit(path: Path, outcomes: Sequence[CaseOutcome], problems: Sequence[LoadProblem] = ()) -> None:
    """Write the report to `path` (UTF-8, with an XML declaration)."""
    tree = junit_tree(outcomes, problems)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)


__all__ = ["SUITES_NAME", "junit_tree", "write_junit"]
