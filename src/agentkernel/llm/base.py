"""The LLM contract, stated as plain values before anything implements it (S23.4).

A provider turns a `CompletionRequest` (messages, tools, an optional JSON
schema, sampling settings) into a `Completion` (text, tool calls, token
usage). Everything here is a frozen dataclass or a Protocol, so the agent
loop, the `llm()` helpers and the tests share one seam: the real HTTP
provider, the concurrency wrapper and any fake all fit behind `Provider`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from agentkernel.errors import AgentKernelError


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for.

    `arguments` is the raw JSON text the model produced, unparsed: the agent
    loop parses it, so malformed JSON can go back to the model as a failed
    tool result instead of failing the turn.
    """

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatMessage:
    """One message of the conversation, in the chat-completions shape.

    `tool_calls` is set on an assistant message that called tools;
    `tool_call_id` on the `tool` message carrying that call's result.
    """

    role: str
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> ChatMessage:
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str | None, tool_calls: tuple[ToolCall, ...] = ()) -> ChatMessage:
        return cls("assistant", content, tool_calls)

    @classmethod
    def tool(cls, tool_call_id: str, content: str, name: str | None = None) -> ChatMessage:
        """The result of the tool call `tool_call_id`, fed back to the model."""
        return cls("tool", content, tool_call_id=tool_call_id, name=name)


@dataclass(frozen=True)
class ToolSchema:
    """A tool as the model sees it: name, description, JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    """Tokens one completion cost; zeros when the server did not say."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class CompletionRequest:
    """What the kernel asks of a model.

    `json_schema`, when set, asks the server to constrain the answer to that
    schema; the caller still validates it (S9.3), since not every server can
    enforce every schema. `model` overrides the provider's default model.
    `user` is whose call it is (the Caller's user id; None: the kernel's
    own), for sharing the kernel's LLM slots fairly (llm/fair_slots.py),
    and with `template` (the calling agent's) for usage and quotas (S26.3);
    `provider` names the configured provider to ask first (S26.4; None: the
    order `llm:` lists). None of the three is sent to the server.
    """

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSchema, ...] = ()
    json_schema: dict[str, Any] | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    model: str | None = None
    user: str | None = None
    template: str | None = None
    provider: str | None = None


@dataclass(frozen=True)
class Completion:
    """The model's answer: text and/or tool calls, with what it cost; `provider` names the
    configured provider that answered (S26.4), when the kernel's provider stack says."""

    text: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str | None
    model: str | None
    provider: str | None = None

    def message(self) -> ChatMessage:
        """The answer as the assistant message to append to the conversation."""
        return ChatMessage.assistant(self.text, self.tool_calls)


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer's text, as it streams in."""

    text: str


@dataclass(frozen=True)
class StreamDone:
    """The end of a stream: the whole answer, tool calls assembled, usage if known."""

    completion: Completion


StreamEvent: TypeAlias = TextDelta | StreamDone


class Provider(Protocol):
    """Anything that answers chat completions; the one seam for every LLM backend.

    `stream` yields `TextDelta`s and ends with exactly one `StreamDone`. A
    consumer that stops early should close the iterator (`aclosing`), so that
    wrappers holding resources for the whole stream release them at once.
    """

    async def complete(self, request: CompletionRequest) -> Completion: ...

    def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...


class ProviderError(AgentKernelError):
    """An LLM call failed: the server refused, broke, or could not be reached.

    `status` is the HTTP status when there was one; `retryable` says whether
    the same request may succeed later (rate limits, 5xx, timeouts);
    `retry_after` is the server's requested wait in seconds, if it gave one;
    `attempts` is how many requests were made before giving up. The message
    never contains the API key: providers redact it before raising.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        attempts: int = 1,
    ) -> None:
        self.message = message
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.attempts = attempts
        super().__init__(message)


__all__ = [
    "ChatMessage",
    "Completion",
    "CompletionRequest",
    "Provider",
    "ProviderError",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolSchema",
    "Usage",
]
