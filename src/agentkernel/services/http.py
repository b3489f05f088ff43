"""The HTTP service behind the `http_*` helpers (S8): one pooled client, guarded at the socket.

Scripts are untrusted, so every request this service makes is bounded and
checked where it cannot be dodged:

- every address is judged by its class (util/addresses.py): link-local
  and cloud metadata addresses are always refused, loopback and private
  ones unless `http.allow_private: true`; then the host allow/deny lists of
  kernel.yaml's `http:` section apply. Both are checked when a connection is
  opened, on the host name *and* on every address it resolves to, and the
  socket is then connected to exactly the address that was checked (no
  second lookup a rebinding DNS server could answer differently); redirects
  open their own connections, so each hop is checked;
- one deadline bounds the whole exchange (connect, every read and write,
  every redirect hop, the body), so a server dripping one byte a second
  cannot hold a worker past the script's time;
- the body is read in chunks and decoding stops as soon as it passes
  `max_response_bytes`, for compressed bodies too (a gzip bomb is cut at the
  cap, not inflated first);
- no cookie jar and no environment (proxies, `.netrc`): nothing one script
  receives or the kernel's user has configured leaks into another's request.

`HttpService.request` never raises: every failure is an `HttpResult` with
status 0 and the reason, which the helpers hand to scripts as `{status, body,
error}` (S8.2). A server is untrusted input too: whatever it sends (a
malformed `Location`, `Content-Length`, chunk, encoding, cookie or status
line) is one such failure and one line in the log, never a traceback.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import ipaddress
import logging
import re
import socket
import ssl
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.cookiejar import CookieJar
from typing import Any

import httpcore
import httpx

from agentkernel.config import KernelConfig
from agentkernel.config.hosts import HostList
from agentkernel.config.sections import HttpConfig, parse_http_config
from agentkernel.types import JSONObject
from agentkernel.util.addresses import (
    IPAddress,
    classify,
    comparable,
    embedded_ipv4,
    is_metadata_name,
    parse_numeric_host,
)
from agentkernel.version import __version__

log = logging.getLogger("agentkernel.http")

Resolver = Callable[[str, int], Sequence[str]]
"""`(host, port) -> IP address strings`; the service's seam for DNS (tests fake it)."""

SCHEMES = ("http", "https")
MAX_URL_CHARS = 8192
_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_DNS_WORKERS = 8


# -- the host policy ------------------------------------------------------------------------------------


class HostRefused(Exception):
    """A connection the address classes or the allow/deny lists forbid; raised before any socket opens."""


def _reaches(address: IPAddress) -> tuple[IPAddress, ...]:
    """What connecting to `address` reaches, for the deny list.

    `0.0.0.0` and `::` are this machine's loopback, and an IPv6 address that
    carries an IPv4 one (NAT64, 6to4, …) reaches that one too.
    """
    reached: tuple[IPAddress, ...] = (address, *embedded_ipv4(address))
    if address.is_unspecified:
        reached += (ipaddress.ip_address("127.0.0.1" if address.version == 4 else "::1"),)
    return reached


@dataclass(frozen=True)
class HostPolicy:
    """Which hosts a script may reach.

    The deny list, then the address classes (util/addresses.py) refuse;
    with an allow list, a host must also be named in it or resolve only into it.
    """

    allow: HostList | None
    deny: HostList
    allow_private: bool = False

    def check_name(self, host: str) -> None:
        """Before any DNS lookup: a denied name is not even resolved."""
        if is_metadata_name(host):
            raise HostRefused(f"host {host!r} is a cloud metadata service, never reachable from scripts")
        if self.deny.has_name(host):
            raise HostRefused(f"host {host!r} is denied by http.deny_hosts")

    def check_addresses(self, host: str, addresses: Sequence[str]) -> None:
        """Every address the host resolved to: one denied address refuses the host."""
        resolved = [comparable(a) for a in addresses]
        for text, address in zip(addresses, resolved, strict=True):
            if any(self.deny.has_address(reached) for reached in _reaches(address)):
                raise HostRefused(f"{_where(host, text)} denied by http.deny_hosts")
            self._check_class(host, text, address)
        if self.allow is None or self.allow.has_name(host):
            return
        for text, address in zip(addresses, resolved, strict=True):
            if not self.allow.has_address(address):
                raise HostRefused(f"{_where(host, text)} not in http.allow_hosts")

    def _check_class(self, host: str, text: str, address: IPAddress) -> None:
        refusal = classify(address)
        if refusal is None or (self.allow_private and not refusal.always):
            return
        rule = "never reachable from scripts" if refusal.always else "denied unless http.allow_private: true"
        raise HostRefused(f"{_where(host, text)} {refusal.describe()}, {rule}")


