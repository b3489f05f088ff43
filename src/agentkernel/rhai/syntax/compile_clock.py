"""A compile that ends at its caller's deadline (compile time is bounded).

A tool's `timeout_secs` covers compiling its script, and `eval(text)` inside a
running script compiles within what is left of the call's time. The lexer,
the parser and the code generator each tick the clock as they go; every
`EVERY` ticks it looks at the time. What a compile has left after its passes
(CPython's own `compile()` of the generated code) is bounded by the size of
the source.
"""

from __future__ import annotations

import time
from collections.abc import Callable

EVERY = 256  # ticks (tokens, statements, expressions) between two looks at the clock


class CompileTimeUp(Exception):
    """The compile's deadline passed, from a clock given no `late` of its own."""


class CompileClock:
    """Ticks while compiling; raises `late()` once past the deadline (None: never).

    The engine hands in what a late compile raises (its run-time `Script
    terminated`), so this stage needs nothing of the stages above it.
    """

    __slots__ = ("_ticks", "deadline", "late")

    def __init__(self, deadline: float | None = None, late: Callable[[], Exception] = CompileTimeUp) -> None:
        self.deadline = deadline
        self.late = late
        self._ticks = 0

    def tick(self) -> None:
        self._ticks += 1
        if self._ticks >= EVERY:
            self._ticks = 0
            self.check()

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self.late()


__all__ = ["EVERY", "CompileClock", "CompileTimeUp"]
