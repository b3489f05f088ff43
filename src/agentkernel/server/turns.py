"""A session's running turn: one at a time (a second message is 409), and independent of its client.

Each user message runs as an asyncio task of its own, not inside the HTTP
response: the response only reads the task's events from a queue. A client
that disconnects therefore stops nothing; the turn finishes and the loop
records it in the transcript. (A chat completion's one-off turn is the
exception: nobody can read it later or stop it, so its client leaving stops
it.) Scripts never run on the event loop: the agent loop hands every tool
and hook call to a worker thread (DESIGN rule 7).

One turn per session holds across processes too: every turn takes
the session's lease in the store (services/turn_leases.py), in one short
transaction, before anything starts, and gives it back when it ends; while
it runs the lease is renewed every third of `server.turn_lease_secs`. So a
second message is 409 whichever process it reaches, and a process killed
mid-turn frees its sessions `turn_lease_secs` later at most. A turn whose
lease was lost (its process frozen past it, and another turn took the
session) is told by its renewal: it stops, and the store has refused its
records already (the fence, turn_leases.py).

A user has at most `max_running_per_user` turns running at once, sessions'
and completions' alike (server.max_running_turns_per_user): past it,
TooManyTurns (429) before anything starts. The count is the user's live
leases in the store, every process's, counted in the transaction that takes
the lease; it drops when a turn ends, however it ends (or, for a dead
process's turns, when their leases expire).

A tool run in a session spends the budget group of the session's open chat
(tool_runs.py), so the runner lends a chat (`lent`), opening it if need be
and keeping it open while lent.

With `runs.engine: temporal` (a `RunEngine` given), a session's turn is
not run here: the run is recorded with the lease as always, its workflow
started with the lease's token (a worker adopts the lease and drives the
run: server/run_worker.py), and the turn here is `remote`: its events are
read from the store (GET /v1/runs/{id}/events). A run left unfinished is
handed to the engine again rather than resumed here. A chat completion's
one-off turn still runs here: its conversation is its client's, sent with
the request, and it ends when its client leaves.

Why 409 and not a queue: a second message sent while the first is still
being answered was typed without seeing the answer; queueing it would answer
a question the user may no longer ask, and a queue per session is memory a
client can grow. The client waits for `done` (or stops the turn) and sends
again.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from agentkernel.agent.loop import LoopEvent, LoopResult, TurnOptions
from agentkernel.agent.resume import HandedOff, RunDamaged
from agentkernel.agent.session import ChatSession
from agentkernel.errors import ConfigError
from agentkernel.llm.base import ChatMessage
from agentkernel.server.events import StreamEvent, failed_turn, stream_event
from agentkernel.server.sessions import SessionInfo
from agentkernel.services.run_engine import EngineUnavailable, RunEngine
from agentkernel.services.turn_leases import (
    Lease,
    LeaseStore,
    NewRun,
    Run,
    RunExists,
    SessionLeased,
    TurnLeases,
    UserAtCap,
)
from agentkernel.services.user_work import Cap, TooMuchWork

log = logging.getLogger("agentkernel.server")
STOP_POLL_SECS = 1.0
"""How often a process looks in the store for stops asked (on another process) of the turns it runs."""
STOPPING_SECS = 5.0
"""How long a server stopping waits for the turns it stopped to record their end before cancelling them."""

# a session's chat: resumed from its transcript (history None), or a one-off over the given history
OpenChat = Callable[[SessionInfo, list[ChatMessage] | None], ChatSession]
EndChat = Callable[[ChatSession], None]
# what an event becomes before it leaves the server (sealing.py: tables' continuation args become ids)
Seal = Callable[[SessionInfo, StreamEvent], Awaitable[StreamEvent]]


class TurnBusy(Exception):
    """The session is still answering its previous message (HTTP 409)."""

    def __init__(self, session_id: str, resuming: str | None = None) -> None:
        super().__init__(
            f"session {session_id} is still answering the previous message; wait for its `done` event"
            if resuming is None
            else f"session {session_id} is resuming run {resuming}, which its server left unfinished when it "
            f"stopped; read it with GET /v1/runs/{resuming}/events and send again after its `done` event"
        )


@dataclass(frozen=True)
class Retry:
    """How a request that starts a turn says it may be a retry: its Idempotency-Key (a chat completion
    has none: its SDK's retries are found by the body's hash), its body's hash."""

    key: str | None
    body_hash: str