def _where(host: str, address: str) -> str:
    """`address 10.0.0.1 is` for an IP in the URL, `host 'x' resolves to 10.0.0.1,` for a name."""
    return f"address {address} is" if host.strip("[]") == address else f"host {host!r} resolves to {address},"


# -- the guarded network backend ---------------------------------------------------------------------------

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("http_deadline", default=None)


def _capped(timeout: float | None, on_expiry: type[Exception]) -> float | None:
    """`timeout` shortened to what is left of the current request's deadline."""
    deadline = _deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise on_expiry("deadline reached")
    return left if timeout is None else min(timeout, left)


@contextmanager
def _request_deadline(deadline: float) -> Iterator[None]:
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read and write ends by the request's deadline.

    Per-operation timeouts alone let a server that sends one byte just before
    each timeout hold the request forever; this cap makes the total bounded.
    """

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _capped(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _capped(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        capped = _capped(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, capped))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, in the system's order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _GuardedBackend(httpcore.NetworkBackend):
    """Resolves, checks the policy, then connects to the checked address itself.

    TLS still verifies the URL's host name: httpcore passes it as
    `server_hostname` whatever address the socket went to.
    """

    def __init__(self, policy: HostPolicy, resolver: Resolver, dns: concurrent.futures.Executor) -> None:
        self._policy = policy
        self._resolver = resolver
        self._dns = dns
        self._inner = httpcore.SyncBackend()

    def _resolve(self, host: str, port: int, timeout: float | None) -> Sequence[str]:
        """getaddrinfo has no timeout of its own, so it runs on a small pool and is waited for.

        A numeric host in any spelling (`2852039166`, `127.1`, a trailing dot)
        is its address, as getaddrinfo would read it, and never a DNS query.
        """
        try:
            ipaddress.ip_address(host)
            return [host]  # as written, so messages show the URL's own spelling
        except ValueError:
            pass
        numeric = parse_numeric_host(host)
        if numeric is not None:
            return [str(numeric)]
        future = self._dns.submit(self._resolver, host, port)
        try:
            addresses = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host!r} took too long") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve host {host!r}: {exc}") from exc
        if not addresses:
            raise httpcore.ConnectError(f"cannot resolve host {host!r}: no addresses")
        for address in addresses:
            try:
                comparable(address)
            except ValueError:
                raise httpcore.ConnectError(f"cannot resolve host {host!r}: got {address!r}") from None
        return addresses

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        self._policy.check_name(host)
        addresses = self._resolve(host, port, _capped(timeout, httpcore.ConnectTimeout))
        self._policy.check_addresses(host, addresses)
        last_error: Exception | None = None
        for address in addresses:
            try:
                stream = self._inner.connect_tcp(
                    address, port, _capped(timeout, httpcore.ConnectTimeout), local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                last_error = exc
                continue
            return _DeadlineStream(stream)
        assert last_error is not None
        raise last_error

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise HostRefused("unix sockets are not reachable from scripts")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """certifi's roots, loaded once (it takes milliseconds) and shared: contexts are thread-safe."""
    return httpx.create_ssl_context(trust_env=False)


class _GuardedTransport(httpx.HTTPTransport):
    """httpx's transport on our network backend; never proxies (proxies would dodge the checks)."""

    def __init__(self, backend: httpcore.NetworkBackend, limits: httpx.Limits) -> None:
        ssl_context = _ssl_context()
        super().__init__(verify=ssl_context, trust_env=False, limits=limits)
        # httpx has no public parameter for httpcore's network backend: rebuild its pool with ours.
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=backend,
        )


class _NoCookies(CookieJar):
    """Keep nothing: one shared client must not carry one script's cookies to another.

    `Set-Cookie` is not even parsed: the standard library's parser writes a
    traceback to stderr ("http.cookiejar bug!") for some malformed dates a
    server may send, and nothing here would use what it found.
    """

    def extract_cookies(self, response: object, request: object) -> None:
        return None


# -- the response body ---------------------------------------------------------------------------------------


class BodyTooLarge(Exception):
    """The body passed `max_response_bytes`; reading stopped there."""


