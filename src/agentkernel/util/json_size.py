"""The JSON size of a script's value, found without building more of the text than a limit allows.

A script can return a value whose JSON text is far larger than the value
itself: a Rhai array padded with a thousand references to one 8 MB string
costs 8 MB, its JSON 8 GB. So a limit on what crosses back to the kernel
(`max_result_chars`, `max_visual_chars`) is checked while measuring: the
walk adds up the length each part will have in
`json.dumps(value, ensure_ascii=False)` and stops as soon as the total
passes the limit. Only a value found to fit is then encoded (by the C
encoder, fast), and a text that may be cut is encoded incrementally,
stopping at the cut.
"""

from __future__ import annotations

import json
import re

_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')
_ITEM_SEPARATOR = 2  # ", " and ": " as json.dumps writes them by default
_KEY_SEPARATOR = 2


def _string_length(text: str) -> int:
    if _NEEDS_ESCAPE.search(text) is None:
        return len(text) + 2
    return len(json.dumps(text, ensure_ascii=False))


def _scalar_length(value: object) -> int:
    if isinstance(value, str):
        return _string_length(value)
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if isinstance(value, int | float):
        return len(json.dumps(value))
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _key_length(key: object) -> int:
    """A key as json.dumps writes it: strings as they are, numbers and constants as text."""
    return _string_length(key) if isinstance(key, str) else _scalar_length(key) + 2


def json_length(value: object, limit: int) -> int | None:
    """`len(json.dumps(value, ensure_ascii=False))`, or None once it is known to pass `limit`.

    Each part is measured once per place it appears, so a value that
    repeats a big part is stopped as soon as the total passes the limit.
    """
    total = 0
    pending: list[object] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, list | tuple):
            total += 2 + _ITEM_SEPARATOR * max(0, len(item) - 1)
            pending.extend(item)
        elif isinstance(item, dict):
            total += 2 + _ITEM_SEPARATOR * max(0, len(item) - 1) + _KEY_SEPARATOR * len(item)
            for key, element in item.items():
                total += _key_length(key)
                pending.append(element)
        else:
            total += _scalar_length(item)
        if total > limit:
            return None
    return total


def json_within(value: object, limit: int) -> str | None:
    """`json.dumps(value, ensure_ascii=False)` when it has at most `limit` characters, else None.

    None too for a value nested too deeply for the encoder.
    """
    if json_length(value, limit) is None:
        return None
    try:
        return json.dumps(value, ensure_ascii=False)
    except RecursionError:  # nested deeper than the encoder goes from here: no text to give
        return None


def json_prefix(value: object, limit: int) -> tuple[str, bool]:
    """The JSON text of `value`, cut to `limit` characters, and whether it was cut.

    Encoding stops at the cut: at most one part past it is ever built.
    """
    whole = json_within(value, limit)
    if whole is not None:
        return whole, False
    chunks = json.JSONEncoder(ensure_ascii=False).iterencode(value)
    text: list[str] = []
    size = 0
    try:
        for chunk in chunks:
            text.append(chunk[: limit - size])
            size += len(text[-1])
            if size >= limit:
                break
    except RecursionError:  # nested too deeply to go on: what was written is the start of the text
        pass
    return "".join(text), True


__all__ = ["json_length", "json_prefix", "json_within"]
