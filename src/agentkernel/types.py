"""The values that cross the script boundary, stated once as plain types.

Everything a script receives or returns, every helper argument and result,
is one of these (DESIGN rule 1): engines convert their own values to and from
them at the boundary, and nothing else crosses.
"""

from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = dict[str, JSONValue]
VisualBlock: TypeAlias = dict[str, JSONValue]

__all__ = ["JSONObject", "JSONValue", "VisualBlock"]
