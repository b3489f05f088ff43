"""DuckDB values → plain JSON-safe Python values (S12.3, DESIGN rule 1).

DuckDB's Python client returns `datetime`, `Decimal`, `UUID`, `bytes`,
`timedelta`, tuples and dicts with non-string keys; a script may only
receive None, bool, int, float, str, list and dict with string keys, and its
result must survive `json.dumps(allow_nan=False)`. The decisions:

- TIMESTAMP, DATE, TIME: ISO 8601 (`2024-01-02T03:04:05.5`, `2024-01-02`,
  `03:04:05`); TIMESTAMPTZ in UTC with `+00:00`; TIMETZ with its offset.
  Dates outside Python's range arrive from DuckDB as text and stay text.
- INTERVAL: an ISO 8601 duration (`P423DT4H5.5S`) built from DuckDB's own
  conversion, in which a month counts as 30 days.
- DECIMAL: a float when the float's shortest form is exactly the decimal
  (every value of up to 15 significant digits), else the decimal's exact
  digits as a string, so no precision is lost silently.
- Integers beyond the signed 64-bit range (HUGEINT, UBIGINT): strings.
- NaN and ±infinity floats: the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.
- BLOB: base64; UUID: its text; LIST/ARRAY: a list; STRUCT: an object;
  MAP: an object whose keys are the converted keys as text (JSON text for
  non-string keys); JSON columns: the parsed value.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import re
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from agentkernel.types import JSONValue

_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1

Converter = Callable[[Any], JSONValue]

# Column types whose values DuckDB already hands over as plain JSON-safe Python values.
_PLAIN_TYPES = frozenset(
    {"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "VARCHAR"}
)


def _int(value: int) -> JSONValue:
    return value if _I64_MIN <= value <= _I64_MAX else str(value)


def _float(value: float) -> JSONValue:
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _decimal(value: Decimal) -> JSONValue:
    if not value.is_finite():
        return str(value)
    number = float(value)
    return number if Decimal(repr(number)) == value else str(value)


def _datetime(value: dt.datetime) -> JSONValue:
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC)
    return value.isoformat()


def _iso(value: dt.date | dt.time) -> JSONValue:
    return value.isoformat()


def _interval(value: dt.timedelta) -> JSONValue:
    """ISO 8601 duration; a negative interval gets a leading minus (`-P1D`)."""
    micros = value // dt.timedelta(microseconds=1)
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    days, micros = divmod(micros, 86_400_000_000)
    hours, micros = divmod(micros, 3_600_000_000)
    minutes, micros = divmod(micros, 60_000_000)
    seconds = f"{micros / 1_000_000:.6f}".rstrip("0").rstrip(".")
    time = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M")) if n)
    if seconds != "0":
        time += f"{seconds}S"
    text = (f"{days}D" if days else "") + (f"T{time}" if time else "")
    return f"{sign}P{text or 'T0S'}"


def _bytes(value: bytes | bytearray | memoryview) -> JSONValue:
    return base64.b64encode(bytes(value)).decode("ascii")


def _uuid(value: uuid.UUID) -> JSONValue:
    return str(value)


def _list(value: Sequence[Any]) -> JSONValue:
    return [plain(item) for item in value]


def _key(key: Any) -> str:
    converted = plain(key)
    return converted if isinstance(converted, str) else json.dumps(converted)


def _dict(value: dict[Any, Any]) -> JSONValue:
    return {_key(key): plain(item) for key, item in value.items()}


_BY_TYPE: dict[type, Converter] = {
    int: _int,
    float: _float,
    Decimal: _decimal,
    dt.datetime: _datetime,
    dt.date: _iso,
    dt.time: _iso,
    dt.timedelta: _interval,
    bytes: _bytes,
    bytearray: _bytes,
    memoryview: _bytes,
    uuid.UUID: _uuid,
    list: _list,
    tuple: _list,
    dict: _dict,
}


def plain(value: Any) -> JSONValue:
    """One DuckDB value, of any type and nesting, as a JSON-safe plain value."""
    if value is None or value is True or value is False or type(value) is str:
        return value
    converter = _BY_TYPE.get(type(value))
    if converter is not None:
        return converter(value)
    for kind, fallback in _BY_TYPE.items():  # subclasses (an IntEnum, a str subclass, …)
        if isinstance(value, kind):
            return fallback(value)
    return value if isinstance(value, str) else str(value)


def _json_column(value: Any) -> JSONValue:
    return None if value is None else plain(json.loads(value)) if isinstance(value, str) else plain(value)


def _nullable(converter: Converter) -> Converter:
    """A column converter without the type dispatch of `plain`.

    NULL passes through, and so does text: DuckDB hands over dates outside
    Python's range already as text.
    """

    def convert(value: Any) -> JSONValue:
        return value if value is None or type(value) is str else converter(value)

    return convert


def _short_decimal(value: Decimal) -> JSONValue:
    return float(value)  # up to 15 significant digits: the float is always exactly the decimal


_DECIMAL = re.compile(r"DECIMAL\((\d+),\d+\)")
_BY_COLUMN: dict[str, Converter] = {
    "JSON": _json_column,
    "DOUBLE": _nullable(_float),
    "FLOAT": _nullable(_float),
    "DATE": _nullable(_iso),
    "TIME": _nullable(_iso),
    "TIMESTAMP": _nullable(_datetime),
}


def column_converter(type_name: str) -> Converter | None:
    """The converter for a result column of this DuckDB type; None when values pass as they are."""
    if type_name in _PLAIN_TYPES:
        return None
    decimal = _DECIMAL.fullmatch(type_name)
    if decimal is not None:
        return _nullable(_short_decimal if int(decimal[1]) <= 15 else _decimal)
    converter: Converter = _BY_COLUMN.get(type_name, plain)
    return converter


def convert_rows(
    names: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]]
) -> list[dict[str, JSONValue]]:
    """Rows as objects keyed by column name (S12.4), each value converted for its column."""
    converters = [column_converter(type_name) for type_name in types]
    if all(converter is None for converter in converters):
        return [dict(zip(names, row, strict=True)) for row in rows]
    pairs = list(zip(names, converters, strict=True))
    return [
        {
            name: value if convert is None else convert(value)
            for (name, convert), value in zip(pairs, row, strict=True)
        }
        for row in rows
    ]


def unique_names(names: Sequence[str]) -> list[str]:
    """Column names made unique (`a`, `a_1`, …), so no value of a row object is lost."""
    seen: set[str] = set()
    result: list[str] = []
    for name in names:
        candidate, n = name, 0
        while candidate in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate)
        result.append(candidate)
    return result


__all__ = ["column_converter", "convert_rows", "plain", "unique_names"]
