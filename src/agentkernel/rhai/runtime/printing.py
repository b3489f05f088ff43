"""How Rhai values print: `print`/`to_string`, `debug`/`to_debug`, the runner's display (RHAI.md §5).

Floats as Rust prints them; strings, chars, arrays, maps and BLOBs as the
reference shows them. Printing a big array walks it: the walk looks at the
deadline as it goes (pacing.py).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from agentkernel.rhai.runtime.pacing import CHUNK, paced, poll_size
from agentkernel.rhai.runtime.values import (
    TAGGED,
    Char,
    FnPtr,
    IterVal,
    RangeVal,
    Timestamp,
    plain,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

_F32_HIGH = struct.unpack("f", struct.pack("f", 1e13))[0]
_F32_LOW = struct.unpack("f", struct.pack("f", 1e-13))[0]


def _shortest_digits(x: float) -> tuple[str, int]:
    """Shortest round-trip digits of |x| and the decimal exponent of the first digit."""
    text = repr(abs(x))
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    leading_zeros = len(whole + fraction) - len((whole + fraction).lstrip("0"))
    point = len(whole) - leading_zeros + (int(exponent) if exponent else 0)
    digits = digits.rstrip("0") or "0"
    return digits, point - 1


def format_float(x: float) -> str:
    """Rhai's f64 display: Rust's shortest decimal inside the f32 band, `{:e}` outside it."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0.0"
    sign = "-" if x < 0 else ""
    digits, exp10 = _shortest_digits(x)
    if _F32_LOW <= abs(x) <= _F32_HIGH:
        if exp10 >= 0:
            whole = digits[: exp10 + 1].ljust(exp10 + 1, "0")
            fraction = digits[exp10 + 1 :] or "0"
        else:
            whole = "0"
            fraction = "0" * (-exp10 - 1) + digits
        return f"{sign}{whole}.{fraction}"
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{exp10}"


def format_float_debug(x: float) -> str:
    """Rust's `{:?}` for f64, which `to_debug`/`debug` and array or map elements use:
    plain decimal (at least one fraction digit) when 1e-4 <= |x| < 1e16, else `1e16`
    style; `-0.0` keeps its sign."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return f"{sign}0.0"
    digits, exp10 = _shortest_digits(x)
    if 1e-4 <= abs(x) < 1e16:
        return sign + _plain_decimal(digits, exp10, min_fraction=1)
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{exp10}"


def format_float_rust(x: float) -> str:
    """Rust's `{}` for f64 (never an exponent, no `.0` on whole numbers): how a few
    error messages quote a float, e.g. `Integer overflow: to_int(1000000000000000000000000000000)`."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return f"{sign}0"
    digits, exp10 = _shortest_digits(x)
    return sign + _plain_decimal(digits, exp10, min_fraction=0)


def _plain_decimal(digits: str, exp10: int, *, min_fraction: int) -> str:
    """`digits` (first digit at 10**exp10) written out without an exponent."""
    if exp10 >= 0:
        whole = digits[: exp10 + 1].ljust(exp10 + 1, "0")
        fraction = digits[exp10 + 1 :]
    else:
        whole = "0"
        fraction = "0" * (-exp10 - 1) + digits
    fraction = fraction or "0" * min_fraction
    return f"{whole}.{fraction}" if fraction else whole


def _blob_hex(blob: bytearray) -> str:
    """Rhai prints a BLOB as hex with a space after every 8 bytes: `[0001020304050607 08]`."""
    text = blob.hex()
    return " ".join(text[i : i + 16] for i in range(0, len(text), 16))


def _debug_str(text: str) -> str:
    """Rust's `{:?}` for a string: quotes and escapes (plain stretches of text copied whole)."""
    out = ['"']
    for start in range(0, len(text), CHUNK):
        piece = text[start : start + CHUNK]
        poll_size(len(piece))
        if piece.isprintable() and '"' not in piece and "\\" not in piece:
            out.append(piece)
        else:
            _escape_into(out, piece)
    out.append('"')
    return "".join(out)


def _escape_into(out: list[str], text: str) -> None:
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\0":
            out.append("\\0")
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        else:
            out.append(f"\\u{{{ord(ch):x}}}")


