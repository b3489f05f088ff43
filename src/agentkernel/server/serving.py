"""Running the app: the loopback rule, the socket, uvicorn, and a graceful stop that exits 0.

The socket is bound before uvicorn starts, so a port in use is a clear
error, `--port 0` picks a free port, and the URL printed is the one that
answers. Ctrl-C or SIGTERM: uvicorn stops accepting, waits for open
responses (bounded by `server.shutdown_grace_secs`), then the app's
shutdown lets the remaining turns finish (bounded too) and records them.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator

import uvicorn

from agentkernel.config import ServerSettings
from agentkernel.kernel import Kernel
from agentkernel.server.app import create_app
from agentkernel.server.identity import is_loopback
from agentkernel.server.rate_limit import limited


class ServeRefused(Exception):
    """The server must not start as asked (and the message says why and what to do)."""


def check_binding(host: str, settings: ServerSettings) -> None:
    """No tokens configured means everyone is `local`: only loopback may reach that."""
    if not settings.tokens and not is_loopback(host):
        raise ServeRefused(
            f"refusing to listen on {host}: kernel.yaml has no server.tokens, so anyone who can reach "
            "the port would be user `local`; add a token (`agentkernel token new USER`) "
            "or listen on 127.0.0.1"
        )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (0: a free port); ServeRefused naming the address otherwise."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
    # and without it every response written in two parts waits ~40 ms for the client's delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ServeRefused(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class GracefulServer(uvicorn.Server):
    """uvicorn's server, minus re-raising the signal at the end: a graceful stop exits 0.

    `end_streams` runs when shutdown begins, before uvicorn waits for open
    responses: streams that stay open as long as their client does (MCP's)
    are ended there, so they do not hold the stop for the whole grace period.
    """

    def __init__(self, config: uvicorn.Config, end_streams: Callable[[], Awaitable[None]] | None = None):
        super().__init__(config)
        self.end_streams = end_streams

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.end_streams is not None:
            await self.end_streams()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)


def server_for(kernel: Kernel, settings: ServerSettings, *, check_llm: bool = False) -> GracefulServer:
    """A uvicorn server for the app; logging goes through the kernel's (`-v` shows uvicorn's INFO).

    `check_llm`: the app warns at start-up when the LLM server cannot be used (create_app).
    """
    app = create_app(kernel, settings, check_llm=check_llm)
    config = uvicorn.Config(
        limited(app, settings),  # outermost: a flood refused before any of the app's layers (rate_limit.py)
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace_secs),
        lifespan="on",
    )
    return GracefulServer(config, app.state.end_streams)


async def run_server(server: uvicorn.Server, kernel: Kernel, sock: socket.socket) -> None:
    """Serve on `sock` until a signal (or `server.should_exit`); the kernel is closed at the end."""
    async with kernel:
        await server.serve(sockets=[sock])


def serve_until_stopped(server: uvicorn.Server, kernel: Kernel, sock: socket.socket) -> None:
    """`run_server` on the event loop uvicorn's own setup picks (`server.config.loop`, "auto": uvloop when
    it is installed, asyncio's otherwise), as `uvicorn.run` would; `asyncio.run` would always take
    asyncio's."""
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(run_server(server, kernel, sock))


__all__ = [
    "GracefulServer",
    "ServeRefused",
    "bind",
    "check_binding",
    "run_server",
    "serve_until_stopped",
    "server_for",
    "url_of",
]
