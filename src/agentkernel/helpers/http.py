"""`http_get`, `http_post`, `http_put`, `http_patch`, `http_delete` and `http(method, …)` (S8.1–S8.3).

This module turns a script's arguments into one request for the kernel's
`HttpService` (the named service "http") and its answer into `{status, body,
error}`. The helpers never throw (S8.2): a bad argument, a missing service
or a failed exchange is `{status: 0, body: "", error: "<helper>: …"}`, so a
script checks one field instead of wrapping every call in try/catch. That is
also why they take `*args`: an arity error from the helper table would throw.

Argument forms: the positions are fixed — `(url[, timeout])` for GET,
`(url, body[, content_type[, timeout]])` for the others, `(method, url[,
body[, content_type[, timeout]]])` for `http` — and an object after the
required arguments, as the last one, is the headers (S8.3).

In a trace (S26.1) a call is a CLIENT span with OpenTelemetry's HTTP client
attributes — the method, the host and port, the URL without its query,
fragment or user:password, the status — never a header; and the request
carries the W3C `traceparent` of that span, unless the script gave its own.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from agentkernel.bundle import MissingService
from agentkernel.helpers.table import HelperFunction, HelperTable, ScriptCall, Traced
from agentkernel.ports import HTTP
from agentkernel.telemetry.helper_spans import Attributes, add_trace_context
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.short_text import clip, shown_value
from agentkernel.util.valid_unicode import has_lone_surrogate

log = logging.getLogger("agentkernel.helpers")

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
DEFAULT_CONTENT_TYPE = "application/json"
MAX_HEADERS = 64
MAX_HEADER_CHARS = 8192
# Framing and routing are the client's business: a script setting these could smuggle a
# second request past a proxy or desynchronise the pooled connection for the next script.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
        "proxy-authorization",
    }
)
GET_ARGS = ("url", "timeout")
BODY_ARGS = ("url", "body", "content_type", "timeout")
GENERIC_ARGS = ("method", "url", "body", "content_type", "timeout")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_BAD_VALUE_CHAR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class BadArgument(Exception):
    """An argument a helper refuses; its text names the argument and the value."""


@dataclass(frozen=True)
class HttpCall:
    """A script's request, checked and in Python's terms."""

    method: str
    url: str
    body: bytes | None = None
    content_type: str | None = None
    timeout: float | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def all_headers(self) -> dict[str, str]:
        """The script's headers plus Content-Type: the argument, else the header, else JSON."""
        headers = dict(self.headers)
        given = next((k for k in headers if k.lower() == "content-type"), None)
        if self.content_type is not None:
            if given is not None:
                del headers[given]
            headers["Content-Type"] = self.content_type
        elif given is None and self.body:
            headers["Content-Type"] = DEFAULT_CONTENT_TYPE
        return headers


# -- arguments ------------------------------------------------------------------------------------------


def parse_url(value: JSONValue) -> str:
    # httpx and the service are imported by the first HTTP call, not by every kernel (start-up)
    import httpx

    from agentkernel.services.http import MAX_URL_CHARS, check_url  # httpx: by the first HTTP call

    if not isinstance(value, str) or not value:
        raise BadArgument(f"url must be a non-empty string, got {shown_value(value)}")
    if len(value) > MAX_URL_CHARS:
        raise BadArgument(f"url is {len(value)} characters long, more than {MAX_URL_CHARS}")
    if has_lone_surrogate(value):
        raise BadArgument(f"url {shown_value(value)} is not valid Unicode: it holds a lone surrogate")
    try:
        parsed = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise BadArgument(f"url {shown_value(value)} is not a valid URL: {exc}") from None
    problem = check_url(parsed)
    if problem is not None:
        raise BadArgument(f"url {shown_value(value)}: {problem}")
    return value


def parse_method(value: JSONValue) -> str:
    method = value.upper() if isinstance(value, str) else None
    if method not in METHODS:
        raise BadArgument(f"method must be one of {', '.join(METHODS)}, got {shown_value(value)}")
    return method


