"""The values that cross the script boundary, stated once as plain types.

Everything a script receives or returns, every helper argument and result,
is one of these (DESIGN rule 1): engines convert their own values to and from
them at the boundary, and nothing else crosses. `NoValue` is what a function
gave when it returned nothing at all.
"""

from __future__ import annotations

from typing import Final, TypeAlias

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = dict[str, JSONValue]
VisualBlock: TypeAlias = dict[str, JSONValue]


class NoValue:
    """What a function returned when it returned nothing at all (JS `undefined`).

    Distinct from None (JS null, Rhai `()`): a tool that forgets `return` fails
    with a clear message, while a hook that returns nothing simply has no verdict.
    """

    _instance: NoValue | None = None

    def __new__(cls) -> NoValue:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_VALUE"

    def __bool__(self) -> bool:
        return False


NO_VALUE: Final = NoValue()

__all__ = ["NO_VALUE", "JSONObject", "JSONValue", "NoValue", "VisualBlock"]
