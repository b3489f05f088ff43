"""Positions and the error a script that does not compile raises: the lowest stage's own.

`Pos` is (line, column); `with_position` is how every Rhai error shows one.
`RhaiError` is the base of every failure of a script; the run-time kinds
are in errors.py, above this stage.
"""

from __future__ import annotations

Pos = tuple[int, int]
NO_POS: Pos = (0, 0)


def with_position(message: str, pos: Pos | None) -> str:
    if pos is None or pos == NO_POS:
        return message
    return f"{message} (line {pos[0]}, position {pos[1]})"


class RhaiError(Exception):
    """A Rhai error: parse-time (`RhaiSyntaxError`) or run-time (`RhaiRuntimeError`)."""

    def display(self) -> str:
        raise NotImplementedError


class RhaiSyntaxError(RhaiError):
    """The script does not compile: `Syntax error: <message> (line L, position P)`."""

    def __init__(self, message: str, pos: Pos | None) -> None:
        self.message = message
        self.pos = pos
        super().__init__(self.display())

    def display(self) -> str:
        return with_position(f"Syntax error: {self.message}", self.pos)


__all__ = ["NO_POS", "Pos", "RhaiError", "RhaiSyntaxError", "with_position"]