class SameRun(Exception):
    """The request's Idempotency-Key is a run of the user's already (S25.5): that run, or a refusal."""

    def __init__(self, run: Run, same_body: bool) -> None:
        super().__init__(
            f"Idempotency-Key {run.idem_key!r} is run {run.id}"
            if same_body
            else f"Idempotency-Key {run.idem_key!r} was sent before with a different request (run {run.id}, "
            "session {run.session_id}); a new request needs a new key"
        )
        self.run = run
        self.same_body = same_body


class TooManyTurns(TooMuchWork):
    """The user has `server.max_running_turns_per_user` turns answering already (HTTP 429).

    Each turn calls the LLM up to its template's `max_turns` and holds up to
    `server.max_stream_backlog_bytes` for its reader, so one token holder
    starting turns without end (new sessions, or completions dropped after
    the first byte) would spend the LLM budget and the server's memory that
    every user shares. Refused before the turn starts: nothing is recorded.
    """


def turn_cap(limit: int) -> Cap:
    """server.max_running_turns_per_user as a cap: what a refusal says."""
    return Cap(
        "turns",
        "server.max_running_turns_per_user",
        limit,
        "wait for one to end (its `done` event), stop one (POST /v1/sessions/{id}/stop), "
        "or disconnect a chat completion's client (that stops its turn)",
    )


class TemplateGone(Exception):
    """The session's template no longer loads (edited or removed since): the message says so, not where."""

    def __init__(self, session: SessionInfo) -> None:
        super().__init__(
            f"session {session.id}: its template {session.template!r} does not load now "
            "(see `agentkernel check`); nothing was sent"
        )


class _Idle(enum.Enum):
    IDLE = "idle"


_IDLE: Final = _Idle.IDLE  # no event for a keep-alive's while


