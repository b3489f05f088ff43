"""A session's running turn: one at a time (a second message is 409), and independent of its client.

Each user message runs as an asyncio task of its own, not inside the HTTP
response: the response only reads the task's events from a queue. A client
that disconnects therefore stops nothing; the turn finishes and the loop
records it in the transcript. Scripts never run on the event loop: the agent
loop hands every tool and hook call to a worker thread (DESIGN rule 7).

Why 409 and not a queue: a second message sent while the first is still
being answered was typed without seeing the answer; queueing it would answer
a question the user may no longer ask, and a queue per session is memory a
client can grow. The client waits for `done` (or stops the turn) and sends
again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from agentkernel.agent.loop import LoopEvent
from agentkernel.agent.session import ChatSession
from agentkernel.llm.base import ChatMessage
from agentkernel.server.events import StreamEvent, failed_turn, stream_event
from agentkernel.server.sessions import SessionInfo

log = logging.getLogger("agentkernel.server")

# a session's chat: resumed from its transcript (history None), or a one-off over the given history
OpenChat = Callable[[SessionInfo, list[ChatMessage] | None], ChatSession]
EndChat = Callable[[ChatSession], None]
# what an event becomes before it leaves the server (sealing.py: tables' continuation args become ids)
Seal = Callable[[SessionInfo, StreamEvent], Awaitable[StreamEvent]]


class TurnBusy(Exception):
    """The session is still answering its previous message (HTTP 409)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id} is still answering the previous message; wait for its `done` event"
        )


@dataclass
class Turn:
    """One running turn: the events it emitted so far, in order, then None when it is over."""

    session_id: str
    request_id: str
    _events: asyncio.Queue[StreamEvent | None] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    seal: Callable[[StreamEvent], Awaitable[StreamEvent]] | None = None

    async def emit(self, event: LoopEvent) -> None:
        """The loop's emit: never waits for the client (the queue is unbounded; a turn's events are few)."""
        shown = stream_event(event)
        if shown is not None:
            self._events.put_nowait(shown if self.seal is None else await self.seal(shown))

    def fail(self, message: str) -> None:
        for event in failed_turn(message):
            self._events.put_nowait(event)

    def close(self) -> None:
        self._events.put_nowait(None)

    async def events(self, idle_secs: float) -> AsyncIterator[StreamEvent | None]:
        """The events as they come, until the turn is over; None after each `idle_secs` without one.

        One reader only. (A `get` cut short by the timeout takes nothing off the queue.)
        """
        while True:
            try:
                event = await asyncio.wait_for(self._events.get(), idle_secs)
            except TimeoutError:
                yield None
                continue
            if event is None:
                return
            yield event


class TurnRunner:
    """The server's open chats (one per session, opened on its first message) and their running turns.

    Everything here runs on the server's event loop, so the 409 check and
    the start of a turn cannot interleave with another request's.
    """

    def __init__(
        self, open_chat: OpenChat, end_chat: EndChat, max_open_chats: int = 256, seal: Seal | None = None
    ) -> None:
        self._open_chat = open_chat
        self._end_chat = end_chat
        self._max_open = max_open_chats
        self._seal = seal
        self._chats: dict[str, ChatSession] = {}  # least recently used first
        self._once: dict[str, ChatSession] = {}  # one-off chats, ended with their turn
        self._running: dict[str, Turn] = {}

    def running(self, session_id: str) -> bool:
        return session_id in self._running

    def stop(self, session_id: str) -> bool:
        """Stop the session's running turn (it ends `terminated`, recorded); False when none runs."""
        chat = self._chats.get(session_id) or self._once.get(session_id)
        return session_id in self._running and chat is not None and chat.stop()

    def start(
        self, session: SessionInfo, text: str, request_id: str, history: list[ChatMessage] | None = None
    ) -> Turn:
        """Start answering `text` in `session`; TurnBusy when it is answering already.

        With `history`, the chat is a one-off: it starts from that history
        (not the session's transcript) and ends with the turn. That is a
        stateless client's turn, which sends the whole conversation each
        time (`POST /v1/chat/completions`).
        """
        if session.id in self._running:
            raise TurnBusy(session.id)
        turn = Turn(session.id, request_id)
        if self._seal is not None:
            turn.seal = functools.partial(self._seal, session)
        self._running[session.id] = turn
        work = (
            self._run(session, text, turn)
            if history is None
            else self._run_once(session, text, turn, history)
        )
        turn.task = asyncio.create_task(work, name=f"turn {session.id}")
        return turn

    async def _run(self, session: SessionInfo, text: str, turn: Turn) -> None:
        try:
            chat = await self._chat(session)
            await chat.send(text, turn.emit)
        except Exception:  # the client sees an id to quote, the log has the traceback
            self._failed(session, turn)
        finally:
            del self._running[session.id]
            turn.close()

    async def _run_once(
        self, session: SessionInfo, text: str, turn: Turn, history: list[ChatMessage]
    ) -> None:
        try:
            self._once[session.id] = chat = await asyncio.to_thread(self._open_chat, session, history)
            await chat.send(text, turn.emit)
        except Exception:
            self._failed(session, turn)
        finally:
            del self._running[session.id]
            once = self._once.pop(session.id, None)
            if once is not None:
                self._end_chat(once)
            turn.close()

    @staticmethod
    def _failed(session: SessionInfo, turn: Turn) -> None:
        log.exception("request %s: the turn of session %s failed", turn.request_id, session.id)
        turn.fail(f"internal error while answering (request id {turn.request_id})")

    async def _chat(self, session: SessionInfo) -> ChatSession:
        chat = self._chats.pop(session.id, None)
        if chat is None:  # opening loads the template's hooks: file reads, kept off the event loop
            chat = await asyncio.to_thread(self._open_chat, session, None)
        self._chats[session.id] = chat  # now the most recently used
        self._close_idle()
        return chat

    def _close_idle(self) -> None:
        """Past `max_open_chats`, end the least recently used chats not answering now.

        An ended chat loses nothing: its session opens again, its conversation
        read back from the transcript, with the next message.
        """
        idle = [sid for sid in self._chats if sid not in self._running]
        for session_id in idle[: max(0, len(self._chats) - self._max_open)]:
            self._end_chat(self._chats.pop(session_id))

    async def drain(self, grace_secs: float) -> None:
        """Let running turns finish for up to `grace_secs`, then stop the rest; end every chat."""
        tasks = [t.task for t in self._running.values() if t.task is not None]
        if tasks:
            log.warning("waiting up to %ss for %d running turn(s)", grace_secs, len(tasks))
            _, late = await asyncio.wait(tasks, timeout=grace_secs)
            if late:
                for session_id in list(self._running):
                    chat = self._chats.get(session_id) or self._once.get(session_id)
                    if chat is not None:
                        chat.stop()  # ends with `terminated`: recorded, a running tool call waited for
                await asyncio.wait(late, timeout=grace_secs)
                for task in late:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
        for chat in self._chats.values():
            self._end_chat(chat)
        self._chats.clear()


__all__ = ["Turn", "TurnBusy", "TurnRunner"]
