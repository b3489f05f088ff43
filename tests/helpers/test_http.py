"""The HTTP helpers (S8.1–S8.3) from real JS and Rhai tools, against a real server on 127.0.0.1.

Every form of call goes through a script tool and the real dispatch path, in
both engines. The attacks: slow and dripping servers, redirects to denied
hosts, host names that resolve to denied addresses (and a resolver that
changes its answer), huge and compressed bodies, connection resets, header
injection, cookies and proxies that would leak between scripts.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.errors import ConfigError
from agentkernel.services.http import HttpService, parse_http_config, system_resolver
from tests.conftest import ToolFactory, write_kernel_yaml
from tests.helpers.http_kernels import JS_PROBE, RHAI_PROBE, Kernels, echoed, fresh_name, probe
from tests.helpers.http_server import LocalHTTPServer
from tests.helpers.probes import ENGINES


@pytest.fixture
def kernel(kernels: Kernels) -> Kernel:
    return kernels.build()


# -- S8.1 / S8.3: every form of call, both engines ---------------------------------------------------------

H = '#{"X-Test": "yes", "Accept": "text/plain"}'
FORMS: list[tuple[str, str, str, str | None, str, bool]] = [
    # (expression, method, body, content type, path, headers given)
    ('http_get(u + "/echo")', "GET", "", None, "/echo", False),
    ('http_get(u + "/echo", 5)', "GET", "", None, "/echo", False),
    ('http_get(u + "/echo", 2.5)', "GET", "", None, "/echo", False),
    (f'http_get(u + "/echo", {H})', "GET", "", None, "/echo", True),
    (f'http_get(u + "/echo", 5, {H})', "GET", "", None, "/echo", True),
    (f'http_get(u + "/echo", NULL, {H})', "GET", "", None, "/echo", True),
    ('http_post(u + "/echo", "payload")', "POST", "payload", "application/json", "/echo", False),
    (
        'http_post(u + "/echo", "a=1&b=2", "application/x-www-form-urlencoded")',
        "POST",
        "a=1&b=2",
        "application/x-www-form-urlencoded",
        "/echo",
        False,
    ),
    ('http_post(u + "/echo", "x", "text/plain", 5)', "POST", "x", "text/plain", "/echo", False),
    (f'http_post(u + "/echo", "x", "text/plain", 5, {H})', "POST", "x", "text/plain", "/echo", True),
    (f'http_post(u + "/echo", "x", {H})', "POST", "x", "application/json", "/echo", True),
    (f'http_post(u + "/echo", "x", "text/plain", {H})', "POST", "x", "text/plain", "/echo", True),
    (
        'http_post(u + "/echo", #{"title": "Купить хлеб", "n": 2})',
        "POST",
        '{"title": "Купить хлеб", "n": 2}',
        "application/json",
        "/echo",
        False,
    ),
    (
        'http_post(u + "/echo", [1, 2.5, "три"])',
        "POST",
        '[1, 2.5, "три"]',
        "application/json",
        "/echo",
        False,
    ),
    ('http_post(u + "/echo", NULL, "text/plain")', "POST", "", "text/plain", "/echo", False),
    (
        'http_put(u + "/echo?id=1", `{"title":"x"}`, "application/json")',
        "PUT",
        '{"title":"x"}',
        "application/json",
        "/echo?id=1",
        False,
    ),
    (f'http_put(u + "/echo", "v", "text/plain", 5, {H})', "PUT", "v", "text/plain", "/echo", True),
    (
        'http_patch(u + "/echo", `{"title":"y"}`)',
        "PATCH",
        '{"title":"y"}',
        "application/json",
        "/echo",
        False,
    ),
    (f'http_patch(u + "/echo", "p", "text/plain", 5, {H})', "PATCH", "p", "text/plain", "/echo", True),
    ('http_delete(u + "/echo", "")', "DELETE", "", None, "/echo", False),
    (f'http_delete(u + "/echo", "d", "text/plain", 5, {H})', "DELETE", "d", "text/plain", "/echo", True),
    ('http("GET", u + "/echo")', "GET", "", None, "/echo", False),
    (f'http("get", u + "/echo", {H})', "GET", "", None, "/echo", True),
    (
        'http("PATCH", u + "/echo", `{"status":"closed"}`, "application/json")',
        "PATCH",
        '{"status":"closed"}',
        "application/json",
        "/echo",
        False,
    ),
    ('http("POST", u + "/echo", "b", "text/plain", 5)', "POST", "b", "text/plain", "/echo", False),
    (f'http("PUT", u + "/echo", "b", "text/plain", 5, {H})', "PUT", "b", "text/plain", "/echo", True),
    (f'http("POST", u + "/echo", "b", {H})', "POST", "b", "application/json", "/echo", True),
    (f'http("DELETE", u + "/echo", NULL, NULL, 5, {H})', "DELETE", "", None, "/echo", True),
    ('http("OPTIONS", u + "/echo")', "OPTIONS", "", None, "/echo", False),
]


@pytest.mark.parametrize(("expr", "method", "body", "content_type", "path", "with_headers"), FORMS)
def test_s8_1_every_form_sends_what_it_says(
    kernel: Kernel,
    make_tool: ToolFactory,
    engine: str,
    server: LocalHTTPServer,
    expr: str,
    method: str,
    body: str,
    content_type: str | None,
    path: str,
    with_headers: bool,
) -> None:
    seen = echoed(probe(kernel, make_tool, engine, expr, server.base))
    assert (seen["method"], seen["body"], seen["content_type"], seen["path"]) == (
        method,
        body,
        content_type,
        path,
    )
    headers = seen["headers"]
    assert isinstance(headers, dict)
    if with_headers:
        assert headers["x-test"] == "yes" and headers["accept"] == "text/plain"
    else:
        assert "x-test" not in headers and headers["accept"] == "*/*"
    assert headers["user-agent"].startswith("agentkernel/")
    assert "cookie" not in headers


TIMEOUT_FORMS = [
    'http_get(u + "/slow?secs=3", 0.1)',
    f'http_get(u + "/slow?secs=3", 0.1, {H})',
    'http_post(u + "/slow?secs=3", "b", "text/plain", 0.1)',
    f'http_put(u + "/slow?secs=3", "b", "text/plain", 0.1, {H})',
    'http_patch(u + "/slow?secs=3", "b", NULL, 0.1)',
    'http_delete(u + "/slow?secs=3", "", NULL, 0.1)',
    'http("GET", u + "/slow?secs=3", NULL, NULL, 0.1)',
    f'http("POST", u + "/slow?secs=3", "b", "text/plain", 0.1, {H})',
]


@pytest.mark.parametrize("expr", TIMEOUT_FORMS)
def test_s8_3_the_timeout_argument_is_where_the_forms_say(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer, expr: str
) -> None:
    path = f"/slow?secs=60&id={fresh_name('t')}"  # a minute: it cannot answer first, however loaded
    result = probe(kernel, make_tool, engine, expr.replace("/slow?secs=3", path), server.base)
    assert not server.answered(path)  # the call came back while the server still held its answer
    assert result["status"] == 0 and result["body"] == ""
    assert re.fullmatch(
        r"http(_\w+)?: [A-Z]+ http://127\.0\.0\.1:\d+/slow\?secs=60&id=t\d+: timed out after 0\.1 s",
        str(result["error"]),
    ), result


def test_s8_3_default_timeout_comes_from_the_config(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    kernel = kernels.build("http:\n  default_timeout_secs: 0.2\n")
    result = probe(kernel, make_tool, engine, 'http_get(u + "/slow?secs=3")', server.base)
    assert str(result["error"]).endswith("timed out after 0.2 s"), result
    assert HttpService().config.default_timeout_secs == 30.0  # S8.3


def test_s8_3_the_scripts_time_limit_caps_the_timeout(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    """A 20 s timeout in a tool allowed 0.5 s ends with the tool, not 20 s later."""
    name = fresh_name("capped")
    path = f"/slow?secs=60&id={name}"
    source = (JS_PROBE if engine == ".js" else RHAI_PROBE).replace("EXPR", f'http_get(u + "{path}", 20)')
    make_tool(name, source, ext=engine, yaml_extra="timeout_secs: 0.5\n")
    result = kernel.run_tool(name, {"base": server.base})
    assert not server.answered(path)
    if result.success:  # the script got its answer back before its own clock ran out
        assert isinstance(result.data, dict)
        assert str(result.data["error"]).endswith("(the script's time limit)"), result.data
    else:
        assert "time" in result.content.lower(), result.content


def test_a_dripping_server_cannot_outlast_the_timeout(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    """One byte every 0.1 s never trips a per-read timeout; the whole exchange still ends on time."""
    path = f"/drip?n=600&id={fresh_name('t')}"  # a minute of dripping
    result = probe(kernel, make_tool, engine, f'http_get(u + "{path}", 0.4)', server.base)
    assert not server.answered(path)  # the client hung up long before the last byte
    assert result["status"] == 0 and str(result["error"]).endswith("timed out after 0.4 s"), result


# -- S8.2: status, body, error -----------------------------------------------------------------------------


@pytest.mark.parametrize("code", [404, 500])
def test_s8_2_http_errors_keep_their_status_and_body(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer, code: int
) -> None:
    result = probe(kernel, make_tool, engine, f'http_get(u + "/status/{code}")', server.base)
    assert result == {"status": code, "body": f"status {code}", "error": ""}


def test_s8_2_a_connection_reset_is_status_0(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    result = probe(kernel, make_tool, engine, 'http_get(u + "/reset")', server.base)
    assert result["status"] == 0 and result["body"] == ""
    assert re.fullmatch(
        r"http_get: GET http://127\.0\.0\.1:\d+/reset: (connection failed|bad response): .+",
        str(result["error"]),
    ), result


def test_s8_2_nothing_listening_is_status_0(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    result = probe(kernel, make_tool, engine, 'http_post("http://127.0.0.1:1/x", "b")', "")
    assert result["status"] == 0
    assert str(result["error"]).startswith("http_post: POST http://127.0.0.1:1/x: cannot connect:"), result


def test_s8_2_an_unknown_host_is_status_0(kernels: Kernels, make_tool: ToolFactory, engine: str) -> None:
    def resolver(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    kernel = kernels.build(resolver=resolver)
    result = probe(kernel, make_tool, engine, 'http_get("http://no-such-host.example/")', "")
    assert result["error"] == (
        "http_get: GET http://no-such-host.example/: cannot connect: "
        "cannot resolve host 'no-such-host.example': [Errno -2] Name or service not known"
    )


def test_a_hanging_dns_lookup_is_bounded_by_the_timeout(
    kernels: Kernels, make_tool: ToolFactory, engine: str
) -> None:
    """getaddrinfo has no timeout of its own; the helper still answers on time."""
    release, returned = threading.Event(), threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        release.wait(60)
        returned.set()
        return ["127.0.0.1"]

    kernel = kernels.build(resolver=hanging)
    try:
        result = probe(kernel, make_tool, engine, 'http_get("http://slow-dns.example/", 0.2)', "")
        assert not returned.is_set()  # the helper answered while the lookup still hung
    finally:
        release.set()
    assert result["error"] == "http_get: GET http://slow-dns.example/: timed out after 0.2 s"


def test_s8_2_tls_to_a_plain_server_is_status_0(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    """The TLS handshake runs on the guarded stream too, and fails as a value."""
    url = server.base.replace("http://", "https://") + "/echo"
    result = probe(kernel, make_tool, engine, "http_get(u, 2)", url)
    assert result["status"] == 0 and str(result["error"]).startswith(
        f"http_get: GET {url}: cannot connect: [SSL"
    ), result


def test_s8_2_no_service_attached_is_an_error_value(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    kernel = kernels.build(attach=False)
    result = probe(kernel, make_tool, engine, 'http("GET", u + "/echo")', server.base)
    assert result == {
        "status": 0,
        "body": "",
        "error": "http: no http service attached to this kernel",
    }


BAD_ARGUMENTS = [
    ("http_get()", "http_get: url must be a non-empty string, got null"),
    ("http_get(42)", "http_get: url must be a non-empty string, got 42"),
    ('http_get("")', "http_get: url must be a non-empty string, got ''"),
    (
        'http_get("ftp://example.com/x")',
        "http_get: url 'ftp://example.com/x': only http and https URLs are allowed, got scheme 'ftp'",
    ),
    (
        'http_get("file:///etc/passwd")',
        "http_get: url 'file:///etc/passwd': only http and https URLs are allowed, got scheme 'file'",
    ),
    (
        'http_get("example.com/x")',
        "http_get: url 'example.com/x': the URL has no scheme (expected http:// or https://)",
    ),
    ('http_get("http:///x")', "http_get: url 'http:///x': the URL has no host"),
    ("http_get(u, -1)", "http_get: timeout must be a positive number of seconds, got -1"),
    ("http_get(u, 0)", "http_get: timeout must be a positive number of seconds, got 0"),
    ('http_get(u, "5")', "http_get: timeout must be a positive number of seconds, got '5'"),
    ("http_get(u, true)", "http_get: timeout must be a positive number of seconds, got true"),
    ("http_get(u, 5, #{}, 1)", "http_get: expected at most 3 arguments (url, timeout, headers), got 4"),
    ("http_get(u, 5, 6)", "http_get: the last argument must be the headers object, got 6"),
    ('http_post(u, "b", 5)', "http_post: content_type must be a non-empty string, got 5"),
    (
        'http_post(u, "b", "text/plain", 5, #{}, 1)',
        "http_post: expected at most 5 arguments (url, body, content_type, timeout, headers), got 6",
    ),
    (
        'http("BREW", u)',
        "http: method must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, got 'BREW'",
    ),
    (
        'http("CONNECT", u)',
        "http: method must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, got 'CONNECT'",
    ),
    ("http(1, u)", "http: method must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, got 1"),
    ('http_get(u, #{"X-A": 1.5, "X-B": #{}})', "http_get: header 'X-B' must be a string or a number, got {}"),
    ('http_get(u, #{"X-A": true})', "http_get: header 'X-A' must be a string or a number, got true"),
]


@pytest.mark.parametrize(("expr", "error"), BAD_ARGUMENTS)
def test_s8_2_bad_arguments_are_error_values_not_throws(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer, expr: str, error: str
) -> None:
    before = server.total_requests()
    result = probe(kernel, make_tool, engine, expr.replace("u,", 'u + "/echo",'), server.base)
    assert result == {"status": 0, "body": "", "error": error}
    assert server.total_requests() == before


def test_body_is_utf8_with_replacement(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    result = probe(kernel, make_tool, engine, 'http_get(u + "/bad-utf8")', server.base)
    assert result == {"status": 200, "body": "ok \ufffd\ufffd end", "error": ""}


def test_head_has_an_empty_body(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    result = probe(kernel, make_tool, engine, 'http("HEAD", u + "/echo")', server.base)
    assert result == {"status": 200, "body": "", "error": ""}


@pytest.mark.parametrize(("path", "text"), [("/gzip?text=сжато", "сжато"), ("/deflate-raw?text=raw", "raw")])
def test_compressed_bodies_are_decoded(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer, path: str, text: str
) -> None:
    result = probe(kernel, make_tool, engine, f'http_get(u + "{path}")', server.base)
    assert result == {"status": 200, "body": text, "error": ""}


def test_an_unknown_or_broken_encoding_is_an_error(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    result = probe(kernel, make_tool, engine, 'http_get(u + "/encoded?as=br")', server.base)
    assert result["status"] == 0
    assert str(result["error"]).endswith(
        "/encoded?as=br: cannot decode the body: unsupported Content-Encoding 'br'"
    )
    result = probe(kernel, make_tool, engine, 'http_get(u + "/encoded?as=gzip")', server.base)
    assert result["status"] == 0 and "cannot decode the body: Error -3" in str(result["error"]), result


def test_a_long_url_is_cut_in_the_error(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    result = probe(kernel, make_tool, engine, "http_get(u)", "http://127.0.0.1:1/" + "a" * 5000)
    error = str(result["error"])
    assert error.startswith("http_get: GET http://127.0.0.1:1/aaa") and len(error) < 400, error


# -- the response cap --------------------------------------------------------------------------------------

CAP_ERROR = (
    "http_get: GET {base}{path}: the response body is larger than "
    "http.max_response_bytes (65536 bytes); reading stopped (HTTP 200)"
)


@pytest.mark.parametrize("path", ["/huge", "/huge?declared=1", "/gzip?mb=20"])
def test_a_huge_body_is_cut_at_the_cap_while_streaming(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer, path: str
) -> None:
    """1 GiB offered, plain, declared or as a 20 KiB gzip bomb: the client stops near 64 KiB."""
    kernel = kernels.build("http:\n  max_response_bytes: 65536\n")
    sent_before = server.huge_sent
    result = probe(kernel, make_tool, engine, f'http_get(u + "{path}")', server.base)
    assert result == {"status": 0, "body": "", "error": CAP_ERROR.format(base=server.base, path=path)}
    assert server.huge_sent - sent_before < 32 << 20  # what socket buffers absorb, not the gigabyte


def test_a_body_at_the_cap_is_fine(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    kernel = kernels.build("http:\n  max_response_bytes: 10\n")
    assert (
        probe(kernel, make_tool, engine, 'http_get(u + "/status/404")', server.base)["body"] == "status 404"
    )
    over = probe(kernel, make_tool, engine, 'http_get(u + "/echo")', server.base)
    assert "larger than http.max_response_bytes (10 bytes)" in str(over["error"]), over


# -- redirects ---------------------------------------------------------------------------------------------


def test_redirects_are_followed(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    seen = echoed(
        probe(kernel, make_tool, engine, 'http_get(u + "/redirect?to=/echo%3Fhop%3D1")', server.base)
    )
    assert (seen["method"], seen["path"]) == ("GET", "/echo?hop=1")
    expr = 'http_post(u + "/redirect?code=307&to=/echo", "kept", "text/plain")'
    seen = echoed(probe(kernel, make_tool, engine, expr, server.base))
    assert (seen["method"], seen["body"], seen["content_type"]) == ("POST", "kept", "text/plain")
    expr = 'http_post(u + "/redirect?code=303&to=/echo", "dropped")'
    seen = echoed(probe(kernel, make_tool, engine, expr, server.base))
    assert (seen["method"], seen["body"]) == ("GET", "")


def test_a_redirects_own_body_is_never_read(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    sent_before = server.huge_sent
    seen = echoed(probe(kernel, make_tool, engine, 'http_get(u + "/redirect-big?to=/echo")', server.base))
    assert seen["path"] == "/echo"
    assert server.huge_sent - sent_before < 32 << 20  # what socket buffers absorb, not the promised GiB


def test_redirect_loops_stop_at_max_redirects(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    kernel = kernels.build("http:\n  max_redirects: 2\n")
    before = server.requests.get("/loop", 0)
    result = probe(kernel, make_tool, engine, 'http_get(u + "/loop")', server.base)
    assert result["status"] == 0
    assert str(result["error"]).endswith("/loop: more than 2 redirects (http.max_redirects)"), result
    assert server.requests["/loop"] - before == 3


def test_follow_redirects_off_returns_the_redirect(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    kernel = kernels.build("http:\n  follow_redirects: false\n")
    result = probe(kernel, make_tool, engine, 'http_get(u + "/redirect?to=/echo")', server.base)
    assert result == {"status": 302, "body": "moving", "error": ""}


def test_a_redirect_to_a_denied_host_is_refused(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    """The first hop is allowed; each hop is checked again, by name and by address."""
    kernel = kernels.build("http:\n  deny_hosts: [localhost, 127.0.0.2]\n")
    before = server.requests.get("/echo", 0)
    for target, reason in [
        (f"http://localhost:{server.port}/echo", "host 'localhost' is denied by http.deny_hosts"),
        (f"http://127.0.0.2:{server.port}/echo", "address 127.0.0.2 is denied by http.deny_hosts"),
    ]:
        result = probe(kernel, make_tool, engine, f'http_get(u + "/redirect?to={target}")', server.base)
        assert result["status"] == 0
        assert (
            str(result["error"])
            == f"http_get: GET {server.base}/redirect?to={target}: redirect to {target}: {reason}"
        )
    assert server.requests.get("/echo", 0) == before


def test_a_redirect_to_another_scheme_is_refused(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    result = probe(kernel, make_tool, engine, 'http_get(u + "/redirect?to=file:///etc/passwd")', server.base)
    assert result["status"] == 0 and "root:" not in str(result["body"])
    assert "only http and https URLs are allowed" in str(result["error"]) or "bad response" in str(
        result["error"]
    )


# -- the host lists ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hosts", "url", "reason"),
    [
        (
            "deny_hosts: [127.0.0.0/8]",
            "http://localhost:{port}/echo",
            "host 'localhost' resolves to 127.0.0.1, denied by http.deny_hosts",
        ),
        (
            "deny_hosts: [127.0.0.1]",
            "http://127.0.0.1:{port}/echo",
            "address 127.0.0.1 is denied by http.deny_hosts",
        ),
        (
            "deny_hosts: [127.0.0.1]",
            "http://0.0.0.0:{port}/echo",
            "address 0.0.0.0 is denied by http.deny_hosts",
        ),
        ("deny_hosts: ['::1']", "http://[::]:{port}/echo", "address :: is denied by http.deny_hosts"),
        (
            "deny_hosts: [169.254.169.254]",
            "http://2852039166/latest/",
            "host '2852039166' resolves to 169.254.169.254, denied by http.deny_hosts",
        ),
        (
            "deny_hosts: [169.254.0.0/16]",
            "http://[::ffff:169.254.169.254]/",
            "address ::ffff:169.254.169.254 is denied by http.deny_hosts",
        ),
        (
            "deny_hosts: ['*.internal']",
            "http://db.corp.internal/",
            "host 'db.corp.internal' is denied by http.deny_hosts",
        ),
        (
            "deny_hosts: [LOCALHOST.]",
            "http://LocalHost:{port}/echo",
            "host 'localhost' is denied by http.deny_hosts",
        ),
        (
            "allow_hosts: [example.com]",
            "http://127.0.0.1:{port}/echo",
            "address 127.0.0.1 is not in http.allow_hosts",
        ),
        (
            "allow_hosts: [10.0.0.0/8]",
            "http://localhost:{port}/echo",
            "host 'localhost' resolves to 127.0.0.1, not in http.allow_hosts",
        ),
        (
            "allow_hosts: [localhost]\n  deny_hosts: [127.0.0.1]",
            "http://localhost:{port}/echo",
            "host 'localhost' resolves to 127.0.0.1, denied by http.deny_hosts",
        ),
    ],
)
def test_host_lists_refuse_by_name_and_by_resolved_address(
    kernels: Kernels,
    make_tool: ToolFactory,
    engine: str,
    server: LocalHTTPServer,
    hosts: str,
    url: str,
    reason: str,
) -> None:
    kernel = kernels.build(f"http:\n  {hosts}\n")
    before = server.total_requests()
    target = url.format(port=server.port)
    result = probe(kernel, make_tool, engine, f'http_get("{target}")', server.base)
    shown = str(httpx.URL(target))  # the host lower-cased
    assert result == {"status": 0, "body": "", "error": f"http_get: GET {shown}: {reason}"}
    assert server.total_requests() == before


@pytest.mark.parametrize(
    ("hosts", "host"),
    [
        ("allow_hosts: [127.0.0.1]", "127.0.0.1"),
        ("allow_hosts: [127.0.0.0/8]", "localhost"),
        ("allow_hosts: [localhost]", "localhost"),
        ("allow_hosts: ['*.localhost', localhost]", "localhost"),
        ("deny_hosts: [169.254.0.0/16, '::1', example.com]", "127.0.0.1"),
    ],
)
def test_host_lists_let_the_rest_through(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer, hosts: str, host: str
) -> None:
    kernel = kernels.build(f"http:\n  {hosts}\n")
    echoed(probe(kernel, make_tool, engine, f'http_get("http://{host}:{server.port}/echo")', server.base))


def test_a_name_resolving_to_a_denied_address_is_refused_before_connecting(
    kernels: Kernels, make_tool: ToolFactory, engine: str
) -> None:
    def resolver(host: str, port: int) -> list[str]:
        return (
            ["93.184.216.34", "169.254.169.254"] if host == "metadata.test" else system_resolver(host, port)
        )

    kernel = kernels.build("http:\n  deny_hosts: [169.254.169.254]\n", resolver=resolver)
    result = probe(kernel, make_tool, engine, 'http_get("http://metadata.test/latest/meta-data/")', "")
    assert result["error"] == (
        "http_get: GET http://metadata.test/latest/meta-data/: "
        "host 'metadata.test' resolves to 169.254.169.254, denied by http.deny_hosts"
    )


def test_dns_rebinding_cannot_swap_the_checked_address(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    """The socket goes to the address that was checked: a second, different answer is never asked for."""
    answers: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        answers.append(host)
        return ["127.0.0.1"] if len(answers) == 1 else ["169.254.169.254"]

    kernel = kernels.build("http:\n  deny_hosts: [169.254.0.0/16]\n", resolver=rebinding)
    seen = echoed(probe(kernel, make_tool, engine, f'http_get("http://rebind.test:{server.port}/echo")', ""))
    assert seen["headers"]["host"] == f"rebind.test:{server.port}"
    assert answers == ["rebind.test"]


# -- headers and what must not leak between scripts --------------------------------------------------------

INJECTIONS = [
    (
        '#{"X-A": "a\\r\\nHost: evil"}',
        "header 'X-A' 'a\\r\\nHost: evil' contains a control character (CR, LF, NUL, …)",
    ),
    ('#{"X-A": "a\\nX-B: b"}', "header 'X-A' 'a\\nX-B: b' contains a control character (CR, LF, NUL, …)"),
    ('#{"X-A": "nul\\u0000"}', "header 'X-A' 'nul\\x00' contains a control character (CR, LF, NUL, …)"),
    ('#{"X-A\\r\\nX-B": "b"}', "header name 'X-A\\r\\nX-B' is not a valid HTTP header name"),
    ('#{"X A": "b"}', "header name 'X A' is not a valid HTTP header name"),
    ('#{"X-A:": "b"}', "header name 'X-A:' is not a valid HTTP header name"),
    ('#{"": "b"}', "header name '' is not a valid HTTP header name"),
    ('#{"Host": "evil.example"}', "header 'Host' is set by the kernel and cannot be given"),
    ('#{"content-length": "0"}', "header 'content-length' is set by the kernel and cannot be given"),
    (
        '#{"Transfer-Encoding": "chunked"}',
        "header 'Transfer-Encoding' is set by the kernel and cannot be given",
    ),
    ('#{"X-A": "é"}', "header 'X-A' 'é' is not ASCII"),
]


@pytest.mark.parametrize(("headers", "error"), INJECTIONS)
def test_header_injection_is_refused(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer, headers: str, error: str
) -> None:
    before = server.total_requests()
    result = probe(kernel, make_tool, engine, f'http_get(u + "/echo", {headers})', server.base)
    assert result == {"status": 0, "body": "", "error": f"http_get: {error}"}
    expr = f'http_post(u + "/echo", "b", "text/plain\\r\\nX-Evil: 1", {headers})'
    assert probe(kernel, make_tool, engine, expr, server.base)["status"] == 0
    assert server.total_requests() == before


def test_content_type_injection_is_refused(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    result = probe(
        kernel, make_tool, engine, 'http_post(u + "/echo", "b", "text/plain\\r\\nX-Evil: 1")', server.base
    )
    assert (
        result["error"]
        == "http_post: content_type 'text/plain\\r\\nX-Evil: 1' contains a control character (CR, LF, NUL, …)"
    )


def test_header_values_may_be_numbers_and_content_type_may_be_a_header(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    expr = 'http_post(u + "/echo", "<a/>", #{"Content-Type": "application/xml", "X-Page": 2})'
    seen = echoed(probe(kernel, make_tool, engine, expr, server.base))
    assert seen["content_type"] == "application/xml" and seen["headers"]["x-page"] == "2"
    expr = 'http_post(u + "/echo", "t", "text/plain", #{"content-type": "application/xml"})'
    assert echoed(probe(kernel, make_tool, engine, expr, server.base))["content_type"] == "text/plain"


def test_cookies_do_not_travel_between_scripts(
    kernel: Kernel, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    assert probe(kernel, make_tool, engine, 'http_get(u + "/set-cookie")', server.base)["status"] == 200
    seen = echoed(probe(kernel, make_tool, engine, 'http_get(u + "/echo")', server.base))
    assert "cookie" not in seen["headers"]


def test_proxy_variables_are_ignored(
    kernels: Kernels, make_tool: ToolFactory, server: LocalHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy would receive the request and dodge the host checks: the environment is not trusted."""
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:1" if "NO" not in name.upper() else "")
    kernel = kernels.build()
    echoed(probe(kernel, make_tool, ".js", 'http_get(u + "/echo")', server.base))