@dataclass
class Turn:
    """One running turn: the events it emitted so far, in order, then None when it is over.

    The events wait in a queue for the one reader, the HTTP response, which
    takes the next (or, a session's stream, every one waiting, written in one
    piece) only when the client has taken the last (uvicorn's flow control).
    The turn never waits for its reader, so the queue holds what a slow
    client has yet to read: its backlog, in bytes of frames. A reader
    with more than `max_backlog_bytes` waiting when the next event comes is
    cut off: nothing more is queued for it, and after what waits it reads an
    `error` saying why, then `done`. A reader that leaves drops the queue at
    once. Either way the turn goes on and is recorded (docs/server.md, "A
    slow client") — unless the turn has an `on_abandoned`, called when its
    reader leaves before the end (a chat completion's: nobody else can read
    or stop it).
    """

    session_id: str
    request_id: str
    max_backlog_bytes: int = 8 << 20
    run_id: str = ""  # the run it is (S25.1); its first event says so
    task: asyncio.Task[None] | None = None
    seal: Callable[[StreamEvent], Awaitable[StreamEvent]] | None = None
    user_id: str = ""  # whose turn: the per-user cap counts them
    on_abandoned: Callable[[], None] | None = None
    abandoned: bool = False  # the reader left before the end
    handed_off: bool = False  # left running for another process to resume (the server stopping)
    remote: bool = False  # driven by the run engine's workers: its events are read from the store
    result: LoopResult | None = (
        None  # how the loop ended (usage, the client's tool calls): set before the end
    )
    _events: asyncio.Queue[StreamEvent | None] = field(default_factory=asyncio.Queue)
    _backlog: int = 0  # bytes of the frames in _events
    _reading: bool = True  # False once the reader fell behind or left: nothing more is queued
    _read_to_end: bool = False  # the reader took the end (None) off the queue

    @property
    def streaming(self) -> bool:
        """Whether events still go to a reader: False once it fell too far behind or left."""
        return self._reading

    async def emit(self, event: LoopEvent) -> None:
        """The loop's emit: never waits for the client (see the class docstring for the bound)."""
        shown = stream_event(event)
        if shown is not None and self._reading:  # sealed only when it leaves the server
            self._put(shown if self.seal is None else await self.seal(shown))

    def _put(self, event: StreamEvent) -> None:
        if not self._reading:  # the reader left while the event was being sealed
            return
        if self._backlog > self.max_backlog_bytes:  # so one event bigger than the bound still goes out
            self._reading = False  # what waits is still read; after it, why the rest is not
            for notice in failed_turn(
                f"this client fell more than {self.max_backlog_bytes:,} bytes behind the answer, so the "
                f"rest is not streamed to it; the answer goes on and is recorded: read it with "
                f"GET /v1/sessions/{self.session_id}/messages"
            ):
                self._queue(notice)
            self._queue(None)
        else:
            self._queue(event)

    def _queue(self, event: StreamEvent | None) -> None:
        self._backlog += 0 if event is None else len(event.frame())
        self._events.put_nowait(event)

    def _stop_reading(self) -> None:
        """Queue no more, and drop what waits (a reader waiting on the queue keeps waiting on it)."""
        self._reading = False
        while not self._events.empty():
            self._events.get_nowait()
        self._backlog = 0

    def begin(self) -> None:
        """The first event: the run this turn is (its id, for GET /v1/runs/{id} and a reconnect)."""
        self._queue(StreamEvent("run", {"id": self.run_id, "session_id": self.session_id}))

    def fail(self, message: str) -> None:
        if self._reading:
            for event in failed_turn(message):
                self._queue(event)

    def tell(self, message: str) -> None:
        """An `error` event the reader sees before the turn's own end (a turn being stopped, and why)."""
        if self._reading:
            self._queue(StreamEvent("error", {"message": message}))

    def close(self) -> None:
        if self._reading:
            self._queue(None)

    async def events(self, idle_secs: float) -> AsyncGenerator[StreamEvent | None, None]:
        """The events as they come, until the turn is over; None after each `idle_secs` without one.

        One reader only. (A `get` cut short by the timeout takes nothing off the queue.)
        When the reader stops early (its client went away), the queue is dropped.
        """
        try:
            while True:
                event = await self._next(idle_secs)
                if event is _IDLE:
                    yield None
                    continue
                if event is None:
                    self._read_to_end = True
                    return
                self._backlog -= len(event.frame())
                yield event
        finally:
            self._stop_reading()
            self.leave()

    async def batches(self, idle_secs: float) -> AsyncGenerator[list[StreamEvent] | None, None]:
        """As `events`, but every event waiting when the reader comes for the next, together: a reader
        behind the turn (a busy server) writes them in one piece, not one a frame.

        Only an empty queue is waited on.
        """
        try:
            while True:
                event = await self._next(idle_secs)
                if event is _IDLE:
                    yield None
                    continue
                batch: list[StreamEvent] = []
                while event is not None:
                    self._backlog -= len(event.frame())
                    batch.append(event)
                    if self._events.empty():
                        break
                    event = self._events.get_nowait()
                if batch:
                    yield batch
                if event is None:  # after the last events were taken: a reader gone before is abandoned
                    self._read_to_end = True
                    return
        finally:
            self._stop_reading()
            self.leave()

    async def _next(self, idle_secs: float) -> StreamEvent | _Idle | None:
        """The next event, the end (None), or _IDLE after `idle_secs` without one. Only an empty queue is
        waited on, under `asyncio.timeout` (a timer; `wait_for` made a task of every wait)."""
        if not self._events.empty():
            return self._events.get_nowait()
        try:
            async with asyncio.timeout(idle_secs):
                return await self._events.get()
        except TimeoutError:
            return _IDLE

    def leave(self) -> None:
        """The reader is done with the turn: when it did not read to the end, the turn is abandoned.

        Called by `events` when it closes, and by a response that ends before
        it ever began reading them (its client gone after the first chunk).
        Once is enough: later calls do nothing.
        """
        if self._read_to_end or self.abandoned:
            return
        self.abandoned = True
        if self.on_abandoned is not None:
            self.on_abandoned()


@dataclass(eq=False)
class _Keeper:
    """A running turn's lease renewal: the timer that starts it, then its task (turns.py `_hold`)."""

    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[None] | None = None

    async def stop(self) -> None:
        """No more renewals: the timer cancelled, or the task cancelled and waited for."""
        if self.timer is not None:
            self.timer.cancel()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


