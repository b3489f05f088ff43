"""The kind of literal value Python has no type for: a Rhai `char`.

It belongs to the lowest stage because the lexer makes one from `'c'` and
the AST holds it; the run-time values (runtime/values.py) take it from here.
"""

from __future__ import annotations


class Char(str):
    """A Rhai `char`: one Unicode scalar, distinct from a one-character string."""

    __slots__ = ()


__all__ = ["Char"]
