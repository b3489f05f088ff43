"""Copying a Rhai value: arrays, maps and BLOBs are values, so a copy copies what they hold.

A big container's copy looks at the deadline first (pacing.py).
"""

from __future__ import annotations

from agentkernel.rhai.runtime.pacing import POLL_SIZE, poll
from agentkernel.rhai.runtime.values import TAGGED_CONTAINERS, plain, with_tag

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any


def clone(value: Any) -> Any:
    """A Rhai value copy: arrays, maps and blobs are values, so nested ones copy too
    (a tagged one with its tag)."""
    kind = type(value)
    if kind is list:
        if len(value) >= POLL_SIZE:
            poll()
        return [clone(v) if type(v) in _CONTAINERS else v for v in value]
    if kind is dict:
        if len(value) >= POLL_SIZE:
            poll()
        return {k: clone(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if kind is bytearray:
        return bytearray(value)
    if kind in TAGGED_CONTAINERS:  # a copy keeps the tag
        return with_tag(clone(plain(value)), value.tag)
    return value


_CONTAINERS = frozenset({list, dict, bytearray, *TAGGED_CONTAINERS})


__all__ = ["clone"]
