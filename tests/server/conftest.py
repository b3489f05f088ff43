"""The real server on 127.0.0.1 (uvicorn in a thread, a free port), a project wired to the scripted LLM.

`LiveServer` binds its socket before uvicorn starts, so the first request
simply waits in the socket's backlog until the server answers: start-up is
waited for by `GET /healthz`, never by sleeping.
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pytest
import yaml

from agentkernel import Kernel
from agentkernel.config import ServerSettings, load_kernel_config
from agentkernel.server.serving import GracefulServer, bind, serve_until_stopped, server_for, url_of
from tests.conftest import write_kernel_yaml
from tests.fakes import FakeLLMServer, Reply
from tests.fakes.openai_server import Exchange
from tests.fakes.webhook import WebhookReceiver

ROW_SECRET = "row-only-the-user-sees"  # a table cell: must never reach the LLM (S6)
# Debian's, as `.ci/run` installs it; never `playwright install` (the variable: only for the test that
# shows a missing browser skips, or fails under CI)
CHROMIUM = Path(os.environ.get("AGENTKERNEL_TEST_CHROMIUM", "/usr/bin/chromium"))
WAIT_MS = 60_000  # an upper bound for any one element of the page to appear, not a measured time


class LiveServer:
    """`agentkernel serve` in-process: the same app, uvicorn and shutdown, on a thread of its own."""

    def __init__(
        self, kernel: Kernel, settings: ServerSettings | None = None, send_buffer: int | None = None
    ) -> None:
        """`send_buffer` fixes SO_SNDBUF of every accepted connection (Linux copies it from the listener).

        Without it the kernel grows a connection's send buffer on its own (up to
        net.ipv4.tcp_wmem, 4 MiB by default), so how much a client that stops
        reading leaves in the sockets depends on the machine.
        """
        self.kernel = kernel
        self.settings = settings or kernel.config.server
        self.send_buffer = send_buffer
        self.server: GracefulServer | None = None
        self.url = ""
        self._thread: threading.Thread | None = None
        self.failure: BaseException | None = None

    def __enter__(self) -> LiveServer:
        sock = bind("127.0.0.1", 0)
        if self.send_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
        self.url = url_of(sock)
        self.server = server = server_for(self.kernel, self.settings)

        def main() -> None:
            try:
                with sock:
                    serve_until_stopped(server, self.kernel, sock)  # on `serve`'s loop
            except BaseException as exc:  # surfaced by stop()
                self.failure = exc

        self._thread = threading.Thread(target=main, name="agentkernel-serve", daemon=True)
        self._thread.start()
        assert httpx.get(f"{self.url}/healthz", timeout=60).status_code == 200
        return self

    def client(self, headers: dict[str, str] | None = None) -> httpx.Client:
        """A client of this server; idle connections dropped before uvicorn's keep-alive (5 s) ends them."""
        limits = httpx.Limits(keepalive_expiry=1.0)
        return httpx.Client(base_url=self.url, timeout=60, headers=headers, limits=limits)

    def stop(self) -> None:
        """Ctrl-C, as uvicorn's signal handler would: stop accepting, let turns finish, close."""
        if self.server is not None:
            self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=120)
            assert not self._thread.is_alive(), "the server did not stop"
        if self.failure is not None:
            raise self.failure

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@dataclass(frozen=True)
class Gated:
    """A scripted LLM answer that waits until the test opens `gate` (a turn held running, on purpose)."""

    gate: threading.Event
    reply: Reply = field(default_factory=lambda: Reply(text="after the gate"))

    def answer(self, exchange: Exchange) -> None:
        self.gate.wait(60)
        self.reply.answer(exchange)


def sse_events(text: str, *, runs: bool = False) -> list[tuple[str, Any]]:
    """`event: TYPE` (+ `id: N`) + `data: JSON` frames → [(type, data)], checking every frame has both.

    The `run` event that opens a turn's stream is left out unless `runs`.
    """
    return [(kind, data) for kind, _, data in sse_frames(text) if runs or kind != "run"]


