"""Natives that need more than the standard library: `parse_json` and `get_fn_metadata_list`."""

from __future__ import annotations

import re

from agentkernel.rhai.errors import NO_POS, RhaiRuntimeError, RhaiSyntaxError
from agentkernel.rhai.runtime import failures
from agentkernel.rhai.runtime.data_size import LIST, LIST_SLOT, MAP, MAP_ENTRY, SCALAR, STRING
from agentkernel.rhai.runtime.failures import ARRAY_TOO_LARGE
from agentkernel.rhai.runtime.values import I64_MAX, I64_MIN, type_name
from agentkernel.rhai.stdlib import Library
from agentkernel.rhai.syntax.words import is_reserved

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import json
    from typing import Any

    from agentkernel.rhai.runtime.runtime import Runtime, ScriptFn

# JSON's complaints in the words of the reference, which reads JSON as a map literal
_MESSAGES = {
    "Expecting property name enclosed in double quotes": "Expecting name of a property",
    "Expecting ':' delimiter": "Expecting ':' to follow the property in this object map literal",
    "Expecting ',' delimiter": "Expecting ',' to separate the items of this object map literal",
    "Expecting value": "Script is incomplete",
}


class _Duplicate(ValueError):
    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(key)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Duplicate(key)
        result[key] = value
    return result


def _integer(text: str) -> int | float:
    """JSON integers are i64 when they fit, floats beyond, as Rhai's literals are."""
    value = int(text)
    return value if I64_MIN <= value <= I64_MAX else float(value)


def _parse_error(message: str, line: int, column: int) -> RhaiRuntimeError:
    text = RhaiSyntaxError(message, (line, column)).display()
    return failures.parsing(text, NO_POS)


_NAME = r"_*[A-Za-z][A-Za-z0-9_]*"  # compiled (and kept by `re`) for an error's wording only


def _variable_at(text: str, exc: json.JSONDecodeError) -> str | None:
    """The name a value position holds, when the text is JSON but for names there.

    The reference reads the text as a Rhai map literal and evaluates it: a name
    (`parse_json("bad")`, `{"a": x}`) parses as a variable, which is not found.
    Here no name is ever looked up: the first one is reported as the reference
    does, provided the text parses once every such name is read as `null`.
    """
    if exc.msg != "Expecting value":
        return None
    match = re.compile(_NAME).match(text, exc.pos)
    if match is None or is_reserved(match.group()) or match.group() in ("true", "false", "null"):
        return None
    rest = text[: exc.pos] + "null" + text[match.end() :]
    import json

    try:
        json.loads(rest)
    except json.JSONDecodeError as again:
        if _variable_at(rest, again) is None:
            return None
    except (ValueError, RecursionError):
        return None
    return match.group()


def _variable_not_found(name: str, line: int, column: int) -> RhaiRuntimeError:
    error = failures.variable_not_found(name)
    error.pos = (line, column)
    return error


def _parsed_size(text: str) -> int:
    """At most what parsing `text` builds: each bracket a container, each comma an item."""
    containers = text.count("[") * (LIST + LIST_SLOT) + text.count("{") * (MAP + MAP_ENTRY)
    return containers + (text.count(",") + text.count(":") + 1) * (SCALAR + STRING) + len(text)


def parse_json(ctx: Runtime, text: str) -> Any:
    """`parse_json(text)`: a map from JSON text, `null` as `()` (RHAI.md §13).

    Parsed as data, never run as code: it cannot print, loop or call anything. The
    reference evaluates the text as a script of its own, whose operations count from 0: so
    are they counted here, as one evaluation (`Runtime.count_evaluation`).
    Short text can make many values (`[[],[],…]`), so what it may build is
    reserved against the data limit before parsing.
    """
    import json  # here: a script that never parses JSON never loads the module

    ctx.reserve_data(_parsed_size(text), ARRAY_TOO_LARGE)
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_int=_integer)
    except json.JSONDecodeError as exc:
        name = _variable_at(text, exc)
        if name is not None:
            raise _variable_not_found(name, exc.lineno, exc.colno) from None
        raise _parse_error(_MESSAGES.get(exc.msg, exc.msg), exc.lineno, exc.colno) from None
    except _Duplicate as exc:
        raise _parse_error(f"Duplicated property for object map literal: {exc.key}", 1, 1) from None
    except RecursionError:
        raise _parse_error("Expression exceeds maximum complexity", 1, 1) from None
    if type(value) is not dict:
        raise failures.mismatch_output(type_name(value), "map")
    ctx.count_evaluation(1 + _nodes(value))  # the statement and its map literal's nodes
    return value


def _nodes(value: Any) -> int:
    """The expression nodes of a value written as a literal: 1 each value, item and entry."""
    if type(value) is dict:
        return 1 + sum(map(_nodes, value.values()))
    if type(value) is list:
        return 1 + sum(map(_nodes, value))
    return 1


def fn_metadata(ctx: Runtime, name: str | None = None, arity: int | None = None) -> list[dict[str, Any]]:
    """`get_fn_metadata_list([name[, arity]])`: the script's functions, typed methods
    included (with their `this_type`), one map each, with the reference's keys."""
    functions = [*ctx.functions.values(), *ctx.methods.values()]
    return [
        _metadata(fn)
        for fn in sorted(functions, key=lambda fn: (fn.name, fn.arity, fn.this_type or ""))
        if (name is None or fn.name == name) and (arity is None or fn.arity == arity)
    ]


def _metadata(fn: ScriptFn) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "access": "private" if fn.private else "public",
        "is_anonymous": False,
        "name": fn.name,
        "params": list(fn.params),
    }
    if fn.this_type is not None:
        entry["this_type"] = fn.this_type
    return entry


def register(library: Library) -> None:
    library.register("parse_json", (str,), parse_json, needs_context=True)
    library.register("get_fn_metadata_list", (), lambda ctx: fn_metadata(ctx), needs_context=True)
    library.register("get_fn_metadata_list", (str,), fn_metadata, needs_context=True)
    library.register("get_fn_metadata_list", (str, int), fn_metadata, needs_context=True)
