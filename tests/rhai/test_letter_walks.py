"""A `for` over a string's letters run in a copy of its body (codegen/letter_walks.py) stops
where the loop as compiled without it stops: at every limit, the same error at the same
place, or the same value; and a host's periodic checkpoint comes at the same counts."""

from __future__ import annotations

import re

import pytest

from agentkernel.rhai import Engine
from agentkernel.rhai.codegen.letter_walks import LetterWalks
from tests.rhai.operation_counts import outcome, periodic_looks, stops

ENDS = 'let ends = ".!?…"; '
COPIED = [
    ENDS + 'let open = 0; for c in "ab. c!d" { if !ends.contains(c) { open += 1 } } open',
    ENDS + 'let n = 0; for c in "abc.def" { if ends.contains(c) { break } n += 1 } n',
    ENDS + 'let n = 0; for c in "a.b.c" { if ends.contains(c) { continue } n += 2 } n',
    ENDS
    + 'let w = ["ab.", 3, "x"]; let n = 0; for x in w { for c in x { if ends.contains(c) { n += 1 } } } n',
    ENDS
    + 'let n = 0; for w in ["héllo", "", "wörld!"] {'
    + " for c in w { if !ends.contains(c) { n += 1 } else { n -= 5 } } } n",
    'let n = 0; let long = "'
    + "x" * 300
    + '"; for c in "axb" { if long.contains(c) { n += 1 } } n',  # not short
    # the script's own `contains`
    'fn contains(c) { true } let n = 0; for c in "abc" { if "b".contains(c) { n += 1 } } n',
    ENDS + 'let n = 9223372036854775806; for c in "abc" { if !ends.contains(c) { n += 1 } } n',  # overflows
    ENDS + 'let n = 0; for c in "ab" { if !ends.contains(c) { n += 1 } ends = 5; } n',  # retypes `ends`
]


def copy_lines(source: str) -> list[str]:
    return re.findall(r"^ *if \(w\d+ := type\(.*", Engine().compile(source).module.source, re.M)


@pytest.mark.parametrize("source", COPIED)
def test_a_letter_walk_stops_where_the_loop_without_a_copy_does(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    copied = stops(source)
    monkeypatch.setattr(LetterWalks, "letter_copy", lambda self, *args: False)
    assert not copy_lines(source)
    assert stops(source) == copied


def test_the_usual_letter_loop_has_a_copy_that_tests_nothing_per_letter() -> None:
    (line,) = copy_lines(ENDS + 'let n = 0; for c in "ab. c" { if !ends.contains(c) { n += 1 } } n')
    assert "len(" in line and "_room" in line
    source = Engine().compile(ENDS + 'let n = 0; for c in "ab. c" { if !ends.contains(c) { n += 1 } } n')
    copy = source.module.source.split(line, 1)[1].split("else:", 1)[0]
    assert "rt_method" not in copy and "_room" not in copy and "TEXT" not in copy and "settle" not in copy
    assert "rt.compound" in copy  # an overflow's general path, which counts nothing


@pytest.mark.parametrize(
    "source",
    [
        ENDS + 'let n = 0; for c in "ab" { if ends.contains(c) { print(c) } } n',  # a call
        ENDS + 'let n = 0; for c in "ab" { for d in "cd" { if ends.contains(d) { n += 1 } } } n',
        'let n = 0; for c in "ab" { n += 1 } n',  # not walked letter by letter (no `contains`)
    ],
)
def test_a_letter_walk_that_may_count_on_its_own_has_no_copy(source: str) -> None:
    lines = copy_lines(source)
    assert len(lines) <= 1 and ("for d in" in source) == (len(lines) == 1)  # the inner loop may
    Engine().eval(source, stdout=lambda line: None)


def test_an_else_if_counted_when_reached_is_within_an_iterations_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`else if` counts its condition when it is reached, not with its block: a letter's count can
    be far more than its block's statements (a copy run on a smaller bound overshot the limit)."""
    chain = " && ".join(f"m < {i + 100}" for i in range(25))
    source = ENDS + (
        'let n = 0; let m = 0; for c in "abcdefghijkl" {'
        f" if ends.contains(c) {{ n += 1 }} else if {chain} {{ m += 0 }} }} n"
    )
    assert copy_lines(source)
    limits = range(400, 1500, 7)
    copied = [outcome(source, limit) for limit in limits]
    monkeypatch.setattr(LetterWalks, "letter_copy", lambda self, *args: False)
    assert [outcome(source, limit) for limit in limits] == copied
    assert "Too many operations" in copied[0] and "Too many operations" not in copied[-1]


def test_a_long_walk_under_a_big_limit_and_without(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "Привет, мир! Это текст. " * 200
    source = ENDS + f'let n = 0; for c in "{text}" {{ if !ends.contains(c) {{ n += 1 }} }} n'
    assert Engine().eval(source) == sum(1 for c in text if c not in ".!?…")
    limits = (2_000, 40_000, 48_010, 48_012, 48_020, 10**6)
    copied = [outcome(source, limit) for limit in limits]
    monkeypatch.setattr(LetterWalks, "letter_copy", lambda self, *args: False)
    assert [outcome(source, limit) for limit in limits] == copied
    assert "Too many operations" in copied[0] and "Too many operations" not in copied[-1]


def test_a_periodic_checkpoint_is_reached_as_often_with_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that looks at the clock every so many operations (scripting/rhai_adapter.py) looks
    at the same counts when the letters run in a copy: a word's letters that do not fit in
    the room left run as before."""
    words = 'let n = 0; for w in "Это небольшой текст. Ещё один! И ещё?".split() {'
    inner = words + " for c in w { if !ends.contains(c) { n += 1 } } } n"
    value = Engine().eval(ENDS + inner)

    def looks() -> list[int]:
        source = ENDS + f"let t = 0; for i in 0..40 {{ t += {{ {inner} }} }} t"
        return periodic_looks(source, 40 * value, every=700)  # room for some words, not all

    copied = looks()
    monkeypatch.setattr(LetterWalks, "letter_copy", lambda self, *args: False)
    assert looks() == copied
    assert len(copied) > 10
