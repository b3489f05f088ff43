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