_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class _BodyDecoder:
    """Undoes `Content-Encoding` chunk by chunk, never producing more than the room left."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        if encoding not in ("", "identity") and encoding not in _WBITS:
            raise ValueError(f"unsupported Content-Encoding {encoding!r}")
        wbits = _WBITS.get(encoding)
        self._zlib = zlib.decompressobj(wbits) if wbits is not None else None
        self._started = False

    def feed(self, chunk: bytes, room: int) -> bytes:
        if self._zlib is None:
            data = chunk
        else:
            data = self._inflate(chunk, room)
        if len(data) > room:
            raise BodyTooLarge
        return data

    def _inflate(self, chunk: bytes, room: int) -> bytes:
        assert self._zlib is not None
        try:
            data = self._zlib.decompress(chunk, room + 1)
        except zlib.error:
            if self.encoding != "deflate" or self._started:
                raise
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
            data = self._zlib.decompress(chunk, room + 1)
        self._started = True
        return data

    def flush(self, room: int) -> bytes:
        data = self._zlib.flush() if self._zlib is not None else b""
        if len(data) > room:
            raise BodyTooLarge
        return data


def read_capped(response: httpx.Response, limit: int) -> bytes:
    """The decoded body, or BodyTooLarge as soon as it passes `limit` bytes."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    decoder = _BodyDecoder(encoding)
    declared = response.headers.get("content-length", "")
    plain = decoder.encoding in ("", "identity") and response.request.method != "HEAD"
    if plain and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    body = bytearray()
    for chunk in response.iter_raw():
        body += decoder.feed(chunk, limit - len(body))
    body += decoder.flush(limit - len(body))
    return bytes(body)


# -- the service ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpResult:
    """What a script gets (S8.2): `status` 0 and a reason in `error` when there was no response."""

    status: int
    body: str = ""
    error: str = ""

    def to_json(self) -> JSONObject:
        return {"status": self.status, "body": self.body, "error": self.error}


def failure(error: str) -> HttpResult:
    return HttpResult(status=0, body="", error=error)


def check_url(url: httpx.URL) -> str | None:
    """Why a URL may not be fetched, or None: only http(s) with a host."""
    if not url.scheme:
        return "the URL has no scheme (expected http:// or https://)"
    if url.scheme not in SCHEMES:
        return f"only http and https URLs are allowed, got scheme {url.scheme!r}"
    if not url.host:
        return "the URL has no host"
    if url.port is not None and not 0 < url.port < 65536:
        return f"port {url.port} is out of range (1 to 65535)"
    return None


def shown_url(url: httpx.URL) -> str:
    """The URL for messages, without any user:password part."""
    return str(url.copy_with(username=None, password=None)) if url.userinfo else str(url)


def _user_agent() -> str:
    return f"agentkernel/{__version__}"


