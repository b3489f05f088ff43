"""A script of functions only has a top level that does nothing: a call of one of its functions
does not run it first (compiled.py `idle_top_level`), and nothing else changes."""

from __future__ import annotations

from agentkernel.rhai import Engine


def test_only_a_script_of_functions_has_an_idle_top_level() -> None:
    engine = Engine()
    assert engine.compile("fn f(x) { x + 1 }").idle_top_level
    assert not engine.compile("let k = 2; fn f(x) { x + k }").idle_top_level
    assert not engine.compile('fn f(x) { x } print("top")').idle_top_level


def test_a_call_gives_what_it_gave_with_the_top_level_run() -> None:
    engine = Engine()
    printed: list[str] = []
    idle = engine.compile("fn f(x) { x * 2 }")
    assert engine.call_fn(idle, "f", [21]) == 42
    busy = engine.compile('print("top"); fn f(x) { x * 2 }')
    assert engine.call_fn(busy, "f", [21], stdout=printed.append) == 42
    assert printed == ["top"]
