"""Text that crosses from a script is made valid Unicode, so it can always be written as UTF-8.

A JavaScript string is UTF-16 and may hold a lone surrogate
(`"\\ud800"`, `String.fromCharCode(0xD800)`); so may a Rhai string built
by `parse_json`. Python keeps such a code point in a `str`, and the first
UTF-8 write of it (printing, SQLite, a socket) raises UnicodeEncodeError.
Where script values enter the kernel (a tool's result, a hook's verdict, a
log line), each lone surrogate becomes U+FFFD and the caller warns that it
did; nothing else is changed, so the text keeps its length.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agentkernel.types import JSONValue

REPLACEMENT = "\ufffd"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_warning(what: str) -> str:
    """The warning of a repair: `the result contained invalid Unicode (lone surrogate); …`."""
    return f"{what} contained invalid Unicode (lone surrogate); replaced with U+FFFD"


def has_lone_surrogate(text: str) -> bool:
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def repair_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (the same object when there is none)."""
    return _LONE_SURROGATE.sub(REPLACEMENT, text) if has_lone_surrogate(text) else text


def repair_value(value: JSONValue) -> tuple[JSONValue, bool]:
    """The value with every string (keys too) repaired, and whether anything was.

    Lists and dicts are changed in place: pass values the caller owns. The
    walk is iterative, so a value nested as deep as a script could build it
    is no problem.
    """
    if isinstance(value, str):
        fixed = repair_text(value)
        return fixed, fixed is not value
    repaired = False
    pending: list[list[JSONValue] | dict[str, JSONValue]] = [value] if isinstance(value, list | dict) else []
    while pending:
        item: Any = pending.pop()  # a list or a dict, indexed alike below
        if isinstance(item, dict):
            repaired = _repair_keys(item) or repaired
        slots: Iterable[tuple[Any, JSONValue]] = item.items() if isinstance(item, dict) else enumerate(item)
        for slot, element in slots:
            if isinstance(element, str):
                fixed = repair_text(element)
                if fixed is not element:
                    item[slot], repaired = fixed, True  # the same slot: a dict being iterated may take it
            elif isinstance(element, list | dict):
                pending.append(element)
    return value, repaired


def _repair_keys(mapping: dict[str, JSONValue]) -> bool:
    """Repair the keys of `mapping` in place, keeping their order; True when one changed."""
    if not any(isinstance(key, str) and has_lone_surrogate(key) for key in mapping):
        return False
    entries = [
        (repair_text(key) if isinstance(key, str) else key, element) for key, element in mapping.items()
    ]
    mapping.clear()
    mapping.update(entries)
    return True


__all__ = ["REPLACEMENT", "has_lone_surrogate", "repair_text", "repair_value", "surrogate_warning"]
