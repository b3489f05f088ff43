"""Random and mutated scripts: whatever comes in, only Rhai errors come out (issue: Rhai, sandbox).

Scripts are the conformance sources cut, spliced and salted with hostile
fragments (Python dunders, deep nesting, huge numbers); each runs with tight
limits. A Python exception, a hang or a crash fails the test. Seeded, so a
failure can be replayed; `RHAI_FUZZ_RUNS` raises the count for longer runs.
"""

from __future__ import annotations

import os
import random

from agentkernel.rhai import Engine, Limits, RhaiError
from tests.rhai.conformance import load_cases

RUNS = int(os.environ.get("RHAI_FUZZ_RUNS", "1500"))
HOSTILE = [
    "__class__", "__import__", "__builtins__", "globals()", "rt", "K", "LINES", "exec", "eval",
    "`${", "#{", "[[[[[[", "((((((", "}}}", "0x7fffffffffffffff", "9223372036854775807", "-", "..",
    "Fn(\"eval\")", ".call(", "this", "global::", "'\\u{10FFFF}'", "\"\\x00\"", "1e308 * 1e308",
    ".pad(99999999, 0)", "blob(99999999999)", "throw", "loop {}", "while true {}", "f(f(f(1)))",
    "1" * 5000, "0x" + "f" * 70, "loop { " * 20, "try { " * 19, "{ " * 40, "?." * 30, "|| " * 20,
]  # fmt: skip


def mutate(rng: random.Random, sources: list[str]) -> str:
    base = rng.choice(sources)
    roll = rng.random()
    if roll < 0.3 and len(base) > 2:  # cut a slice out
        i, j = sorted(rng.sample(range(len(base)), 2))
        return base[:i] + base[j:]
    if roll < 0.6:  # splice two scripts
        other = rng.choice(sources)
        return base[: rng.randrange(len(base) + 1)] + other[rng.randrange(len(other) + 1) :]
    if roll < 0.9:  # insert something hostile
        at = rng.randrange(len(base) + 1)
        return base[:at] + rng.choice(HOSTILE) + base[at:]
    return "".join(rng.choice(base + "(){}[];.,'\"`$#") for _ in range(rng.randrange(1, 40)))


def test_only_rhai_errors_come_out() -> None:
    rng = random.Random(20261130)
    sources = [case.data["src"] for case in load_cases()]
    engine = Engine(
        limits=Limits(
            max_operations=20_000, max_string_size=10_000, max_array_size=10_000, max_map_size=1_000,
            max_call_levels=32,
        )
    )  # fmt: skip
    surprises = []
    for _ in range(RUNS):
        script = mutate(rng, sources)
        try:
            engine.eval(script, stdout=lambda _text: None)
        except RhaiError:
            pass
        except BaseException as exc:
            surprises.append(f"{script!r}: {type(exc).__name__}: {exc}")
    assert surprises == []