def sse_frames(text: str) -> list[tuple[str, int | None, Any]]:
    """Every frame as (type, id or None, data); keep-alive comments are skipped."""
    frames = []
    for frame in text.strip().split("\n\n"):
        lines = [line for line in frame.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        ids = [int(line.removeprefix("id: ")) for line in lines[1:-1] if line.startswith("id: ")]
        assert len(lines) == 2 + len(ids) and len(ids) <= 1, frame
        assert lines[0].startswith("event: ") and lines[-1].startswith("data: "), frame
        kind, data = lines[0].removeprefix("event: "), json.loads(lines[-1].removeprefix("data: "))
        frames.append((kind, ids[0] if ids else None, data))
    return frames


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


def script_tool(folder: Path, name: str, source: str, **fields: object) -> None:
    """`name.yaml` (with `fields`) and `name.js` in `folder`."""
    spec = {"kind": "script_tool", "name": name, "script": f"{name}.js", **fields}
    write(folder / f"{name}.yaml", yaml.safe_dump(spec, allow_unicode=True))
    write(folder / f"{name}.js", source)


def make_project(root: Path, llm: FakeLLMServer | None, extra: str = "") -> Path:
    """A project: tools `upper` and `table` (a visual table), `other` (in no template), template `tester`."""
    llm_yaml = (
        f"llm:\n  base_url: {llm.base_url}\n  model: fake\n  max_retries: 0\n  timeout_secs: 30\n"
        "  max_concurrency: 32\n"
        if llm is not None
        else ""
    )
    write_kernel_yaml(root, llm_yaml + extra)
    tools = root / "config" / "scripts" / "tools"
    text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    script_tool(
        tools,
        "upper",
        "function run(args) { return args.text.toUpperCase(); }",
        description="Upper-case a text.",
        parameters=text,
        ui={"icon": "🔠"},
    )
    script_tool(
        tools,
        "table",
        f"""
        function run(args) {{
          var rows = [];
          for (var i = 0; i < args.n; i++) rows.push({{id: i, secret: '{ROW_SECRET}'}});
          return {{content: args.n + ' rows shown to the user',
                   visual: {{type: 'table', columns: [{{key: 'id', title: 'ID'}}, {{key: 'secret'}}],
                            rows: rows}}}};
        }}
        """,
        description="Rows as a table.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    script_tool(tools, "other", "function run() { return 'other'; }")
    write(
        root / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: You are a test agent.\ntools: [upper, table]\nmax_turns: 4\n",
    )
    return root / "config" / "kernel.yaml"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    """A webhook receiver on 127.0.0.1 that wakes the test on each POST; a call it holds never outlives
    its test."""
    with WebhookReceiver() as hook:
        try:
            yield hook
        finally:
            if hook.hold is not None:
                hook.hold.set()


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(max_requests=2000) as server:
        yield server


@pytest.fixture
def kernel_yaml(tmp_path: Path, llm_server: FakeLLMServer) -> Path:
    return make_project(tmp_path, llm_server)


@pytest.fixture
def live(kernel_yaml: Path) -> Iterator[LiveServer]:
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as server:
        yield server


@pytest.fixture
def client(live: LiveServer) -> Iterator[httpx.Client]:
    with live.client() as http:
        yield http


@pytest.fixture
def browser() -> Iterator[Any]:
    """Chromium driven by Playwright. Without it a browser test skips, except where the variable `CI` is
    set (`.ci/run` sets it): there it fails, so CI never passes with the page untested."""
    if not CHROMIUM.exists():
        why = f"needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI is set, where a browser test may not skip", pytrace=False)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


# -- the server's own stores on either database (S27.2) ----------------------------------------------


def on_postgres(where: str) -> bool:
    """True when `where` (a `store_where` value) is a PostgreSQL URL, False for an SQLite file."""
    return where.startswith("postgresql://")


@pytest.fixture(params=["sqlite", "postgres"])
def store_where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a server store lives: a message store file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "data" / "messages.db")
    return str(request.getfixturevalue("pg_url"))


def raw_rows(where: str, sql: str) -> list[tuple[Any, ...]]:
    """What a query reads from the store's database itself, past the store (a file or a URL)."""
    if on_postgres(where):
        import psycopg  # only the PostgreSQL tests import it

        with psycopg.connect(where) as conn:
            return conn.execute(sql).fetchall()
    import sqlite3

    raw = sqlite3.connect(where)
    try:
        return raw.execute(sql).fetchall()
    finally:
        raw.close()
