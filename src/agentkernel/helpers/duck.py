"""`db_execute`, `db_query`, `db_schema` (S12): DuckDB files for scripts.

The helpers check the script's arguments and turn its path into the caller's
file; the `duckdb` service (services/duck.py) does the rest.

Paths (S12.4). A path is relative to the DuckDB folder and may hold
`{user}`, `{session}`, `{template}` and `{agent}` (the same as `{template}`),
each replaced by the caller's id made safe: `u@`, `s@` or `t@` followed by
`safe_folder_name(id)` (readable part + hash, never a separator or `..`).
`{session}` is the user's session (`session_folder_name(user, session)`):
user B who reuses user A's session id gets a file of B's own.
The `@` is reserved: the script's own text may not contain it, so the only
way to name a folder like `u@alice-…` is to be alice — user B can neither
guess nor list their way into user A's database (and the
file helpers cannot read the DuckDB folder at all, S14.3). A placeholder
whose id this call does not have is an error.

In a trace (S26.1) a call is a CLIENT span: `db.system` duckdb, the
operation, the path as the script wrote it (placeholders unreplaced: no
user id), the rows a query returned; the SQL text only with
`telemetry.capture_content` (a statement may hold user data).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agentkernel.errors import HelperError
from agentkernel.helpers.table import HelperTable, ScriptCall, Traced
from agentkernel.identity import safe_folder_name, session_folder_name
from agentkernel.ports import DUCKDB, DuckDB, Params
from agentkernel.telemetry.helper_spans import Attributes, content_captured
from agentkernel.types import JSONValue

MARKER = "@"

# placeholder → (kind letter, the Caller attribute holding the id)
PLACEHOLDERS: dict[str, tuple[str, str]] = {
    "user": ("u", "user_id"),
    "session": ("s", "session_id"),
    "template": ("t", "template"),
    "agent": ("t", "template"),  # S11.2: the agent is its template
}
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_KNOWN = ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)


def _service(name: str, call: ScriptCall) -> DuckDB:
    return call.caller.services.require(DUCKDB, name)


def _literal(name: str, path: str, text: str) -> str:
    """Script-written text of a path: no reserved `@`, no stray braces."""
    if MARKER in text:
        raise HelperError(f"{name}: path {path!r} may not contain '{MARKER}' (it marks placeholder folders)")
    if "{" in text or "}" in text:
        raise HelperError(f"{name}: path {path!r} has an unmatched '{{' or '}}'")
    return text


def _identity(name: str, call: ScriptCall, path: str, placeholder: str) -> str:
    """The caller's id for one placeholder, as a marked folder-safe name."""
    if placeholder not in PLACEHOLDERS:
        raise HelperError(f"{name}: unknown placeholder {{{placeholder}}} in path {path!r} (known: {_KNOWN})")
    kind, attribute = PLACEHOLDERS[placeholder]
    identifier = getattr(call.caller, attribute)
    if not identifier:
        raise HelperError(f"{name}: path {path!r} uses {{{placeholder}}} but this call has no {placeholder}")
    if placeholder == "session":
        return f"{kind}{MARKER}{session_folder_name(call.caller.user_id, identifier)}"
    return f"{kind}{MARKER}{safe_folder_name(identifier)}"


def resolve_path(name: str, call: ScriptCall, path: JSONValue) -> str:
    """The path with its placeholders replaced by the caller's ids (S12.4)."""
    if not isinstance(path, str) or not path:
        raise HelperError(f"{name}: path must be a non-empty string, got {path!r}")
    pieces: list[str] = []
    start = 0
    for match in _PLACEHOLDER.finditer(path):
        pieces.append(_literal(name, path, path[start : match.start()]))
        pieces.append(_identity(name, call, path, match[1]))
        start = match.end()
    pieces.append(_literal(name, path, path[start:]))
    return "".join(pieces)


def _sql(name: str, sql: JSONValue) -> str:
    if not isinstance(sql, str) or not sql.strip():
        raise HelperError(f"{name}: sql must be a non-empty string, got {sql!r}")
    return sql


def _limit(name: str, limit: JSONValue) -> int | None:
    """A whole number of rows ≥ 0 (Rhai's `10.0` is 10); None means `max_rows`."""
    if limit is None:
        return None
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise HelperError(f"{name}: limit must be a whole number ≥ 0, got {limit!r}")
    return limit


