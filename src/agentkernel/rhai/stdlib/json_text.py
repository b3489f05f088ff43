"""`to_json` (RHAI.md §13 "Maps"; Rhai 1.25 `format_map_as_json`): maps only.

Compact, keys sorted, `()` as `null`, but not strict JSON where the
reference is not: chars as `'c'`, floats in Rust's debug form (`1.0`,
`1e20`), an Fn as its name (a curried one as `["name", args…]`), a range as
`1..3`, a BLOB as an array of byte values.
"""

from __future__ import annotations

from typing import Any

from agentkernel.rhai.runtime.pacing import paced
from agentkernel.rhai.runtime.printing import format_float_debug, to_debug
from agentkernel.rhai.runtime.values import TAGGED, Char, FnPtr, plain
from agentkernel.rhai.stdlib.registry import Library


def char_debug(c: str) -> str:
    """Rust's `{:?}` for a char: quoted, with `\\'`, `\\\\`, `\\n`, … escaped."""
    escapes = {"'": "\\'", "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}
    if c in escapes:
        return f"'{escapes[c]}'"
    if not c.isprintable() and c != " ":
        return f"'\\u{{{ord(c):x}}}'"
    return f"'{c}'"


def map_to_json(m: dict[str, Any]) -> str:
    return "{" + ",".join(f"{to_debug(key)}:{value_to_json(m[key])}" for key in paced(sorted(m))) + "}"


def value_to_json(value: Any) -> str:
    kind = type(value)
    if value is None:
        return "null"
    if kind is dict:
        return map_to_json(value)
    if kind is list:
        return "[" + ",".join(value_to_json(v) for v in paced(value)) + "]"
    if kind is bytearray:
        return "[" + ",".join(str(b) for b in value) + "]"
    if kind is FnPtr:
        if value.curried:
            return "[" + ",".join([to_debug(value.name), *(value_to_json(v) for v in value.curried)]) + "]"
        return to_debug(value.name)
    if kind is Char:
        return char_debug(value)
    if kind is float:
        return format_float_debug(value)
    if kind in TAGGED:
        return value_to_json(plain(value))
    return to_debug(value)


def register(lib: Library) -> None:
    lib.register("to_json", (dict,), map_to_json)


__all__ = ["char_debug", "map_to_json", "register", "value_to_json"]