# -- one pooled client, many threads -----------------------------------------------------------------------


def test_one_pooled_client_reuses_connections(
    kernel: Kernel, make_tool: ToolFactory, server: LocalHTTPServer
) -> None:
    ports = {
        echoed(probe(kernel, make_tool, engine, 'http_get(u + "/echo")', server.base))["client_port"]
        for engine in ENGINES * 3
    }
    assert len(ports) == 1


def test_many_threads_share_the_service(
    kernel: Kernel, make_tool: ToolFactory, server: LocalHTTPServer
) -> None:
    make_tool(
        "par_js",
        'function run(args) { return {content: "ok", data: http_post(args.base + "/echo", args.n)}; }',
    )
    make_tool(
        "par_rhai",
        'fn run(args) { #{ content: "ok", data: http_post(args.base + "/echo", args.n) } }',
        ext=".rhai",
    )

    def one(n: int) -> str:
        result = kernel.run_tool("par_js" if n % 2 else "par_rhai", {"base": server.base, "n": str(n)})
        assert isinstance(result.data, dict)
        return str(json.loads(str(result.data["body"]))["body"])

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(one, range(40))) == [str(n) for n in range(40)]


# -- configuration -----------------------------------------------------------------------------------------


def test_config_defaults(project: Path) -> None:
    config = parse_http_config(None)
    assert (
        config.max_response_bytes,
        config.default_timeout_secs,
        config.follow_redirects,
        config.max_redirects,
    ) == (
        10 * 1024 * 1024,
        30.0,
        True,
        5,
    )
    assert config.allow_hosts is None and not config.deny_hosts
    with HttpService.from_config(load_kernel_config(write_kernel_yaml(project))) as service:
        assert service.config == config


