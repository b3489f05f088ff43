"""Fidelity to the reference Rhai 1.25 (issue: Rhai), case by case on its recorded cases.

Every case is its own test. The ones we know we fail are listed, with why, in
`conformance_known_failures.txt`, and run as strict xfails: a new failure
fails the suite (it cannot hide behind a case fixed elsewhere, as under a
pass-rate floor), and a fixed case fails it too until its line is removed.
A case passes when stdout and the result or the error text are the
reference's to the character (`python -m tests.rhai.conformance --failures`
shows what we did instead).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rhai.conformance import Case, describe, judge, load_cases

KNOWN_FAILURES = Path(__file__).resolve().parent / "conformance_known_failures.txt"


def case_id(case: Case) -> str:
    return f"{case.file}:{case.number}"


def known_failures() -> dict[str, str]:
    """Case id → why it fails, from the checked-in list (`#` starts a comment line)."""
    known: dict[str, str] = {}
    for line in KNOWN_FAILURES.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            ident, _, reason = line.partition(" ")
            assert reason.strip(), f"{KNOWN_FAILURES.name}: {ident} gives no reason"
            assert ident not in known, f"{KNOWN_FAILURES.name}: {ident} is listed twice"
            known[ident] = reason.strip()
    return known


CASES = load_cases()
KNOWN = known_failures()


def _params() -> list[object]:
    params: list[object] = []
    for case in CASES:
        ident = case_id(case)
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN[ident])] if ident in KNOWN else []
        params.append(pytest.param(case, id=ident, marks=marks))
    return params


@pytest.mark.parametrize("case", _params())
def test_case_matches_the_reference(case: Case) -> None:
    verdict = judge(case)
    assert verdict.exact, describe(verdict)


def test_every_known_failure_names_a_case() -> None:
    """A stale line (a case renumbered or removed) would otherwise excuse nothing, silently."""
    assert set(KNOWN) - {case_id(case) for case in CASES} == set()