def _debug_char(ch: str) -> str:
    """Rust's `{:?}` for a char: `'c'`, with `'\''`, `'\n'` and friends escaped."""
    escapes = {"'": "\\'", "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}
    if ch in escapes:
        return f"'{escapes[ch]}'"
    if ch.isprintable() or ch == " ":
        return f"'{ch}'"
    return f"'\\u{{{ord(ch):x}}}'"


def _element(value: Any) -> str:
    """How a value shows inside an array or map: debug form, chars unquoted."""
    kind = type(value)
    if kind is Char:
        return str.__str__(value)
    if kind is float:
        return format_float_debug(value)
    return to_debug(value)


def to_display(value: Any) -> str:
    """How the reference's runner prints a script's result: like `to_string`,
    but chars inside arrays and maps are quoted (`['h', 'é']`)."""
    kind = type(value)
    if kind is list:
        return "[" + ", ".join(_displayed_element(v) for v in paced(value)) + "]"
    if kind is dict:
        items = sorted(value.items())
        return "#{" + ", ".join(f"{_debug_str(k)}: {_displayed_element(v)}" for k, v in paced(items)) + "}"
    return to_string(value)


def _displayed_element(value: Any) -> str:
    value = plain(value)
    kind = type(value)
    if kind is Char:
        return _debug_char(value)
    if kind is list or kind is dict:
        return to_display(value)
    return _element(value)


def to_string(value: Any) -> str:
    """`to_string` / `print` / interpolation."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[no-any-return]
    if kind is Char:
        return str.__str__(value)
    if value is None:
        return ""
    return _shared_form(value)


def to_debug(value: Any) -> str:
    """`to_debug` / `debug`."""
    kind = type(value)
    if kind is str:
        return _debug_str(value)
    if kind is Char:
        return str.__str__(value)
    if value is None:
        return "()"
    if kind is float:
        return format_float_debug(value)
    return _shared_form(value, to_debug)


def _shared_form(value: Any, form: Callable[[Any], str] = to_string) -> str:
    kind = type(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is float:
        return format_float(value)
    if kind is list:
        return "[" + ", ".join(_element(v) for v in paced(value)) + "]"
    if kind is dict:
        items = sorted(value.items())
        return "#{" + ", ".join(f"{_debug_str(k)}: {_element(v)}" for k, v in paced(items)) + "}"
    if kind is RangeVal:
        return f"{value.start}..{'=' if value.inclusive else ''}{value.end}"
    if kind is FnPtr:
        return f"Fn({value.name})"
    if kind is Timestamp:
        return "<timestamp>"
    if kind is bytearray:
        return "[" + _blob_hex(value) + "]"
    if kind is IterVal:
        return str(value.rust_name)
    if kind in TAGGED:
        return form(plain(value))
    return repr(value)


# the types the reference prints with a function of their own (string_basic.rs): any other's
# `print`/`debug` calls its `to_string`/`to_debug` (`print_with_func`), a native's call
_PRINTED_ITSELF = frozenset({str, Char, bool, type(None), float})


def calls_to_print(value: Any, debug: bool) -> int:
    """How deep the reference's `print(value)` (or `debug`) nests calls of natives, each
    counted on a copy of its state: 1 for a value without a print function of its own
    (`debug` has one for function pointers), an array's or a map's items' (`calls_to_format`)."""
    kind = TAGGED.get(type(value), type(value))
    if kind is list or kind is dict:
        return _item_calls(value)
    return 0 if kind in _PRINTED_ITSELF or (debug and kind is FnPtr) else 1


def calls_to_format(value: Any) -> int:
    """How deep the reference's `to_string(value)` (or `to_debug`) nests calls of natives: an
    array or a map calls `to_debug` for each item, an item array or map for each of its own."""
    kind = TAGGED.get(type(value), type(value))
    return _item_calls(value) if kind is list or kind is dict else 0


def _item_calls(container: Any) -> int:
    deepest = 0
    for item in container.values() if isinstance(container, dict) else container:
        kind = TAGGED.get(type(item), type(item))
        depth = 1 + _item_calls(item) if kind is list or kind is dict else 1
        if depth > deepest:
            deepest = depth
    return deepest


__all__ = [
    "calls_to_format",
    "calls_to_print",
    "format_float",
    "format_float_debug",
    "format_float_rust",
    "to_debug",
    "to_display",
    "to_string",
]