def webhook_problem(url: str, rules: HttpConfig) -> str | None:
    """Why `url` can never be a webhook (a cron job's delivery, S10): not http(s), or a host the `http:`
    rules deny by name. An address written in the URL is judged now; a name when it resolves."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        return f"not a URL ({exc})"
    problem = check_url(parsed)
    if problem is not None:
        return problem
    policy = HostPolicy(rules.allow_hosts, rules.deny_hosts, rules.allow_private)
    try:
        policy.check_name(parsed.host)
        if _is_address(parsed.host):
            policy.check_addresses(parsed.host, [parsed.host])
    except HostRefused as exc:
        return str(exc)
    return None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class HttpService:
    """One pooled `httpx.Client` for the whole kernel; safe to use from many worker threads."""

    def __init__(self, config: HttpConfig | None = None, *, resolver: Resolver = system_resolver) -> None:
        self.config = config or HttpConfig()
        self._dns = concurrent.futures.ThreadPoolExecutor(_DNS_WORKERS, thread_name_prefix="http-dns")
        policy = HostPolicy(self.config.allow_hosts, self.config.deny_hosts, self.config.allow_private)
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=16, keepalive_expiry=30.0)
        self._client = httpx.Client(
            transport=_GuardedTransport(_GuardedBackend(policy, resolver, self._dns), limits),
            trust_env=False,
            follow_redirects=False,
            headers={"User-Agent": _user_agent(), "Accept-Encoding": "gzip, deflate"},
        )
        self._client.cookies = _NoCookies()  # httpx wraps the jar in its own Cookies

    @classmethod
    def from_config(cls, config: KernelConfig, *, resolver: Resolver = system_resolver) -> HttpService:
        """The service for kernel.yaml's `http:` section."""
        return cls(config.http, resolver=resolver)

    def close(self) -> None:
        self._client.close()
        self._dns.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> HttpService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        time_left: float | None = None,
    ) -> HttpResult:
        """One exchange, redirects included, bounded by `timeout` (default: the config's).

        `time_left` is the calling script's remaining wall-clock budget; the
        exchange never outlives it. Never raises.
        """
        budget = _Budget.start(self.config.default_timeout_secs if timeout is None else timeout, time_left)
        if budget.seconds <= 0:
            return failure("no time left in the script's time limit")
        try:
            request = self._client.build_request(method, url, content=content, headers=headers)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError, TypeError) as exc:
            return failure(f"invalid request: {exc}")
        with _request_deadline(budget.deadline):
            result = self._exchange(request, budget)
        if result.error:  # one line: a server's malformed answer is its fault, not a bug of ours
            log.info("%s %s failed: %s", method, shown_url(request.url), " ".join(result.error.splitlines()))
        else:
            log.debug(
                "%s %s -> %s in %.3f s", method, shown_url(request.url), result.status, budget.elapsed()
            )
        return result

    def _exchange(self, request: httpx.Request, budget: _Budget) -> HttpResult:
        """Send, following redirects by hand: httpx would read each redirect's body whole."""
        hops = 0
        while True:
            where = f"redirect to {shown_url(request.url)}: " if hops else ""
            problem = check_url(request.url)
            if problem is not None:
                return failure(where + problem)
            if budget.left() <= 0:
                return failure(where + budget.timed_out())
            request.extensions["timeout"] = httpx.Timeout(budget.left()).as_dict()
            try:
                response = self._client.send(request, stream=True, follow_redirects=False)
            except Exception as exc:  # S8.2: nothing reaches the script as an exception
                return failure(where + _describe(exc, budget, request))
            try:
                redirect = response.next_request if self.config.follow_redirects else None
                if redirect is None:
                    return self._finish(response, budget)
            finally:
                response.close()  # an unread redirect body is dropped with its connection
            hops += 1
            if hops > self.config.max_redirects:
                return failure(f"more than {self.config.max_redirects} redirects (http.max_redirects)")
            request = redirect

    def _finish(self, response: httpx.Response, budget: _Budget) -> HttpResult:
        try:
            body = read_capped(response, self.config.max_response_bytes)
        except BodyTooLarge:
            return failure(
                f"the response body is larger than http.max_response_bytes "
                f"({self.config.max_response_bytes} bytes); reading stopped (HTTP {response.status_code})"
            )
        except Exception as exc:
            return failure(_describe(exc, budget, response.request, reading_body=True))
        return HttpResult(response.status_code, body.decode("utf-8", errors="replace"), "")


@dataclass(frozen=True)
class _Budget:
    """The time one exchange may take, and whether the script's own limit set it."""

    seconds: float
    started: float
    by_script: bool

    @classmethod
    def start(cls, timeout: float, time_left: float | None) -> _Budget:
        by_script = time_left is not None and time_left < timeout
        seconds = min(timeout, time_left) if time_left is not None else timeout
        return cls(seconds, time.monotonic(), by_script)

    @property
    def deadline(self) -> float:
        return self.started + self.seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def timed_out(self) -> str:
        why = " (the script's time limit)" if self.by_script else ""
        return f"timed out after {round(self.seconds, 2):g} s{why}"


def _describe(exc: Exception, budget: _Budget, request: httpx.Request, *, reading_body: bool = False) -> str:
    """A short reason for a failed exchange, for the script's `error`.

    Sending covers connecting and building the next hop from a `Location`
    header, so a ValueError there (an IDNA host name the codec refuses, a
    number out of range) is a bad URL; while the body is read, it is a body
    that cannot be decoded. Anything else is logged on one line (with its
    traceback only at DEBUG): it may be a server's trick we did not foresee.
    """
    if isinstance(exc, httpx.TimeoutException):
        return budget.timed_out()
    if isinstance(exc, HostRefused):
        return str(exc)
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {exc}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"bad response: {exc}"
    if isinstance(exc, httpx.TransportError):
        return f"connection failed: {exc or type(exc).__name__}"
    if reading_body and isinstance(exc, ValueError | zlib.error):
        return f"cannot decode the body: {exc}"
    if isinstance(exc, httpx.InvalidURL | httpx.UnsupportedProtocol | ValueError | OverflowError):
        return f"bad URL: {exc}"
    log.warning(
        "unexpected failure of %s %s: %s: %s", request.method, shown_url(request.url), type(exc).__name__, exc
    )
    log.debug("the unexpected failure's traceback", exc_info=exc)
    return f"{type(exc).__name__}: {exc}"


__all__ = [
    "BodyTooLarge",
    "HostList",
    "HostPolicy",
    "HostRefused",
    "HttpConfig",
    "HttpResult",
    "HttpService",
    "Resolver",
    "parse_http_config",
    "system_resolver",
    "webhook_problem",
]
