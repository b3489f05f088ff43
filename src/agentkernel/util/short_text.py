"""Short displays of a value, for error messages, logs and the chat: one way to cut, everywhere.

An error must name the value at fault, but a script's value may be a
megabyte string or a list of a million items: the message shows its start,
and a mark says it was cut. `clip` cuts a text; `shown_value` shows a
script's value as messages do (a string quoted as `'text'`, anything else as
its JSON), reading and encoding no more of a huge value than it shows.
"""

from __future__ import annotations

from agentkernel.util.json_size import json_prefix

CUT = "..."


def clip(text: str, width: int, mark: str = CUT) -> str:
    """`text` when it has at most `width` characters, else its start and `mark`: `width` in all."""
    if len(text) <= width:
        return text
    return text[: max(0, width - len(mark))] + mark


def json_preview(value: object, width: int = 80, mark: str = CUT) -> str:
    """The start of `value`'s JSON text, at most `width` characters; no more of it is encoded."""
    text, _ = json_prefix(value, width + 1)
    return clip(text, width, mark)


def shown_value(value: object, width: int = 80, mark: str = CUT) -> str:
    """A script's value for a message: a string quoted (`'a\\nb'`), anything else as JSON; clipped.

    A value that is not JSON (which helpers never get) shows as Python writes it.
    """
    if isinstance(value, str):
        return clip(repr(value[: width + 1]), width, mark)  # a huge string is cut before it is escaped
    try:
        return json_preview(value, width, mark)
    except TypeError:
        return clip(repr(value), width, mark)


__all__ = ["CUT", "clip", "json_preview", "shown_value"]
