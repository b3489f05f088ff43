"""The state helpers (S11): `state_get`, `state_set`, … on the caller's own namespaces.

A script names only a scope — `session`, `user`, `agent` (the caller's
template) or `global` — never an id: the id comes from the `Caller` the
kernel built (S11.2, DESIGN rule 3), so no script input can reach another
user's or session's keys. A `session` namespace is the user's session
(`session_key`): user B who reuses user A's session id still gets B's own
keys. Every write counts against the caller's user's quota
(`state.max_user_bytes`, see services/state.py). The store is the named service `state`
(`services/state.py`); without it every call throws (S11.3).

Script input is checked here (scope, key, indexes); the store checks what
storing means (JSON form, sizes, types of keys). Every wait on the store is
bounded by the script call's remaining time. In a trace (S26.1) a call is a
span with its scope (`agentkernel.state.scope`), never a key or a value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

from agentkernel.errors import HelperError
from agentkernel.helpers.table import HelperTable, ScriptCall, Traced
from agentkernel.identity import Caller, session_key
from agentkernel.ports import STATE, Namespace, StateStore
from agentkernel.services.state import StateError
from agentkernel.telemetry.helper_spans import Attributes
from agentkernel.types import JSONValue
from agentkernel.util.short_text import shown_value

MAX_KEY_BYTES = 1024


def _session_owner(caller: Caller) -> str | None:
    """A session's keys belong to the user's session, never to the session id alone (`session_key`)."""
    return session_key(caller.user_id, caller.session_id) if caller.session_id is not None else None


_SCOPES: dict[str, Callable[[Caller], str | None]] = {
    "session": _session_owner,
    "user": lambda caller: caller.user_id,
    "agent": lambda caller: caller.template,
    "global": lambda caller: "",
}
"""Each scope and where its id comes from: always the caller, never the script."""

_SCOPE_LIST = ", ".join(_SCOPES)

T = TypeVar("T")


def _store(helper: str, call: ScriptCall) -> StateStore:
    return call.caller.services.require(STATE, helper)


def _namespace(helper: str, call: ScriptCall, scope: JSONValue) -> Namespace:
    """The caller's namespace for `scope`; an unknown scope or a missing id is an error."""
    if not isinstance(scope, str) or scope not in _SCOPES:
        raise HelperError(f"{helper}: unknown scope {shown_value(scope)} (expected one of: {_SCOPE_LIST})")
    owner = _SCOPES[scope](call.caller)
    if owner is None or (scope != "global" and owner == ""):
        raise HelperError(f"{helper}: scope {scope!r} has no id for this caller")
    return Namespace(scope, owner, user=call.caller.user_id or "")


def _key(helper: str, key: JSONValue) -> str:
    """A key is any string of at most MAX_KEY_BYTES of UTF-8 (the empty one too, as in Redis)."""
    if not isinstance(key, str):
        raise HelperError(f"{helper}: key must be a string, got {shown_value(key)}")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise HelperError(f"{helper}: key must be valid Unicode text (it holds a lone surrogate)") from None
    if size > MAX_KEY_BYTES:
        raise HelperError(f"{helper}: key is {size} bytes, over the limit of {MAX_KEY_BYTES}")
    return key


def _index(helper: str, name: str, value: JSONValue) -> int:
    """An integer index; a whole float (a JS number like 2.0) counts as one."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    raise HelperError(f"{helper}: {name} must be an integer, got {shown_value(value)}")


def _open(helper: str, call: ScriptCall, scope: JSONValue) -> tuple[StateStore, Namespace]:
    """The store and the caller's namespace; the missing store is reported first (S11.3)."""
    return _store(helper, call), _namespace(helper, call, scope)


def _run(helper: str, call: ScriptCall, operation: Callable[[float | None], T]) -> T:
    """Run one store operation, bounded by the call's remaining time; StateError → HelperError."""
    try:
        return operation(call.remaining_secs())
    except StateError as exc:
        raise HelperError(f"{helper}: {exc}") from exc


# -- the helpers ------------------------------------------------------------------------------