class TurnRunner:
    """The server's open chats (one per session, opened on its first message) and their running turns.

    Everything here runs on the server's event loop, so the 409 check and
    the start of a turn cannot interleave with another request's.
    """

    def __init__(
        self,
        open_chat: OpenChat,
        end_chat: EndChat,
        max_open_chats: int = 256,
        seal: Seal | None = None,
        max_backlog_bytes: int = 8 << 20,
        max_running_per_user: int = 4,
        leases: Callable[[], LeaseStore] | None = None,
        lease_secs: float = 20.0,
        check_quota: Callable[[str, str], None] | None = None,
        engine: RunEngine | None = None,
    ) -> None:
        self._open_chat = open_chat
        self._engine = engine  # runs.engine: temporal: sessions' runs are driven there, not here
        self._check_quota = check_quota  # (user, template): QuotaExhausted when a quota is spent (S26.3)
        self._cap = turn_cap(max_running_per_user)
        # the store's, shared by every process on it, opened by the first turn (a runner alone, in a
        # test, keeps its own in memory)
        self._leases = functools.cache(leases or (lambda: TurnLeases(":memory:")))
        self._lease_secs = lease_secs
        self._max_backlog = max_backlog_bytes
        self._end_chat = end_chat
        self._max_open = max_open_chats
        self._seal = seal
        self._chats: dict[str, ChatSession] = {}  # least recently used first
        self._once: dict[str, ChatSession] = {}  # one-off chats, ended with their turn
        self._running: dict[str, Turn] = {}
        self._lent: dict[str, int] = {}  # session id -> tool runs spending its chat's budget now
        self._opening: dict[str, asyncio.Future[ChatSession]] = {}  # session id -> its chat being opened
        self._held: dict[str, Lease] = {}  # session id -> the lease of the turn running here
        self._stop_watch: asyncio.Task[None] | None = None
        self._handing: set[asyncio.Task[None]] = set()  # runs being handed to the engine

    def running(self, session_id: str) -> bool:
        return session_id in self._running

    def running_of(self, user_id: str) -> int:
        """How many turns of `user_id` are answering now (every route's and every process's: live leases)."""
        return self._leases().running(user_id)

    def stop(self, session_id: str) -> bool:
        """Stop the session's running turn here (it ends `terminated`, recorded); False when none runs."""
        chat = self._chats.get(session_id) or self._once.get(session_id)
        return session_id in self._running and chat is not None and chat.stop()

    async def stop_anywhere(self, session_id: str) -> bool:
        """Stop the session's running turn, on this process or another (the holder looks for the stop in
        the store every STOP_POLL_SECS; with a run engine, its workflow is cancelled); False when none
        runs."""
        if self.stop(session_id):
            return True
        if self._engine is not None:
            runs = await asyncio.to_thread(self._leases().runs_of, session_id, 1)
            try:
                if runs and runs[0].running and not runs[0].one_off and await self._engine.cancel(runs[0].id):
                    return True
            except EngineUnavailable:  # the stop is asked in the store: the worker looks there too
                log.exception("session %s: could not cancel its run's workflow", session_id)
        return await asyncio.to_thread(self._leases().ask_stop, session_id)

    async def start(
        self,
        session: SessionInfo,
        text: str | None,
        request_id: str,
        history: list[ChatMessage] | None = None,
        options: TurnOptions | None = None,
        retry: Retry | None = None,
    ) -> Turn:
        """Start answering `text` in `session`; TurnBusy when it is answering already (here or in another
        process), TooManyTurns when its user has `max_running_per_user` turns answering (anywhere),
        QuotaExhausted when the user has spent a quota of kernel.yaml's `quotas:` (S26.3).

        With `history`, the chat is a one-off: it starts from that history
        (not the session's transcript) and ends with the turn. That is a
        stateless client's turn, which sends the whole conversation each
        time (`POST /v1/chat/completions`), with `options` (its own tools,
        an output schema), and `text` None when its history ends with its
        tool results. Nobody can stop it but its reader, so a reader that
        leaves stops it (ends `terminated`).

        The turn is a run (S25.1), started in the transaction that takes the
        lease. With `retry`, SameRun when its key names a run of the user
        already. When the session has a run its dead server left unfinished,
        that run is resumed here first, and this message is TurnBusy.
        """
        if session.id in self._running:
            raise TurnBusy(session.id)
        if self._check_quota is not None:  # a user whose quota is spent is told at once, no run started
            await asyncio.to_thread(self._check_quota, session.user_id, session.template)
        run = NewRun(
            str(uuid.uuid4()),
            text,
            one_off=history is not None,
            idem_key=None if retry is None else retry.key,
            body_hash=None if retry is None else retry.body_hash,
            template=session.template,
        )
        turn = Turn(session.id, request_id, self._max_backlog, user_id=session.user_id, run_id=run.id)
        self._running[session.id] = turn  # before the lease is asked for: a second message here is 409
        try:
            lease = await self._take(session, run)
        except BaseException as exc:
            del self._running[session.id]
            if isinstance(exc, SessionLeased):
                raise TurnBusy(session.id) from exc
            if isinstance(exc, UserAtCap):
                raise TooManyTurns(session.user_id, self._cap, exc.running) from exc
            if isinstance(exc, RunExists):
                raise SameRun(exc.run, exc.same_body) from exc
            raise
        if lease.resumes is not None:
            del self._running[session.id]
            self.resume(session, lease, request_id)
            raise TurnBusy(session.id, resuming=lease.resumes.id)
        if self._engine is not None and history is None:
            await self._hand_over(turn, lease)
            return turn
        if self._seal is not None:
            turn.seal = functools.partial(self._seal, session)
        if history is not None:
            turn.on_abandoned = functools.partial(self._stop_once, session.id)
        work = (
            self._run(session, text, turn, lease)
            if history is None
            else self._run_once(session, text, turn, lease, history, options)
        )
        turn.task = asyncio.create_task(work, name=f"turn {session.id}")
        turn.begin()
        return turn

    async def _take(self, session: SessionInfo, run: NewRun) -> Lease:
        """The session's lease with `run` started: on the event loop when the store takes the write at
        once (no hop to a worker thread, about 60 µs of CPU), else on a worker thread, where a busy
        store (another process writing) may keep it waiting."""
        opened = self._opened_leases()
        taken = (
            None
            if opened is None
            else opened.take_at_once(session.id, session.user_id, self._lease_secs, self._cap.limit, run)
        )
        if taken is not None:
            return taken
        secs, most = self._lease_secs, self._cap.limit
        # the store opened on the worker thread too (a file read, maybe migrated)
        taking = asyncio.ensure_future(
            asyncio.to_thread(lambda: self._leases().take(session.id, session.user_id, secs, most, run))
        )
        try:
            return await asyncio.shield(taking)
        except asyncio.CancelledError:  # its request went away while the store answered
            taking.add_done_callback(self._give_back)
            raise

    def _opened_leases(self) -> LeaseStore | None:
        """The lease store once opened (by a worker thread: opening reads and may migrate the file);
        None before."""
        return self._leases() if self._leases.cache_info().currsize else None

    async def _hand_over(self, turn: Turn, lease: Lease) -> None:
        """The run goes to the engine with its lease (a worker adopts it); it is not running here.
        When the engine cannot start it, the run ends `error` and the lease goes back."""
        del self._running[turn.session_id]
        assert self._engine is not None
        try:
            await self._engine.start(turn.run_id, lease.token)
        except BaseException:
            await asyncio.shield(asyncio.to_thread(self._leases().end_run, turn.run_id, "error", lease.token))
            await asyncio.shield(asyncio.to_thread(self._leases().release, lease))
            raise
        turn.remote = True

    def resume(
        self, session: SessionInfo, lease: Lease, request_id: str, *, fresh: bool = False
    ) -> Turn | None:
        """Go on with the run its dead server left unfinished (`lease.resumes`), in the background: its
        events are read from the store (GET /v1/runs/{id}/events). None when the session runs a turn here,
        or when a run engine drives it (its lease given back, its workflow started if none runs).
        `fresh`: the run was handed here by the server that recorded it (a run engine's worker), not left
        by a dead one."""
        run = lease.resumes
        assert run is not None
        if self._engine is not None and not run.one_off:
            handing = asyncio.create_task(self._to_engine(lease, run.id), name=f"to the engine {run.id}")
            self._handing.add(handing)
            handing.add_done_callback(self._handing.discard)
            return None
        if session.id in self._running:  # cannot be: the lease was free; but never two turns at once here
            asyncio.get_running_loop().run_in_executor(None, self._leases().release, lease)
            return None
        turn = Turn(session.id, request_id, self._max_backlog, user_id=session.user_id, run_id=run.id)
        turn.abandoned = True  # nobody reads it here: its events go nowhere but the store
        turn._stop_reading()
        self._running[session.id] = turn
        if fresh:
            log.info("session %s: driving run %s, handed here by its server", session.id, run.id)
        else:
            log.warning("session %s: resuming run %s, which its server left unfinished", session.id, run.id)
        turn.task = asyncio.create_task(self._run(session, None, turn, lease, run), name=f"resume {run.id}")
        return turn

    async def _to_engine(self, lease: Lease, run_id: str) -> None:
        """Give the lease back, then make sure the run's workflow runs (a worker takes the lease over)."""
        assert self._engine is not None
        try:
            await asyncio.to_thread(self._leases().release, lease)
            await self._engine.start(run_id)
        except Exception:  # the resumer's next pass asks again
            log.exception("run %s: could not hand it to the run engine", run_id)

    async def _run(
        self, session: SessionInfo, text: str | None, turn: Turn, lease: Lease, resumes: Run | None = None
    ) -> None:
        keeper = self._hold(lease, turn)
        chat: ChatSession | None = None
        try:
            chat = await self._chat(session)
            if resumes is None:
                turn.result = await chat.send(text, turn.emit, lease=lease.token, run_id=turn.run_id)
            else:
                turn.result = await chat.resume(resumes, turn.emit, lease=lease.token)
        except HandedOff:
            turn.handed_off = True
            log.warning("run %s: left for the next server to resume (this one is stopping)", turn.run_id)
        except Exception as exc:
            message = self._failed(session, turn, exc)
            if chat is not None:  # the transcript says why the run ended
                await self._record_failure(chat, turn.run_id, lease, message)
        finally:
            try:
                await self._release(lease, keeper, turn, chat is not None and chat.gave_back(lease.token))
            finally:
                del self._running[session.id]
                turn.close()

    def _hold(self, lease: Lease, turn: Turn) -> _Keeper:
        """Keep `lease` while the turn runs, and watch for stops asked.

        Its renewal is a timer until the turn outlives a third of the lease,
        and a task only from then on: most turns end long before, and a task
        made and cancelled for each cost more than the timer.
        """
        self._held[lease.session_id] = lease
        if self._stop_watch is None or self._stop_watch.done():
            self._stop_watch = asyncio.create_task(self._watch_stops(), name="turn stops")
        keeper = _Keeper()

        def renewing() -> None:
            keeper.task = asyncio.create_task(self._keep(lease, turn), name=f"lease {lease.session_id}")

        keeper.timer = asyncio.get_running_loop().call_later(lease.secs / 3, renewing)
        return keeper

    async def _watch_stops(self) -> None:
        """Every STOP_POLL_SECS while turns run here, one look in the store for the stops asked of any
        of them on another process (POST /v1/sessions/{id}/stop there); each such turn stops.

        One query a process, not one a turn: at a hundred turns running, a
        look each per second was a hundred reads a second for a rare event.
        """
        while self._held:
            await asyncio.sleep(STOP_POLL_SECS)
            held = list(self._held.values())
            if not held:
                break
            try:
                asked = await asyncio.to_thread(self._leases().stops_asked, held)
            except Exception:  # a store busy past its wait: the next look tries again
                log.exception("could not look for stops asked of the turns running here")
                continue
            for lease in asked:
                self._stop_here(lease.session_id)

    async def _keep(self, lease: Lease, turn: Turn) -> None:
        """Renew the turn's lease now (a third of its length after it was taken), then every third of its
        length; once lost, stop the turn and say why.

        Its records are refused by the store from the moment another turn took
        the session (the fence); stopping spares the LLM and tool calls too.
        """
        while True:
            try:
                kept = await asyncio.to_thread(lambda: self._leases().renew(lease))
            except Exception:  # a store busy past its wait: the next renewal tries again
                log.exception("session %s: could not renew the turn's lease", lease.session_id)
                kept = True
            if not kept:
                break
            await asyncio.sleep(lease.secs / 3)
        if self._gave_back(lease):  # the run's end took the lease with it: nothing was lost
            return
        message = (
            f"session {lease.session_id}: this server held the turn past server.turn_lease_secs "
            f"({lease.secs:g} s) without renewing it, and another turn holds the session now; "
            "this turn stops and nothing more of it is recorded"
        )
        log.warning("request %s: %s", turn.request_id, message)
        turn.tell(message)  # then the turn's end, `terminated`
        self._stop_here(lease.session_id)

    def _stop_here(self, session_id: str) -> None:
        chat = self._chats.get(session_id) or self._once.get(session_id)
        if chat is not None:
            chat.stop()

    def _gave_back(self, lease: Lease) -> bool:
        """Whether the chat of `lease`'s session ended its run under it, the lease going with the end."""
        chat = self._chats.get(lease.session_id) or self._once.get(lease.session_id)
        return chat is not None and chat.gave_back(lease.token)

    def _give_back(self, taking: asyncio.Future[Lease]) -> None:
        """A lease taken for a request that went away meanwhile goes back at once, not at its expiry."""
        if not taking.cancelled() and taking.exception() is None:
            asyncio.get_running_loop().run_in_executor(None, self._leases().release, taking.result())

    async def _release(self, lease: Lease, keeper: _Keeper, turn: Turn, given_back: bool = False) -> None:
        """The turn is over: no more renewals, and its lease goes back (unless another holds it now, or
        `given_back`: the run's end, written under it, took it along: services/memory.py `append_step`).

        A run the loop did not end (the turn failed, or never began) is ended
        `error` first, so no process takes it for a run to resume.
        """
        if self._held.get(lease.session_id) is lease:
            del self._held[lease.session_id]
        await keeper.stop()
        try:
            if turn.result is None and not turn.handed_off:
                await asyncio.shield(
                    asyncio.to_thread(lambda: self._leases().end_run(turn.run_id, "error", lease.token))
                )
        except Exception:
            log.exception("run %s: could not record its end", turn.run_id)
        if given_back:
            return
        try:
            if not self._leases().release_at_once(lease):  # opened: the turn took it
                await asyncio.shield(asyncio.to_thread(lambda: self._leases().release(lease)))
        except Exception:  # it expires by itself
            log.exception("session %s: could not release the turn's lease", lease.session_id)

    async def _run_once(
        self,
        session: SessionInfo,
        text: str | None,
        turn: Turn,
        lease: Lease,
        history: list[ChatMessage],
        options: TurnOptions | None,
    ) -> None:
        keeper = self._hold(lease, turn)
        try:
            self._once[session.id] = chat = await self._open(session, history)
            if turn.abandoned:  # the client left while the chat was opening: nobody to answer
                return
            turn.result = await chat.send(text, turn.emit, options, lease=lease.token, run_id=turn.run_id)
        except Exception as exc:
            self._failed(session, turn, exc)
        finally:
            try:
                await self._release(lease, keeper, turn, self._gave_back(lease))
            finally:
                del self._running[session.id]
                once = self._once.pop(session.id, None)
                if once is not None:
                    self._end_chat(once)
                turn.close()

    def _stop_once(self, session_id: str) -> None:
        """A one-off turn's reader left: stop it (a chat still opening is never sent the message)."""
        chat = self._once.get(session_id)
        if chat is not None and chat.stop():
            log.info("session %s: its client went away, so its one-off turn stops", session_id)

    @staticmethod
    def _failed(session: SessionInfo, turn: Turn, exc: Exception) -> str:
        """Called in the `except`: the client sees why, or an id to quote while the log has the traceback.
        Returns what it was told."""
        if isinstance(
            exc, TemplateGone | RunDamaged
        ):  # the project or the file changed: not the server's fault
            log.warning("request %s: %s: %s", turn.request_id, exc, exc.__cause__)
            turn.fail(str(exc))
            return str(exc)
        log.exception("request %s: the turn of session %s failed", turn.request_id, session.id)
        told = f"internal error while answering (request id {turn.request_id})"
        turn.fail(told)
        return told

    @staticmethod
    async def _record_failure(chat: ChatSession, run_id: str, lease: Lease, message: str) -> None:
        try:
            await asyncio.to_thread(chat.record_failure, run_id, lease.token, message)
        except Exception:  # the run still ends (`_release`), without its reason in the transcript
            log.exception("run %s: could not record its failure", run_id)

    async def _open(self, session: SessionInfo, history: list[ChatMessage] | None) -> ChatSession:
        """Opening loads the template's hooks: file reads, kept off the event loop."""
        try:
            return await asyncio.to_thread(self._open_chat, session, history)
        except ConfigError as exc:
            raise TemplateGone(session) from exc

    async def _chat(self, session: SessionInfo) -> ChatSession:
        chat = self._chats.pop(session.id, None)
        if chat is None:
            chat = await self._opened(session)
            self._chats.pop(session.id, None)
        self._chats[session.id] = chat  # now the most recently used
        self._close_idle()
        return chat

    async def _opened(self, session: SessionInfo) -> ChatSession:
        """The session's chat opened once, however many ask at the same moment (a message, tool runs).

        Once open it is among the open chats even if every asker was
        cancelled meanwhile, so no chat is left open and unknown.
        """
        opening = self._opening.get(session.id)
        if opening is None:
            opening = asyncio.ensure_future(self._open(session, None))
            self._opening[session.id] = opening
            opening.add_done_callback(functools.partial(self._now_open, session.id))
        return await asyncio.shield(opening)

    def _now_open(self, session_id: str, opening: asyncio.Future[ChatSession]) -> None:
        del self._opening[session_id]
        if not opening.cancelled() and opening.exception() is None:
            self._chats.setdefault(session_id, opening.result())

    @contextlib.asynccontextmanager
    async def lent(self, session: SessionInfo) -> AsyncIterator[ChatSession]:
        """The session's open chat (opened now if it is not), never closed as idle while lent.

        A tool run in the session spends the chat's budget group: its process
        is a child of the chat's (tool_runs.py), which closing the chat would end.
        """
        self._lent[session.id] = self._lent.get(session.id, 0) + 1  # first: opening it closes idle ones
        try:
            yield await self._chat(session)
        finally:
            left = self._lent.pop(session.id) - 1
            if left:
                self._lent[session.id] = left

    def _close_idle(self) -> None:
        """Past `max_open_chats`, end the least recently used chats neither answering nor lent now.

        An ended chat loses nothing: its session opens again, its conversation
        read back from the transcript, with the next message.
        """
        idle = [sid for sid in self._chats if sid not in self._running and sid not in self._lent]
        for session_id in idle[: max(0, len(self._chats) - self._max_open)]:
            self._end_chat(self._chats.pop(session_id))

    async def drain(self, grace_secs: float) -> None:
        """Let running turns finish for up to `grace_secs`, then stop the rest; end every chat.

        A session's run stopped so is handed off, not ended: it stays
        `running` in the store, its lease given back, and the next server
        (or another worker now) resumes it from its last step (S25.3), so a
        restart loses no turn. A chat completion's run ends `terminated`.
        """
        tasks = [t.task for t in self._running.values() if t.task is not None]
        if tasks:
            log.warning("waiting up to %ss for %d running turn(s)", grace_secs, len(tasks))
            _, late = await asyncio.wait(tasks, timeout=grace_secs)
            if late:
                for session_id in list(self._running):
                    # a session's run is left for the next server, at its next step (a running tool
                    # call waited for); a one-off's ends `terminated` (its client has its conversation)
                    if session_id in self._chats:
                        self._chats[session_id].stop(hand_off=True)
                    elif session_id in self._once:
                        self._once[session_id].stop()
                # a stopped turn ends at once (its end recorded) unless a tool call is running; a grace
                # shorter than that on a busy machine cancelled it before the record
                await asyncio.wait(late, timeout=max(grace_secs, STOPPING_SECS))
                for task in late:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
        for chat in self._chats.values():
            self._end_chat(chat)
        self._chats.clear()


__all__ = [
    "Retry",
    "SameRun",
    "TemplateGone",
    "TooManyTurns",
    "Turn",
    "TurnBusy",
    "TurnRunner",
    "turn_cap",
]
