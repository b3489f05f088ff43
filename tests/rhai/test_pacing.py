"""Work that grows with its data looks at the deadline as it goes (issue 9, item 3; S21.1).

The clock here is a counter: each look at it moves time one step, and the
deadline is a number of looks. So these tests say how often long work looks
at the clock, without measuring any time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agentkernel.rhai import Engine, Limits
from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runtime import ops, pacing
from agentkernel.rhai.runtime.copying import clone
from agentkernel.rhai.runtime.pacing import CHUNK, Deadline, deadline_scope
from agentkernel.rhai.runtime.printing import to_debug, to_string
from agentkernel.rhai.runtime.runtime import Runtime
from tests.rhai.fakes import LIB, FakeContext

BIG = 5 * CHUNK  # long enough for several looks at the clock


@contextmanager
def looks_allowed(count: int) -> Iterator[None]:
    """A deadline that passes at the `count + 1`-th look at the clock."""
    ticks = itertools.count(1)
    with deadline_scope(Deadline(at=count, clock=lambda: next(ticks))):
        yield


def stops(work: Callable[[], Any], looks: int) -> bool:
    """Whether `work` is stopped by a deadline that allows `looks` looks at the clock."""
    try:
        with looks_allowed(looks):
            work()
    except RhaiRuntimeError as err:
        assert (err.kind, err.message, err.catchable) == ("ErrorTerminated", "Script terminated", False)
        return True
    return False


BIG_INTS = list(range(BIG))
BIG_FLOATS = [0.5] * BIG
BIG_MAP = {f"k{i}": i for i in range(BIG)}
LONG_TEXT = "a" * (BIG * pacing.STRING_WORK)

LOOKING_AS_THEY_GO: dict[str, Callable[[], Any]] = {
    "in": lambda: ops.contains(BIG_INTS, -1),
    "array ==": lambda: ops.equals(BIG_INTS, list(BIG_INTS)),
    "map ==": lambda: ops.equals(BIG_MAP, dict(BIG_MAP)),
    "to_string": lambda: to_string(BIG_FLOATS),
    "to_debug of a map": lambda: to_debug(BIG_MAP),
    "to_debug of a long string": lambda: to_debug(LONG_TEXT + "\n"),
    "index_of": lambda: LIB.call(FakeContext(), "index_of", [BIG_INTS, -1]),
    "dedup": lambda: LIB.call(FakeContext(), "dedup", [list(BIG_INTS)]),
    "sort of floats": lambda: LIB.call(FakeContext(), "sort", [[float(i % 97) for i in range(BIG)]]),
    "to_json": lambda: LIB.call(FakeContext(), "to_json", [{"a": BIG_INTS}]),
}


@pytest.mark.parametrize("work", LOOKING_AS_THEY_GO.values(), ids=LOOKING_AS_THEY_GO.keys())
def test_long_work_looks_at_the_clock_as_it_goes(work: Callable[[], Any]) -> None:
    assert stops(work, looks=3)


LOOKING_FIRST: dict[str, Callable[[], Any]] = {
    "copy": lambda: clone(BIG_INTS),
    "string +": lambda: ops.add(LONG_TEXT, "b"),
    "string -": lambda: ops.sub(LONG_TEXT, "b"),
    "string ==": lambda: ops.equals(LONG_TEXT, LONG_TEXT[:-1] + "b"),
    "string <": lambda: ops.lt(LONG_TEXT, LONG_TEXT[:-1] + "b"),
    "substring in": lambda: ops.contains(LONG_TEXT, "b"),
}


@pytest.mark.parametrize("work", LOOKING_FIRST.values(), ids=LOOKING_FIRST.keys())
def test_big_work_looks_at_the_clock_before_it_starts(work: Callable[[], Any]) -> None:
    assert stops(work, looks=0)


def test_small_work_does_not_look() -> None:
    assert not stops(lambda: ops.contains([1, 2, 3], 4), looks=0)
    assert not stops(lambda: to_string(list(range(100))), looks=0)


def test_any_native_with_a_big_argument_looks_first() -> None:
    rt = Runtime(library=LIB)
    assert stops(lambda: rt.call_native("len", [BIG_INTS]), looks=0)
    assert stops(lambda: rt.call_native("append", [[], BIG_INTS]), looks=0)
    assert not stops(lambda: rt.call_native("len", [[1, 2]]), looks=0)


def test_engine_without_a_deadline_never_stops() -> None:
    assert ops.contains(BIG_INTS, -1) is False  # no deadline in scope: polls do nothing


def test_the_runtime_installs_its_deadline_for_the_call() -> None:
    engine = Engine(limits=Limits(max_operations=10**9))
    script = engine.compile("let a = []; a.pad(20000, 1); 5 in a")
    rt = engine.new_runtime(script)
    ticks = itertools.count(1)
    rt.deadline = Deadline(at=0, clock=lambda: next(ticks))
    with pytest.raises(RhaiRuntimeError, match="Script terminated"):
        rt.run(script.main, 0, None)
    rt.deadline = None
    assert rt.run(script.main, 0, None) is False
