"""`eval` runs in the caller's scope: it reads, assigns and defines variables (RHAI.md §3, S21).

The caller's variables are Python locals, Cells or slots of code compiled
apart; what the evaluated text assigns is written back into them
(eval_frames.py), even when the text fails after assigning.
"""

from __future__ import annotations

import pytest

from agentkernel.rhai import Engine, RhaiRuntimeError


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('let x = 1; eval("x += 2"); x', 3),  # a plain local
        ('let s = "a"; eval("s += \\"b\\""); s', "ab"),
        ('fn g() { let y = 2; eval("y *= 10"); y } g()', 20),  # a function's local
        ('let x = 1; let f = || x; eval("x = 7"); [x, f.call()]', [7, 7]),  # a captured one (a Cell)
        ('let x = 1; { let x = 2; eval("x = 3"); x }', 3),  # the innermost of a shadowed name
        ('let x = 1; { let x = 2; eval("x = 3"); } x', 1),  # ... and not the outer one
        ('eval("let s = 1;"); s += 5; s', 6),  # defined by eval, then assigned by the script
        ('eval("let s = 1;"); eval("s = 9"); s', 9),
        ('let a = [1]; eval("a.push(2)"); a', [1, 2]),
        ('let x = 1; try { eval("x = 5; throw 1"); } catch {} x', 5),  # assigned before failing: kept
        ('let x = 1; eval("let x = 10;"); x', 10),  # eval's `let` stays in the caller's scope
    ],
)
def test_eval_assigns_the_callers_variables(source: str, expected: object) -> None:
    assert Engine().eval(source) == expected


def test_eval_may_not_assign_a_constant_of_the_caller() -> None:
    with pytest.raises(RhaiRuntimeError, match="Cannot modify constant X") as caught:
        Engine().eval('const X = 1; eval("X = 2"); X')
    assert (
        caught.value.kind == "ErrorInFunctionCall"
    )  # wrapped "in call to function 'eval'", as every eval error


def test_assigning_what_nobody_defined_is_still_not_found() -> None:
    with pytest.raises(RhaiRuntimeError, match="Variable not found: nope"):
        Engine().eval('eval("1"); nope = 2')


def test_eval_assigns_variables_of_code_compiled_apart() -> None:
    """Code nested deeper than a Python function may hold runs as a function apart
    (nesting.py), its variables in a list: eval writes into the right slot."""
    depth = 16  # loops: CPython allows 20 blocks in a function, nesting.MAX_BLOCKS is 12
    inner = "let y = 0; " + 'eval("x = 42; y = 1");' + " x += y;"
    source = "let x = 1; " + "for i in 0..1 { " * depth + inner + " }" * depth + " x"
    assert Engine().eval(source) == 43
