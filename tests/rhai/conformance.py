"""Run the Rhai conformance cases of tests/rhai/conformance/ through our runner.

    python -m tests.rhai.conformance            # summary
    python -m tests.rhai.conformance --failures # every failing case, with what we did

A case passes *exactly* when stdout, and the result or the error text, are
the reference's to the character; *loosely* when they match once the
` (line L, position P)` suffixes are removed.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkernel.rhai.runner import RunOutcome, limits_from_flags, run_source

HERE = Path(__file__).resolve().parent / "conformance"
CASE_FILES = ("cases.jsonl", "stdlib.jsonl", "from_source.jsonl")
SAFETY_OPERATIONS = 50_000_000  # a runaway case must not hang the suite
_POSITION = re.compile(r" \(line \d+, position \d+\)")


@dataclass(frozen=True)
class Case:
    file: str
    number: int
    data: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{self.file}:{self.number} [{self.data.get('topic')}]"


@dataclass(frozen=True)
class Verdict:
    case: Case
    outcome: RunOutcome
    exact: bool
    loose: bool


def load_cases() -> list[Case]:
    cases = []
    for file in CASE_FILES:
        for number, line in enumerate((HERE / file).read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                cases.append(Case(file, number, json.loads(line)))
    return cases


def _strip(text: str | None) -> str | None:
    return None if text is None else _POSITION.sub("", text)


def judge(case: Case) -> Verdict:
    data = case.data
    limits = limits_from_flags(data.get("opts", []))
    if not limits.max_operations:
        limits.max_operations = SAFETY_OPERATIONS
    outcome = run_source(data["src"], limits)
    stdout = "".join(line + "\n" for line in outcome.stdout)
    want_stdout = data.get("stdout", "")
    if "error" in data:
        exact = stdout == want_stdout and outcome.error == data["error"]
        loose = _strip(stdout) == _strip(want_stdout) and _strip(outcome.error) == _strip(data["error"])
    else:
        # the reference printed the result as the last line: a result with a
        # newline in it spills into what the case records as stdout
        printed = stdout + f"{outcome.result}\n" if outcome.result is not None else None
        exact = printed == want_stdout + data["result"] + "\n"
        loose = exact or (
            printed is not None and _strip(printed) == _strip(want_stdout + data["result"] + "\n")
        )
    return Verdict(case, outcome, exact, loose)


def run_all() -> list[Verdict]:
    return [judge(case) for case in load_cases()]


def rates(verdicts: list[Verdict]) -> tuple[float, float]:
    total = len(verdicts)
    return (sum(v.exact for v in verdicts) / total, sum(v.loose for v in verdicts) / total)


def describe(verdict: Verdict) -> str:
    data, out = verdict.case.data, verdict.outcome
    want = data.get("error") or data.get("result")
    got = out.error or out.result
    lines = [f"{verdict.case.label}: {data['src']!r}", f"    want: {want!r}", f"    got:  {got!r}"]
    stdout = "".join(line + "\n" for line in out.stdout)
    if stdout != data.get("stdout", ""):
        lines.append(f"    stdout want {data.get('stdout', '')!r} got {stdout!r}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--failures", action="store_true")
    parser.add_argument("--topic", help="only cases whose topic contains this")
    options = parser.parse_args()
    verdicts = run_all()
    if options.topic:
        verdicts = [v for v in verdicts if options.topic in str(v.case.data.get("topic"))]
    exact, loose = rates(verdicts)
    if options.failures:
        for verdict in verdicts:
            if not verdict.exact:
                print(describe(verdict))
    print(f"{len(verdicts)} cases: exact {exact:.1%}, ignoring positions {loose:.1%}")


if __name__ == "__main__":
    main()
