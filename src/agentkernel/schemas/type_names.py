"""JSON Schema's type names, and a suggestion for the names other languages give them.

`type: int` is a Python habit, not a typo that difflib can see (`int` is too
short to be a near miss, `bool` too far from `boolean`), so the names people
carry over from Python, JavaScript, YAML or SQL map to JSON Schema's own.
"""

from __future__ import annotations

from agentkernel.util.near_miss import did_you_mean

TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")

_FOREIGN = {
    "int": "integer",
    "long": "integer",
    "str": "string",
    "text": "string",
    "bool": "boolean",
    "float": "number",
    "double": "number",
    "decimal": "number",
    "dict": "object",
    "map": "object",
    "mapping": "object",
    "list": "array",
    "tuple": "array",
    "none": "null",
    "nonetype": "null",
}


def type_hint(value: object) -> str:
    """`; did you mean 'integer'?` for a `type` JSON Schema lacks (`int`, `strin`), or "".

    For a list of types, the hint names the first item it is for.
    """
    if isinstance(value, list):
        for item in value:
            hint = type_hint(item)
            if hint:
                return f"{hint.removesuffix('?')} for {item!r}?"
        return ""
    if not isinstance(value, str) or value in TYPES:
        return ""
    lower = value.lower()
    known = _FOREIGN.get(lower) or (lower if lower in TYPES else None)
    return f"; did you mean {known!r}?" if known is not None else did_you_mean(value, TYPES)


__all__ = ["TYPES", "type_hint"]