def parse_body(value: JSONValue) -> bytes | None:
    """A string goes as UTF-8 text; any other value as its JSON text; null as no body."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8", errors="replace")
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError as exc:
        raise BadArgument(f"body cannot be sent as JSON: {exc}") from None


def parse_content_type(value: JSONValue) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadArgument(f"content_type must be a non-empty string, got {shown_value(value)}")
    check_header_value("content_type", value)
    return value


def parse_timeout(value: JSONValue) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise BadArgument(f"timeout must be a positive number of seconds, got {shown_value(value)}")
    return float(value)


def check_header_value(where: str, value: str) -> None:
    if _BAD_VALUE_CHAR.search(value):
        raise BadArgument(f"{where} {shown_value(value)} contains a control character (CR, LF, NUL, …)")
    if not value.isascii():
        raise BadArgument(f"{where} {shown_value(value)} is not ASCII")
    if len(value) > MAX_HEADER_CHARS:
        raise BadArgument(f"{where} is {len(value)} characters long, more than {MAX_HEADER_CHARS}")


def parse_headers(value: JSONValue) -> dict[str, str]:
    """Names must be HTTP tokens and values plain ASCII lines: no header injection."""
    if not isinstance(value, dict):
        raise BadArgument(f"headers must be an object, got {shown_value(value)}")
    if len(value) > MAX_HEADERS:
        raise BadArgument(f"headers has {len(value)} entries, more than {MAX_HEADERS}")
    headers: dict[str, str] = {}
    for name, raw in value.items():
        if not _TOKEN.match(name) or len(name) > 256:
            raise BadArgument(f"header name {shown_value(name)} is not a valid HTTP header name")
        if name.lower() in RESERVED_HEADERS:
            raise BadArgument(f"header {name!r} is set by the kernel and cannot be given")
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise BadArgument(f"header {name!r} must be a string or a number, got {shown_value(raw)}")
        text = raw if isinstance(raw, str) else str(raw)
        check_header_value(f"header {name!r}", text)
        headers[name] = text
    return headers


def split_headers(args: list[JSONValue], required: int) -> tuple[list[JSONValue], dict[str, str]]:
    """S8.3: an object standing last, after the required arguments, is the headers."""
    if len(args) > required and isinstance(args[-1], dict):
        return args[:-1], parse_headers(args[-1])
    return args, {}


def fixed(args: list[JSONValue], names: tuple[str, ...], given: int) -> list[JSONValue]:
    """The positional arguments padded with nulls, or BadArgument when there are too many."""
    if given > len(names) + 1:
        listed = ", ".join((*names, "headers"))
        raise BadArgument(f"expected at most {len(names) + 1} arguments ({listed}), got {given}")
    if len(args) > len(names):
        raise BadArgument(f"the last argument must be the headers object, got {shown_value(args[-1])}")
    return args + [None] * (len(names) - len(args))


def parse_get(args: list[JSONValue]) -> HttpCall:
    """`(url)`, `(url, timeout)`, `(url, headers)`, `(url, timeout, headers)`."""
    positional, headers = split_headers(args, 1)
    url, timeout = fixed(positional, GET_ARGS, len(args))
    return HttpCall("GET", parse_url(url), timeout=parse_timeout(timeout), headers=headers)


def parse_with_body(method: str, args: list[JSONValue]) -> HttpCall:
    """`(url, body[, content_type[, timeout]][, headers])`; a missing body is an empty one."""
    positional, headers = split_headers(args, 2)
    url, body, content_type, timeout = fixed(
        positional, ("url", "body", "content_type", "timeout"), len(args)
    )
    return HttpCall(
        method,
        parse_url(url),
        parse_body(body),
        parse_content_type(content_type),
        parse_timeout(timeout),
        headers,
    )


def parse_generic(args: list[JSONValue]) -> HttpCall:
    """`(method, url[, body[, content_type[, timeout]]][, headers])`."""
    positional, headers = split_headers(args, 2)
    method, url, body, content_type, timeout = fixed(positional, GENERIC_ARGS, len(args))
    return HttpCall(
        parse_method(method),
        parse_url(url),
        parse_body(body),
        parse_content_type(content_type),
        parse_timeout(timeout),
        headers,
    )


# -- the helpers --------------------------------------------------------------------------------


def error_result(text: str) -> JSONObject:
    return {"status": 0, "body": "", "error": text}


def perform(call: ScriptCall, name: str, parse: Callable[[], HttpCall]) -> JSONObject:
    """Parse, find the service, send; every failure becomes the error shape (S8.2)."""
    import httpx  # by the first HTTP call, not by every kernel

    from agentkernel.services.http import shown_url

    try:
        request = parse()
    except BadArgument as exc:
        return error_result(f"{name}: {exc}")
    try:
        service = call.caller.services.require(HTTP, name)
    except MissingService as exc:
        return error_result(str(exc))
    headers = request.all_headers()
    add_trace_context(headers)  # the helper's span, so the server's spans join the run's trace
    result = service.request(
        request.method,
        request.url,
        content=request.body,
        headers=headers,
        timeout=request.timeout,
        time_left=call.remaining_secs(),
    )
    if result.error:
        where = shown_url(httpx.URL(request.url))
        where = clip(where, 200)
        return error_result(f"{name}: {request.method} {where}: {result.error}")
    return result.to_json()


def never_throwing(name: str, parse: Callable[[list[JSONValue]], HttpCall]) -> HelperFunction:
    """A helper for the table; even a bug of ours comes back as `{status: 0, error}`."""

    def helper(call: ScriptCall, *args: JSONValue) -> JSONValue:
        try:
            return perform(call, name, lambda: parse(list(args)))
        except Exception as exc:
            log.exception("%s failed for %s", name, call.script)
            return error_result(f"{name}: internal error: {type(exc).__name__}: {exc}")

    helper.__name__ = name
    helper.__doc__ = parse.__doc__
    return helper


def _body_parser(method: str) -> Callable[[list[JSONValue]], HttpCall]:
    def parse(args: list[JSONValue]) -> HttpCall:
        return parse_with_body(method, args)

    parse.__doc__ = parse_with_body.__doc__
    return parse


# -- in a trace (S26.1) ---------------------------------------------------------------------------


def request_attributes(method: JSONValue, url: JSONValue) -> Attributes:
    """The span's request attributes: no query, fragment, user:password or header ever."""
    shown = method.upper() if isinstance(method, str) else ""
    attributes: dict[str, str | int] = {"http.request.method": shown if shown in METHODS else "_OTHER"}
    if not isinstance(url, str):
        return attributes
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), parts.hostname
    if scheme not in ("http", "https") or not host:
        return attributes
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:  # not a number: the helper refuses the URL
        return attributes
    where = parts.netloc.rpartition("@")[2]  # without user:password
    attributes |= {
        "server.address": host,
        "server.port": port,
        "url.scheme": scheme,
        "url.full": f"{scheme}://{where}{parts.path or '/'}",
    }
    return attributes


def response_attributes(result: JSONValue) -> Attributes:
    """The status, and `error.type` for a failed exchange (status 0) or an HTTP error status."""
    status = result.get("status") if isinstance(result, dict) else None
    if not isinstance(status, int) or status <= 0:
        return {"error.type": "_OTHER"}
    if status >= 400:
        return {"http.response.status_code": status, "error.type": str(status)}
    return {"http.response.status_code": status}


def traced(method: str | None) -> Traced:
    """The span of `http_<method>(url, …)`, or of `http(method, url, …)` when `method` is None."""

    def before(_: ScriptCall, args: Sequence[JSONValue]) -> Attributes:
        if method is not None:
            return request_attributes(method, args[0] if args else None)
        return request_attributes(args[0] if args else None, args[1] if len(args) > 1 else None)

    return Traced(before, response_attributes, client=True)


def register(table: HelperTable) -> None:
    table.register("http_get", never_throwing("http_get", parse_get), traced=traced("GET"))
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        name = f"http_{method.lower()}"
        table.register(name, never_throwing(name, _body_parser(method)), traced=traced(method))
    table.register("http", never_throwing("http", parse_generic), traced=traced(None))


__all__ = ["METHODS", "RESERVED_HEADERS", "HttpCall", "register"]
