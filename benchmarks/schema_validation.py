"""What bounded JSON Schema validation costs, and what it saves, against jsonschema's own.

Why: every tool call's arguments and every structured answer are validated
through schemas/bounds.py, which reads the clock in every keyword and keeps
one error per failed `anyOf`/`oneOf` branch (issue 24). Two questions:

1. the price on an ordinary call: `text_stats`'s arguments validated by
   jsonschema's Draft202012Validator against the kernel's bounded one,
   p50 per validation;
2. the saving on a hostile schema: `levels` nested pairs of `anyOf`
   branches through `$defs` against the value `5` (2^levels leaves, the
   issue's attack, built without the complexity bound that now refuses it
   past nine levels), jsonschema's `best_match(iter_errors(…))` against the
   kernel's: time and peak traced memory.

Run it by hand from the project folder:

    .venv/bin/python benchmarks/schema_validation.py
    .venv/bin/python benchmarks/schema_validation.py --levels 14 --calls 20000
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from jsonschema import Draft202012Validator, exceptions

from agentkernel.schemas.bounds import bounded_errors, bounded_validator

TEXT_STATS = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "Текст для анализа"}},
    "required": ["text"],
}


def nested_any_of(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for level in range(levels):
        below = {"$ref": f"#/$defs/l{level + 1}"} if level + 1 < levels else {"type": "string"}
        defs[f"l{level}"] = {"anyOf": [below, below]}
    return {"$defs": defs, "$ref": "#/$defs/l0"}


def p50_us(work: Callable[[], object], calls: int) -> float:
    for _ in range(min(calls, 100)):
        work()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def measured(work: Callable[[], object]) -> tuple[float, int]:
    """Milliseconds and peak traced KiB of one run of `work` (time without tracing, memory with)."""
    started = time.perf_counter()
    work()
    elapsed = (time.perf_counter() - started) * 1000
    tracemalloc.start()
    try:
        work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return elapsed, peak >> 10


def attack_row(levels: int) -> str:
    """One line: jsonschema's and the kernel's time and memory on `levels` nested anyOf pairs."""
    schema = nested_any_of(levels)
    theirs, ours = Draft202012Validator(schema), bounded_validator(schema)
    their_ms, their_kib = measured(lambda: exceptions.best_match(theirs.iter_errors(5)))
    our_ms, our_kib = measured(lambda: exceptions.best_match(bounded_errors(ours, 5, None, 20)))
    return f"  {levels:2} levels{' ' * 22}{their_ms:9.1f} {their_kib:6}  {our_ms:9.1f} {our_kib:5}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--levels", type=int, default=12)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks that it runs")
    options = parser.parse_args()
    calls, top = (200, 6) if options.smoke else (options.calls, options.levels)

    plain, bounded = Draft202012Validator(TEXT_STATS), bounded_validator(TEXT_STATS, Draft202012Validator)
    args = {"text": "Привет, мир! Agent runtimes call tools many times per turn."}
    before = p50_us(lambda: list(plain.iter_errors(args)), calls)
    after = p50_us(lambda: bounded_errors(bounded, args, None, 101), calls)
    print(f"text_stats arguments, {calls} validations:")
    print(f"  jsonschema Draft202012Validator  p50 {before:.1f} µs")
    print(f"  kernel bounded validator         p50 {after:.1f} µs  ({after - before:+.1f} µs)")

    print("nested anyOf pairs against 5     jsonschema ms  KiB    kernel ms  KiB")
    for levels in range(top - 4, top + 1, 2):
        print(attack_row(levels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
