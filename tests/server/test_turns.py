"""A turn's events as its reader takes them (Turn.batches, Turn.events): those waiting come together.

A reader behind its turn (a busy server) writes every frame waiting in one
piece; the events, their order, the end and what a reader that leaves
early does to the turn are as when they came one by one.
"""

from __future__ import annotations

import asyncio
import contextlib

from agentkernel.server.events import StreamEvent
from agentkernel.server.turns import Turn

IDLE_SECS = 60.0  # the keep-alive's wait; never reached here (every event is queued before it is read)


def queued(count: int, *, ended: bool) -> Turn:
    """A turn whose `run` event and `count` tokens wait, then its end when `ended`."""
    turn = Turn("s1", "r1", run_id="run-1")
    turn.begin()
    for number in range(count):
        turn._put(StreamEvent("token", {"text": str(number)}))
    if ended:
        turn.close()
    return turn


async def read_batches(turn: Turn) -> list[list[str] | None]:
    shown: list[list[str] | None] = []
    async with contextlib.aclosing(turn.batches(IDLE_SECS)) as batches:
        async for batch in batches:
            shown.append(None if batch is None else [event.type for event in batch])
    return shown


def test_the_events_waiting_come_in_one_batch_in_order_and_the_end_after_them() -> None:
    turn = queued(3, ended=True)
    assert asyncio.run(read_batches(turn)) == [["run", "token", "token", "token"]]
    assert not turn.abandoned  # read to the end
    assert turn._backlog == 0


def test_events_still_gives_them_one_by_one_in_the_same_order() -> None:
    async def read() -> list[str]:
        turn = queued(2, ended=True)
        async with contextlib.aclosing(turn.events(IDLE_SECS)) as events:
            return [event.type async for event in events if event is not None]

    assert asyncio.run(read()) == ["run", "token", "token"]


def test_a_reader_that_leaves_before_the_end_abandons_the_turn() -> None:
    async def leave_after_one_batch(turn: Turn) -> list[str]:
        async with contextlib.aclosing(turn.batches(IDLE_SECS)) as batches:
            async for batch in batches:
                assert batch is not None
                return [event.type for event in batch]
        return []

    turn = queued(2, ended=False)
    assert asyncio.run(leave_after_one_batch(turn)) == ["run", "token", "token"]
    assert turn.abandoned  # the end never reached the reader
    assert not turn.streaming  # nothing more is queued for it


def test_events_queued_after_a_batch_was_taken_come_in_the_next() -> None:
    async def read() -> list[list[str] | None]:
        turn = queued(1, ended=False)
        shown: list[list[str] | None] = []
        async with contextlib.aclosing(turn.batches(IDLE_SECS)) as batches:
            async for batch in batches:
                shown.append(None if batch is None else [event.type for event in batch])
                if len(shown) == 1:  # the turn goes on while the reader writes
                    turn._put(StreamEvent("reply", {"content": "x", "streamed": True}))
                    turn.close()
        return shown

    assert asyncio.run(read()) == [["run", "token"], ["reply"]]
