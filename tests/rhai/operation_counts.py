"""Our operation counts against the reference's, on tests/rhai/conformance/ops.jsonl.

    python -m tests.rhai.operation_counts            # summary
    python -m tests.rhai.operation_counts --worst 20 # the cases furthest off, with both counts

Each case is a script the reference Rhai 1.25 ran to the end, with the number
of operations it counted. Ours is the count our runtime holds when the script
ends: the smallest `max_operations` that lets it finish (docs/rhai.md §10).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from agentkernel.rhai.engine import Engine, _run_main
from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runner import strip_shebang
from agentkernel.rhai.runtime.runtime import Limits, Runtime

CASES = Path(__file__).resolve().parent / "conformance" / "ops.jsonl"
SAFETY_OPERATIONS = 50_000_000  # a runaway case must not hang the suite
CLOSE = 0.10  # "close": within 10% of the reference's count


@dataclass(frozen=True)
class Count:
    source: str
    reference: int
    ours: int

    @property
    def exact(self) -> bool:
        return self.ours == self.reference

    @property
    def close(self) -> bool:
        return abs(self.ours - self.reference) <= CLOSE * self.reference

    @property
    def ratio(self) -> float:
        return self.ours / self.reference if self.reference else float("inf")


class _Periodic(Runtime):
    """A host's runtime that looks at the clock every `every` operations (as
    scripting/rhai_adapter.py does), noting the count at each look."""

    def __init__(self, every: int, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.looks: list[int] = []
        self.every = self.checkpoint = every

    def reached_checkpoint(self) -> None:
        super().reached_checkpoint()
        self.looks.append(self.operations)
        self.checkpoint = self.operations + self.every


def periodic_looks(source: str, value: object, every: int = 97) -> list[int]:
    """The counts at which a host looking every `every` operations looks, as `source` runs to
    `value`."""
    engine = Engine()
    script = engine.compile(source)
    rt = _Periodic(every, limits=engine.limits, library=engine.library, functions=dict(script.functions))
    assert _run_main(rt, script) == value
    return rt.looks


def outcome(source: str, limit: int) -> str:
    """What `source` gives under `limit` operations: its value, or the error that stopped it."""
    try:
        return repr(Engine(limits=Limits(max_operations=limit)).eval(source))
    except RhaiRuntimeError as error:
        return str(error)


def stops(source: str) -> list[str]:
    """For each limit up to what `source` needs, what stops it (the error's text), then its value."""
    seen: list[str] = []
    for limit in range(1, 400):
        try:
            value = Engine(limits=Limits(max_operations=limit)).eval(source)
        except RhaiRuntimeError as error:
            seen.append(str(error))
            if "Too many operations" in str(error):
                continue
            return seen  # the script's own error, once the limit lets it reach it
        return [*seen, repr(value)]
    raise AssertionError(f"{source} needs more than 400 operations")


def load() -> list[tuple[str, int]]:
    lines = CASES.read_text(encoding="utf-8").splitlines()
    return [(case["src"], case["operations"]) for case in map(json.loads, filter(str.strip, lines))]


def our_count(source: str) -> int:
    """The operations our runtime counted running `source` to its end."""
    engine = Engine(limits=Limits(max_operations=SAFETY_OPERATIONS))
    script = engine.compile(strip_shebang(source))
    rt = engine.new_runtime(script, stdout=lambda text: None)
    _run_main(rt, script)
    return rt.counted()


def count_all() -> list[Count]:
    return [Count(source, reference, our_count(source)) for source, reference in load()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worst", type=int, default=0, help="show the N cases furthest from the reference")
    options = parser.parse_args()
    counts = count_all()
    total = len(counts)
    exact = sum(c.exact for c in counts)
    close = sum(c.close for c in counts)
    ratios = sorted(c.ratio for c in counts)
    print(
        f"{total} cases: exact {exact} ({exact / total:.1%}), within 10% {close} ({close / total:.1%}); "
        f"ours/reference from {ratios[0]:.2f} to {ratios[-1]:.2f}, median {ratios[total // 2]:.2f}"
    )
    worst = sorted(counts, key=lambda c: abs(c.ratio - 1), reverse=True)[: options.worst]
    for count in worst:
        print(f"  ours {count.ours:>9} reference {count.reference:>9}  {count.source[:100]!r}")


if __name__ == "__main__":
    main()