def _run(
    name: str, call: ScriptCall, path: JSONValue, operation: str, *args: object, **options: bool
) -> JSONValue:
    """Resolve the path, call the service, and name the helper and the path in any error."""
    from agentkernel.services.duck import DuckError  # duckdb: imported by the first db_* call

    service = _service(name, call)
    relative = resolve_path(name, call, path)
    try:
        method = getattr(service, operation)
        return method(relative, *args, remaining=call.remaining_secs(), **options)  # type: ignore[no-any-return]
    except DuckError as exc:
        raise HelperError(f"{name}: {path!r}: {exc}") from exc


def _params(name: str, params: JSONValue) -> Params:
    """Values for `?`/`$1` (an array) or `$name` (an object) parameters; None when not given."""
    if params is None or isinstance(params, list | dict):
        return params
    raise HelperError(f"{name}: params must be an array or an object, got {params!r}")


def db_execute(call: ScriptCall, path: JSONValue, sql: JSONValue, params: JSONValue = None) -> JSONValue:
    """Run SQL that changes the database; `{ok: true, rows_affected}`. Creates the file."""
    checked = (_sql("db_execute", sql), _params("db_execute", params))
    affected = _run("db_execute", call, path, "execute", *checked)
    return {"ok": True, "rows_affected": affected}


QUERY_OPTIONS = ("read_only",)


def _query_options(options: JSONValue) -> dict[str, bool]:
    """`{read_only: true}`: the options object of db_query; an unknown key or a non-boolean is refused."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise HelperError(f"db_query: options must be an object, got {options!r}")
    for key, value in options.items():
        if key not in QUERY_OPTIONS:
            raise HelperError(f"db_query: unknown option {key!r} (known: {', '.join(QUERY_OPTIONS)})")
        if not isinstance(value, bool):
            raise HelperError(f"db_query: option {key!r} must be true or false, got {value!r}")
    return {key: bool(value) for key, value in options.items()}


def db_query(
    call: ScriptCall,
    path: JSONValue,
    sql: JSONValue,
    limit: JSONValue = None,
    params: JSONValue = None,
    options: JSONValue = None,
) -> JSONValue:
    """`{columns, rows, count, has_more}`, rows as objects keyed by column name (S12.1, S12.4).

    `options.read_only` makes the call refuse any SQL that writes (the service
    checks the statement kinds and runs a READ ONLY transaction), so a tool can
    hand SQL from an LLM to a database it must not change.
    """
    rows = _limit("db_query", limit)
    checked = (_sql("db_query", sql), _params("db_query", params))
    flags = _query_options(options)
    cap = _service("db_query", call).settings.max_rows if rows is None else rows
    return _run("db_query", call, path, "query", checked[0], cap, checked[1], **flags)


def db_schema(call: ScriptCall, path: JSONValue, table: JSONValue = None) -> JSONValue:
    """The tables and views with their columns, as text (S12.1)."""
    if table is not None and (not isinstance(table, str) or not table):
        raise HelperError(f"db_schema: table must be a non-empty string, got {table!r}")
    return _run("db_schema", call, path, "schema", table)


# -- in a trace (S26.1) ---------------------------------------------------------------------------


def traced(operation: str, *, sql: bool) -> Traced:
    """The span of a `db_<operation>(path, sql?, …)` call; the SQL only when contents are captured."""

    def before(_: ScriptCall, args: Sequence[JSONValue]) -> Attributes:
        attributes: dict[str, str] = {"db.system": "duckdb", "db.operation.name": operation}
        if args and isinstance(args[0], str):
            attributes["db.namespace"] = args[0]
        if sql and len(args) > 1 and isinstance(args[1], str) and content_captured():
            attributes["db.query.text"] = args[1]
        return attributes

    return Traced(before, _returned_rows, client=True)


def _returned_rows(result: JSONValue) -> Attributes:
    count = result.get("count") if isinstance(result, dict) else None
    return {"db.response.returned_rows": count} if isinstance(count, int) else {}


def register(table: HelperTable) -> None:
    table.register("db_execute", db_execute, traced=traced("execute", sql=True))
    table.register("db_query", db_query, traced=traced("query", sql=True))
    table.register("db_schema", db_schema, traced=traced("schema", sql=False))
