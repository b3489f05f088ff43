"""`serve_until_stopped`: the server runs on the event loop uvicorn's own setup picks, uvloop when installed.

`asyncio.run` always makes asyncio's loop; `serve` spent about a quarter more
CPU a turn on it than on uvloop (docs/benchmarks.md, issue 31).
"""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvicorn

from agentkernel import Kernel
from agentkernel.server.serving import bind, serve_until_stopped


class LoopProbe(uvicorn.Server):
    """A server that only notes the loop it was run on, then stops."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.loops: list[type[asyncio.AbstractEventLoop]] = []

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self.loops.append(type(asyncio.get_running_loop()))


async def nothing(scope: object, receive: object, send: object) -> None:
    return None


def test_the_server_runs_on_uvloop_when_it_is_installed(kernel: Kernel) -> None:
    uvloop = pytest.importorskip("uvloop")
    probe = LoopProbe(uvicorn.Config(nothing))
    with bind("127.0.0.1", 0) as sock:
        serve_until_stopped(probe, kernel, sock)
    assert len(probe.loops) == 1 and issubclass(probe.loops[0], uvloop.Loop)


def test_the_loop_named_in_the_config_is_the_one_served_on(kernel: Kernel) -> None:
    probe = LoopProbe(uvicorn.Config(nothing, loop="asyncio"))
    with bind("127.0.0.1", 0) as sock:
        serve_until_stopped(probe, kernel, sock)
    assert len(probe.loops) == 1 and issubclass(probe.loops[0], asyncio.SelectorEventLoop)
