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

from agentkernel.rhai.runtime.failures import terminated

EVERY = 256  # ticks (tokens, statements, expressions) between two looks at the clock


class CompileClock:
    """Ticks while compiling; raises `terminated()` once past the deadline (None: never)."""

    __slots__ = ("_ticks", "deadline")

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self._ticks = 0

    def tick(self) -> None:
        self._ticks += 1
        if self._ticks >= EVERY:
            self._ticks = 0
            self.check()

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise terminated()


__all__ = ["EVERY", "CompileClock"]
