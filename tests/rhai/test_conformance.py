"""Fidelity to the reference Rhai 1.25 (issue: Rhai), measured on its recorded cases.

The pass rates may only go up: `conformance_floor.json` records the floor, and
this test fails below it. Raise the floor when the rates improve.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.rhai.conformance import rates, run_all

FLOOR = Path(__file__).resolve().parent / "conformance_floor.json"


def test_conformance_rates_do_not_fall() -> None:
    verdicts = run_all()
    exact, loose = rates(verdicts)
    floor = json.loads(FLOOR.read_text())
    print(f"conformance: {len(verdicts)} cases, exact {exact:.2%}, ignoring positions {loose:.2%}")
    assert exact >= floor["exact"], f"exact pass rate {exact:.2%} fell below the floor {floor['exact']:.2%}"
    assert loose >= floor["ignoring_positions"], (
        f"pass rate ignoring positions {loose:.2%} fell below the floor {floor['ignoring_positions']:.2%}"
    )
