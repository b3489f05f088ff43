"""The reference's behaviour where docs/rhai.md §14.1 listed us apart (issue 14 §6):
`Fn` of a reserved name, error positions of indexed assignments, value tags."""

from __future__ import annotations

from typing import Any

import pytest

from agentkernel.scripting.rhai import Engine, RhaiRuntimeError


def run(source: str) -> Any:
    return Engine().eval(source)


def error_of(source: str) -> str:
    with pytest.raises(RhaiRuntimeError) as caught:
        run(source)
    return str(caught.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("+", "'+' is a reserved symbol"),  # an operator token
        ("#{", "'#{' is a reserved symbol"),
        ("!in", "'!in' is a reserved symbol"),
        ("===", "'===' is a reserved symbol"),  # a reserved symbol that is no token
        ("->", "'->' is a reserved symbol"),
        ("_", "'_' is a reserved symbol"),
        ("let", "'let' is a reserved keyword"),  # a keyword
        ("print", "'print' is a reserved keyword"),  # a reserved word, even one callable as a function
        ("Fn", "'Fn' is a reserved keyword"),
        ("goto", "'goto' is a reserved keyword"),
    ],
)
def test_fn_of_a_reserved_name_is_the_references_syntax_error(name: str, message: str) -> None:
    """The reference's `FnPtr::try_from`: a keyword, reserved word or symbol is
    `ErrorParsing(Reserved)`, raised at run time at the argument's position."""
    assert error_of(f'let p = Fn("{name}");') == f"Syntax error: {message} (line 1, position 12)"


def test_fn_of_other_names() -> None:
    assert error_of('Fn("a b")') == "Function not found: a b (line 1, position 4)"
    assert error_of('Fn("_1")') == "Function not found: _1 (line 1, position 4)"  # not an identifier
    assert run('Fn("exit").name') == "exit"  # `exit` is listed by the reference but not reserved
    caught = run('try { Fn("+") } catch (e) { e }')
    assert caught == {
        "error": "ErrorParsing",
        "message": "Syntax error: '+' is a reserved symbol",
        "line": 1,
        "position": 10,
    }


@pytest.mark.parametrize(
    ("source", "error"),
    [
        # a character, bit or byte of the wrong type: at the `=` (the reference's write-back)
        (
            'let s = "abc"; s[1] = "X"; s',
            "Data type incorrect: string (expecting char) (line 1, position 21)",
        ),
        (
            'let s = "abc"; s[1] += "X"; s',
            "Data type incorrect: string (expecting char) (line 1, position 21)",
        ),
        ('let x = 5; x[3] = "a"; x', "Data type incorrect: string (expecting bool) (line 1, position 17)"),
        (
            'let x = 5; x[1..3] = "a"; x',
            "Data type incorrect: string (expecting integer) (line 1, position 20)",
        ),
        (
            'let b = blob(3); b[1] = "a"; b',
            "Data type incorrect: string (expecting INT) (line 1, position 23)",
        ),
        # no indexer for the value: at its `[`
        ('let x = #{}; x["a"]["b"] = 1; x', "Indexer unavailable: () [string] = i64 (line 1, position 20)"),
        ('let x = (); x["a"] = 1;', "Indexer unavailable: () [string] = i64 (line 1, position 14)"),
        # the index itself: at the index
        (
            'let s = "abc"; s[10] = "X"; s',
            "String index 10 out of bounds: only 3 characters in string (line 1, position 18)",
        ),
        (
            "let a = [1,2]; a[2] = 3",
            "Array index 2 out of bounds: only 2 elements in array (line 1, position 18)",
        ),
        ('let a = [1]; a["x"] = 1', "Data type incorrect: string (expecting i64) (line 1, position 16)"),
    ],
)
def test_an_indexed_assignment_fails_where_the_reference_says(source: str, error: str) -> None:
    assert error_of(source) == error
