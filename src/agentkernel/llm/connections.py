"""The LLM client's connections on one event loop: a stack of one-connection httpx clients, one lent per
request.

httpx's own pool walks every connection it holds on each request and each
response's close (and, for each idle one, every connection again), and keeps
at most 20 idle: at a hundred calls at once, a busy server spent a third of
its event loop there and opened a new connection for most calls. Here each
client holds one connection and serves one request at a time, so taking one
and giving it back costs the same at any number of connections, and every
connection stays open for the next call until it has been idle
`idle_secs` (httpx's keep-alive expiry): the least recently used are closed
as others come back. A client lent and never given back (its request
abandoned) is simply not reused.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

import httpx

IDLE_SECS = 5.0
"""How long a connection may wait unused before it is closed (httpx's default keep-alive expiry)."""


class ClientStack:
    """One event loop's one-connection clients: the most recently given back is lent first."""

    def __init__(
        self, make: Callable[[httpx.Limits], httpx.AsyncClient], idle_secs: float = IDLE_SECS
    ) -> None:
        """`make(limits)`: a new client with these limits (one connection, kept `idle_secs`)."""
        self._make = make
        self._idle_secs = idle_secs
        self._limits = httpx.Limits(
            max_connections=1, max_keepalive_connections=1, keepalive_expiry=idle_secs
        )
        self._idle: deque[tuple[float, httpx.AsyncClient]] = deque()  # (given back at, client), oldest first
        self._closed = False

    @property
    def idle(self) -> int:
        """How many clients wait to be lent."""
        return len(self._idle)

    @contextlib.asynccontextmanager
    async def lend(self) -> AsyncIterator[httpx.AsyncClient]:
        """A client for one request, given back when the block ends (closed instead once the stack is)."""
        client = self._idle.pop()[1] if self._idle else self._make(self._limits)
        try:
            yield client
        finally:
            await self._give_back(client)

    async def _give_back(self, client: httpx.AsyncClient) -> None:
        if self._closed:
            await client.aclose()
            return
        now = time.monotonic()
        self._idle.append((now, client))
        expired: list[httpx.AsyncClient] = []  # taken off first: another request may lend while one closes
        while self._idle[0][0] < now - self._idle_secs:  # the one given back now never is
            expired.append(self._idle.popleft()[1])
        for old in expired:
            await old.aclose()

    async def aclose(self) -> None:
        """Close every idle client now, and every lent one when it is given back."""
        self._closed = True
        idle, self._idle = self._idle, deque()
        for _, client in idle:
            await client.aclose()


__all__ = ["IDLE_SECS", "ClientStack"]
