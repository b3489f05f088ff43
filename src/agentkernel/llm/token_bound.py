"""Upper bounds on what an inference can cost, so a shared budget is held before it is spent (S9.2, S17).

No tokenizer is needed for an upper bound: a token is at least one byte of
UTF-8 text, so a prompt costs at most its bytes plus a margin per message
for the chat template's role and separator tokens. That bound is loose (a
token is 3 to 8 bytes in practice), so once a server has answered, the
agent loop knows the exact cost of everything up to that answer
(`PromptTokens`): the next prompt is that plus the bytes of what was added
since — a tight bound after the first call of a conversation.

`held_for` (and `held_for_async`, the agent loop's) is the one way an
inference spends a limited budget group: it reserves the bound plus the
answer's `max_tokens` (`ANSWER_ROOM` when the request sets none), and
releases the hold once the caller has charged the answer. Callers in
parallel — scripts' `llm()` calls, sub-agents' loops — therefore never spend
past the limit, unless a server reports more tokens than the bound allowed
for. When the room is not free because other calls hold it, a caller waits
for them to settle; only when nothing else is in flight does it shrink its
`max_tokens` to what is left, or get `caller budget exhausted`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from agentkernel.budget import BudgetExhausted, BudgetGroup
from agentkernel.llm.base import ChatMessage, ToolSchema, Usage

if TYPE_CHECKING:  # aiologic: imported only by a limited budget under contention
    from aiologic import Event

MESSAGE_MARGIN = 16
"""Tokens allowed per message beyond its text's bytes: the chat template's role and separator tokens."""


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def message_bound(message: ChatMessage) -> int:
    """Most tokens one message can cost: its texts' bytes (tool calls included) and the margin."""
    size = _bytes(message.content or "") + _bytes(message.name or "") + _bytes(message.tool_call_id or "")
    for call in message.tool_calls:
        size += _bytes(call.id) + _bytes(call.name) + _bytes(call.arguments) + MESSAGE_MARGIN
    return size + MESSAGE_MARGIN


def prompt_bound(
    messages: Sequence[ChatMessage],
    json_schema: dict[str, Any] | None = None,
    tools: Sequence[ToolSchema] = (),
) -> int:
    """Most tokens a prompt can cost: every message, the schema and the tools' definitions, in bytes."""
    extra = 0 if json_schema is None else _bytes(json.dumps(json_schema, ensure_ascii=False))
    for tool in tools:
        extra += _bytes(tool.name) + _bytes(tool.description) + MESSAGE_MARGIN
        extra += _bytes(json.dumps(tool.parameters, ensure_ascii=False))
    return sum(message_bound(m) for m in messages) + extra + MESSAGE_MARGIN


class PromptTokens:
    """The bound of a conversation's next prompt, exact for the part a server has already counted.

    After an answer, `learn` keeps the messages up to and including it and
    what the server said they cost (prompt plus completion tokens). The next
    prompt that starts with those messages is bounded by that count plus the
    bytes of the messages after them; any other prompt by its bytes alone.
    """

    def __init__(self) -> None:
        self._known: tuple[ChatMessage, ...] = ()
        self._tokens = 0

    def bound(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSchema]) -> int:
        count = len(self._known)
        if count and tuple(messages[:count]) == self._known:
            return self._tokens + sum(message_bound(m) for m in messages[count:]) + MESSAGE_MARGIN
        return prompt_bound(messages, tools=tools)

    def learn(self, messages: Sequence[ChatMessage], usage: Usage) -> None:
        """`messages` (the answer last) cost `usage`; a server that reported nothing teaches nothing."""
        if usage.prompt_tokens > 0:
            self._known, self._tokens = tuple(messages), usage.total_tokens
        else:
            self._known, self._tokens = (), 0


ANSWER_ROOM = 4096
"""Tokens held for an answer whose request sets no `max_tokens`, when a budget limits the caller."""


class _Hold:
    """One call's hold on a limited budget group: tried, waited for, released.

    `attempt` reserves the call's whole room (`most`) or, while others' holds
    may come back, returns the signal to wait on before trying again. When
    nothing else is held in the tree, or at `end` (time.monotonic()), it
    settles for what is free if that is at least `least` (the answer then
    gets fewer tokens), else BudgetExhausted: calls near the end of a budget
    wait their turn rather than be refused or overspend.
    """

    def __init__(self, budget: BudgetGroup, bound: int, max_tokens: int | None, end: float | None) -> None:
        self.budget = budget
        self.bound = bound
        self.least, self.most = bound + 1, bound + (max_tokens if max_tokens is not None else ANSWER_ROOM)
        self.end = end
        self.held = 0

    def attempt(self) -> Event | None:
        signal = self.budget.release_signal()  # taken first: a release after a failed try still wakes us
        try:
            self.held = self.budget.reserve(self.most, self.most)
        except BudgetExhausted:
            if self.budget.in_flight and self.left() != 0.0:
                return signal
            self.held = self.budget.reserve(self.least, self.most)
        return None

    def left(self) -> float | None:
        """Seconds to wait at most; None for no end."""
        return None if self.end is None else max(0.0, self.end - time.monotonic())

    @contextmanager
    def released(self) -> Iterator[int]:
        """The answer's `max_tokens` while held; the hold is given back at the end, whatever happens."""
        try:
            yield self.held - self.bound
        finally:
            self.budget.release(self.held)


def _limited(budget: BudgetGroup | None) -> bool:
    return budget is not None and budget.remaining is not None


@contextmanager
def held_for(
    budget: BudgetGroup | None, bound: int, max_tokens: int | None, timeout: float | None
) -> Iterator[int | None]:
    """The `max_tokens` to ask with, a bound of the call's cost held in `budget` meanwhile.

    Without a budget (a caller with no process) or without a limit on it, nothing is held and
    `max_tokens` is as given. Otherwise the prompt's `bound` plus the answer's
    room is held, waiting (on this thread, at most `timeout` s) for calls in
    flight to settle when it is not free; BudgetExhausted (`caller budget
    exhausted`) when not even `bound + 1` is left. Charge the answer's usage
    inside the block, so its tokens are always counted as held or as used.
    """
    if budget is None or not _limited(budget):
        yield max_tokens
        return
    hold = _Hold(budget, bound, max_tokens, None if timeout is None else time.monotonic() + timeout)
    while (signal := hold.attempt()) is not None:
        signal.wait(hold.left())
    with hold.released() as room:
        yield room


@asynccontextmanager
async def held_for_async(
    budget: BudgetGroup, bound: int, max_tokens: int | None, deadline: float | None
) -> AsyncIterator[int | None]:
    """`held_for` for the agent loop: the wait for calls in flight is awaited, never blocking the loop.

    It waits until `deadline` (the process's, time.monotonic()) at most.
    Cancelling the task (a stop) while it waits holds nothing.
    """
    import asyncio  # only the agent loop holds asynchronously; a script's `llm()` never imports asyncio

    if not _limited(budget):
        yield max_tokens
        return
    hold = _Hold(budget, bound, max_tokens, deadline)
    while (signal := hold.attempt()) is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_awaited(signal), hold.left())
    with hold.released() as room:
        yield room


async def _awaited(signal: Event) -> None:
    await signal


__all__ = [
    "ANSWER_ROOM",
    "MESSAGE_MARGIN",
    "PromptTokens",
    "held_for",
    "held_for_async",
    "message_bound",
    "prompt_bound",
]
