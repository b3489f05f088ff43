"""Where a compiled expression's value is (`Operand`), and the Python text of operators on it.

Compile-time only: the generated code holds the operand's text. The rules
here decide what a fast path may assume of an operand (an int literal, a
name that can be subscripted, a variable that evaluating something else may
rebind).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal, NamedTuple

INT_ARITHMETIC = frozenset({"+", "-", "*"})
INT_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


Place = Literal["literal", "constant", "local", "boxed", "temp", "expr"]
"""What kind of Python text an operand is: decides whether it may change under us,
whether it can be subscripted as it is, whether its type is known. (Strings, not an
Enum: operands are made and hashed for every node compiled, and these cost least.)"""

LITERAL: Final = "literal"  # a Python literal: None, True, 5, (-2), 1.5
CONSTANT: Final = "constant"  # an entry of the constants table: K[3]
LOCAL: Final = "local"  # a Rhai variable's local, or its Cell's value: v1_x, v2_y.v
BOXED: Final = "boxed"  # a variable of the enclosing function, in a part compiled apart: B3[0]
TEMP: Final = "temp"  # a temporary of the generated code: t5
EXPR: Final = "expr"  # any other Python expression: t5.receiver


class Operand(NamedTuple):
    """Where a compiled expression's value is: Python text and its kind of place.

    Compile-time only: the generated code holds the text (`str(operand)`, or the
    operand in an f-string), so it costs nothing at run time.
    """

    text: str
    place: Place

    def __str__(self) -> str:
        return self.text

    @property
    def is_variable(self) -> bool:
        """A Rhai variable's storage: evaluating something else may rebind it."""
        return self.place == LOCAL or self.place == BOXED

    @property
    def is_int_literal(self) -> bool:
        """An int literal: no type check needed."""
        return self.int_value is not None

    @property
    def int_value(self) -> int | None:
        """The value of an int literal (`5`, `(-2)`), else None."""
        if self.place != LITERAL:
            return None
        digits = self.text.strip("()")
        return int(digits) if digits.lstrip("-").isdigit() else None

    @property
    def is_name(self) -> bool:
        """Usable as `x.attr`/`x[i]` in Python as it is (a literal is not: `True[0]` warns)."""
        return self.place == TEMP or self.place == LOCAL


NONE = Operand("None", LITERAL)
TRUE = Operand("True", LITERAL)
FALSE = Operand("False", LITERAL)


def joined(operands: Iterable[Operand | str]) -> str:
    """`a, b, c`: operands as Python arguments or list items."""
    return ", ".join(map(str, operands))


def list_index_test(
    container: Operand, index: Operand, index_is_int: bool = False, is_list: str | None = None
) -> str:
    """Python test for the fast path of `container[index]`: a list and an in-range int
    (`index_is_int`: the index is proven to hold an int, int_types.py; `is_list`: the test
    that the container is a list, when not `type(…) is list`)."""
    is_list = is_list or f"type({container}) is list"
    value = index.int_value
    if value is not None:
        bound = f"{value} < len({container})" if value >= 0 else f"{-value} <= len({container})"
        return f"{is_list} and {bound}"
    # a negative index (from the end) takes the slow path: one `len` a test, not two
    in_range = f"0 <= {index} < len({container})"
    if index_is_int:
        return f"{is_list} and {in_range}"
    return f"{is_list} and type({index}) is int and {in_range}"


__all__ = [
    "BOXED",
    "CONSTANT",
    "EXPR",
    "FALSE",
    "INT_ARITHMETIC",
    "INT_COMPARISONS",
    "LITERAL",
    "LOCAL",
    "NONE",
    "TEMP",
    "TRUE",
    "Operand",
    "Place",
    "joined",
    "list_index_test",
]