def state_get(call: ScriptCall, scope: JSONValue, key: JSONValue) -> JSONValue:
    """The value at `key`, or null when there is none (Redis GET)."""
    store, ns = _open("state_get", call, scope)
    k = _key("state_get", key)
    return _run("state_get", call, lambda t: store.get(ns, k, timeout=t))


def state_set(call: ScriptCall, scope: JSONValue, key: JSONValue, value: JSONValue) -> JSONValue:
    """Store any JSON value at `key`, replacing what was there, of any type (Redis SET); null."""
    store, ns = _open("state_set", call, scope)
    k = _key("state_set", key)
    _run("state_set", call, lambda t: store.set(ns, k, value, timeout=t))
    return None


def state_delete(call: ScriptCall, scope: JSONValue, key: JSONValue) -> JSONValue:
    """Remove `key` whatever it holds; true when it existed (Redis DEL)."""
    store, ns = _open("state_delete", call, scope)
    k = _key("state_delete", key)
    return _run("state_delete", call, lambda t: store.delete(ns, k, timeout=t))


def state_keys(call: ScriptCall, scope: JSONValue) -> JSONValue:
    """Every key of the scope (values, lists and sets), sorted."""
    store, ns = _open("state_keys", call, scope)
    keys: list[JSONValue] = list(_run("state_keys", call, lambda t: store.keys(ns, timeout=t)))
    return keys


def state_push(call: ScriptCall, scope: JSONValue, key: JSONValue, value: JSONValue) -> JSONValue:
    """Append to the list at `key` (created when missing); the list's new length (Redis RPUSH)."""
    store, ns = _open("state_push", call, scope)
    k = _key("state_push", key)
    return _run("state_push", call, lambda t: store.push(ns, k, value, timeout=t))


def state_range(
    call: ScriptCall, scope: JSONValue, key: JSONValue, start: JSONValue, stop: JSONValue
) -> JSONValue:
    """Items `start`..`stop`, stop inclusive, negative from the end (Redis LRANGE); [] when missing."""
    store, ns = _open("state_range", call, scope)
    k = _key("state_range", key)
    first, last = _index("state_range", "start", start), _index("state_range", "stop", stop)
    return _run("state_range", call, lambda t: store.range(ns, k, first, last, timeout=t))


def state_sadd(call: ScriptCall, scope: JSONValue, key: JSONValue, value: JSONValue) -> JSONValue:
    """Add `value` to the set at `key` (created when missing); true when it was new (Redis SADD)."""
    store, ns = _open("state_sadd", call, scope)
    k = _key("state_sadd", key)
    return _run("state_sadd", call, lambda t: store.sadd(ns, k, value, timeout=t))


def state_smembers(call: ScriptCall, scope: JSONValue, key: JSONValue) -> JSONValue:
    """The set's members in the order first added; [] when missing (Redis SMEMBERS)."""
    store, ns = _open("state_smembers", call, scope)
    k = _key("state_smembers", key)
    return _run("state_smembers", call, lambda t: store.smembers(ns, k, timeout=t))


def state_srem(call: ScriptCall, scope: JSONValue, key: JSONValue, value: JSONValue) -> JSONValue:
    """Remove `value` from the set; true when it was a member (Redis SREM)."""
    store, ns = _open("state_srem", call, scope)
    k = _key("state_srem", key)
    return _run("state_srem", call, lambda t: store.srem(ns, k, value, timeout=t))


HELPERS: dict[str, Callable[..., JSONValue]] = {
    "state_get": state_get,
    "state_set": state_set,
    "state_delete": state_delete,
    "state_keys": state_keys,
    "state_push": state_push,
    "state_range": state_range,
    "state_sadd": state_sadd,
    "state_smembers": state_smembers,
    "state_srem": state_srem,
}


def _scope(_: ScriptCall, args: Sequence[JSONValue]) -> Attributes:
    scope = args[0] if args else None
    return {"agentkernel.state.scope": scope} if isinstance(scope, str) and scope in _SCOPES else {}


def register(table: HelperTable) -> None:
    """Add the nine state helpers of S11.1 to `table`."""
    for name, function in HELPERS.items():
        table.register(name, function, traced=Traced(_scope))


__all__ = ["HELPERS", "MAX_KEY_BYTES", "register"]
