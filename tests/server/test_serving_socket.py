"""The listening socket `agentkernel serve` binds (serving.bind): its connections send small writes at once.

A response goes out in pieces (uvicorn writes the head, then each body
part, each SSE frame). With Nagle's algorithm on, a piece written while the
previous one is unacknowledged waits for the client's delayed ACK, about
40 ms on Linux: every request took ~45 ms before this was found by
benchmarks/server.py. asyncio turns Nagle off (TCP_NODELAY) only on sockets
that say they are TCP, so the socket must be made with IPPROTO_TCP.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest

from agentkernel.server.serving import bind


def uvloop_loop() -> asyncio.AbstractEventLoop:
    uvloop = pytest.importorskip("uvloop")  # `serve`'s loop where it is installed (serving.py)
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


@pytest.mark.parametrize("new_loop", [asyncio.new_event_loop, uvloop_loop], ids=["asyncio", "uvloop"])
def test_connections_accepted_on_the_served_socket_have_nagle_off(
    new_loop: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    async def accept_one() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                conn = transport.get_extra_info("socket")
                accepted.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        with bind("127.0.0.1", 0) as sock:
            server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
            async with server:
                _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
                try:
                    return await asyncio.wait_for(accepted, 30)
                finally:
                    writer.close()

    with asyncio.Runner(loop_factory=new_loop) as runner:
        assert runner.run(accept_one()) != 0