def test_config_section_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match=r"^http: \[1\] is not of type 'object'$"):
        parse_http_config([1])  # the text kernel.yaml's loading gives


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ("http:\n  allow_hosts: example.com", "http.allow_hosts: expected a list of hosts, got str"),
        (
            "http:\n  deny_hosts: [10.0.0.0/8, 'bad host!']",
            "http.deny_hosts[1]: 'bad host!' is not a host name, IP address or CIDR range",
        ),
        (
            "http:\n  deny_hosts: [10.0.0.0/33]",
            "http.deny_hosts[0]: '10.0.0.0/33' is not a host name, IP address or CIDR range",
        ),
        (
            "http:\n  allow_hosts: [example.com, 5]",
            "http.allow_hosts[1]: expected a host name, IP address or CIDR range, got 5",
        ),
        (
            "http:\n  allow_hosts: ['http://example.com/']",
            "http.allow_hosts[0]: 'http://example.com/' is not a host name",
        ),
        (
            "http:\n  max_response_bytes: 0",
            "http.max_response_bytes: expected an integer of at least 1, got 0",
        ),
        (
            "http:\n  max_response_bytes: 1.5",
            "http.max_response_bytes: expected an integer of at least 1, got 1.5",
        ),
        ("http:\n  default_timeout_secs: 0", "http.default_timeout_secs: expected a positive number, got 0"),
        (
            "http:\n  default_timeout_secs: soon",
            "http.default_timeout_secs: expected a positive number, got 'soon'",
        ),
        ("http:\n  follow_redirects: 'yes'", "http.follow_redirects: expected true or false, got 'yes'"),
        ("http:\n  max_redirects: -1", "http.max_redirects: expected an integer of at least 0, got -1"),
        (
            "http:\n  timeout: 5",
            "http.timeout: unknown field (known: max_response_bytes, default_timeout_secs,",
        ),
    ],
)
def test_config_errors_name_the_field(project: Path, section: str, error: str) -> None:
    path = write_kernel_yaml(project, section + "\n")
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(path)  # refused at load, though the service is built at its first request
    assert str(caught.value).startswith(f"{path}:{caught.value.line}: {error}"), str(caught.value)
