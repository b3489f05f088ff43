"""What a compile spends its time on, counted, never timed (issue 14 §4; speed: benchmarks/rhai_compile.py).

The cyclic garbage collector does not run while a script compiles (the
objects a compile makes hold no cycles, and a full collection in a server's
heap would walk everything in vain), and it is back on afterwards, whatever
the outcome, unless it was off before.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from agentkernel.rhai import Engine, RhaiSyntaxError
from agentkernel.rhai.codegen import script_module
from agentkernel.rhai.codegen.script_module import compile_script

SCRIPT = "".join(f"fn f{n}(a) {{ let m = #{{x: a, y: [a, {n}]}}; m.y.len() + m.x }}\n" for n in range(300))


@pytest.fixture
def collections() -> Iterator[list[str]]:
    """The collections that run while the test does."""
    seen: list[str] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(f"generation {info['generation']}")

    gc.callbacks.append(count)
    yield seen
    gc.callbacks.remove(count)


def test_no_collection_runs_during_a_compile(collections: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Off from the parse to the load; the one young collection due runs after, on return."""
    seen: list[bool] = []

    def generate(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return compile_script(*args, **kwargs)

    monkeypatch.setattr(script_module, "compile_script", generate)
    assert gc.isenabled()
    rhai = Engine()
    gc.collect()  # all counts at zero: the one collection due after is a young one, whatever ran before
    collections.clear()
    rhai.compile(SCRIPT + "f1(2)")
    assert seen == [False]
    assert collections in ([], ["generation 0"])
    assert gc.isenabled()
    garbage = [[n] for n in range(5000)]  # allocations after it: the collector runs again
    assert len(collections) > 1 and garbage


def test_the_collector_is_back_after_a_failed_compile() -> None:
    with pytest.raises(RhaiSyntaxError):
        Engine().compile(SCRIPT + "let x = ;")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        Engine().compile(SCRIPT)
        assert not gc.isenabled()
    finally:
        gc.enable()
