"""The OpenAI chat-completions shapes, both ways: a request's messages in, a turn's events out.

`POST /v1/chat/completions` lets any OpenAI client talk to an agent
(docs/server.md, "OpenAI-compatible endpoint"). The protocol is stateless:
the client sends the whole conversation each time, so the earlier messages
become the turn's history and the last one, a user message, is what the
agent answers. `model` names the template.

The standard fields stay standard. Everything the protocol has no place
for — notices, tool calls and their results with their visual blocks,
warnings, errors, the loop's end reason — travels in one extension field,
`agentkernel`: on a completion `{session, reason, events: [{type, data}]}`,
on a stream chunk `{session}` (first chunk) or `{type, data}` (one event of
the API's SSE stream, events.py, the same shapes).

What a client sends that an agent cannot honour is refused by name (422):
client-side `tools` and `tool` messages (the agent calls its template's own
tools), non-text content parts, `n` > 1. Sampling fields (`temperature`,
`max_tokens`, …) are accepted and not used: the template and kernel.yaml
choose the model and its settings.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, TypeAdapter, WithJsonSchema

from agentkernel.llm.base import ChatMessage
from agentkernel.server.events import StreamEvent
from agentkernel.types import JSONObject, JSONValue

EXTENSION: Final = "agentkernel"
# the loop's end reason → the protocol's finish_reason
_FINISH: Final = {
    "job_done": "stop",
    "terminated": "stop",
    "error": "stop",
    "max_turns": "length",
    "budget_exhausted": "length",
    "blocked": "content_filter",
}
# events the standard fields already carry: the answer's text, and the end (finish_reason)
_STANDARD: Final = frozenset({"token", "reply", "done"})


class RequestMessage(BaseModel):
    """One message of the conversation the client sends."""

    model_config = ConfigDict(extra="allow")  # name, tool_calls, …: checked where they matter

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


# Each message is validated only once the route has counted them (server.max_completion_messages):
# validating a body of 8 MiB of empty messages, 240,000 of them, held the event loop for seconds.
_MESSAGES: Final = TypeAdapter(list[RequestMessage])
_MESSAGES_SCHEMA: Final[JSONObject] = {
    "type": "array",
    "minItems": 1,
    "items": RequestMessage.model_json_schema(),
    "description": "the conversation; the last is the user's",
}


class CompletionRequest(BaseModel):
    """The request body; unknown fields are accepted and not used (see the module docstring)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, description="the agent's template, e.g. hello-agent (GET /v1/models)")
    messages: Annotated[list[Any], WithJsonSchema(_MESSAGES_SCHEMA)] = Field(min_length=1)
    # strict: `true` is no `n` and 1 no `stream` (lax pydantic takes one for the other, against the schema)
    stream: StrictBool = Field(default=False, description="server-sent `chat.completion.chunk`s, then [DONE]")
    n: StrictInt | None = Field(default=None, description="only 1")
    tools: list[Any] | None = Field(default=None, description="not supported: the template's tools are used")


class Refused(ValueError):
    """A request an agent cannot honour: `field` names where, the message says why (HTTP 422)."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")


def conversation(request: CompletionRequest) -> tuple[list[ChatMessage], str]:
    """The history (every message but the last) and the user's new message.

    Refused naming the field for what an agent cannot honour; pydantic's
    ValidationError, located within `messages`, for a message of the wrong
    shape.
    """
    if request.tools:
        raise Refused(
            "body.tools", "client-side tools are not supported; the agent calls its template's tools"
        )
    if request.n is not None and request.n != 1:
        raise Refused("body.n", f"{request.n}: only one choice is made (n = 1)")
    *earlier, last = _MESSAGES.validate_python(request.messages)
    where = f"body.messages.{len(earlier)}"
    if last.role != "user":
        raise Refused(f"{where}.role", f"{last.role!r}: the last message must be the user's")
    history = [_history_message(f"body.messages.{i}", m) for i, m in enumerate(earlier)]
    return history, _text(where, last)


def _history_message(where: str, message: RequestMessage) -> ChatMessage:
    if message.role == "tool" or getattr(message, "tool_calls", None):
        raise Refused(f"{where}.role", "tool calls from the client are not supported (no client-side tools)")
    text = _text(where, message)
    if message.role in ("system", "developer"):
        return ChatMessage.system(text)
    return ChatMessage.user(text) if message.role == "user" else ChatMessage.assistant(text)


def _text(where: str, message: RequestMessage) -> str:
    """A message's text: its string content, or its text parts joined."""
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for i, part in enumerate(content):
        kind, text = part.get("type"), part.get("text")
        if kind != "text":
            raise Refused(f"{where}.content.{i}.type", f"{kind!r}: only text parts are supported")
        if not isinstance(text, str):
            raise Refused(f"{where}.content.{i}.text", "a text part's `text` must be a string")
        texts.append(text)
    return "\n".join(texts)


def finish_reason(end_reason: str) -> str:
    return _FINISH.get(end_reason, "stop")


@dataclass
class Completion:
    """One completion's identity and what the turn said, gathered as its events come."""

    model: str
    session_id: str
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))
    reply: str | None = None
    reason: str = "error"
    error: str | None = None
    events: list[JSONValue] = field(default_factory=list)

    def take(self, event: StreamEvent) -> None:
        """Note what `event` says about the answer, the end, or the extension's events."""
        if event.type == "reply":
            self.reply = str(event.data.get("content") or "")
        elif event.type == "done":
            self.reason = str(event.data.get("reason", "error"))
        if event.type == "error":
            self.error = str(event.data.get("message", ""))
        if event.type not in _STANDARD:
            self.events.append({"type": event.type, "data": event.data})

    @property
    def failed(self) -> bool:
        """True when the agent ended in error without an answer: the client gets an error, not a reply."""
        return self.reason == "error" and not self.reply

    def error_body(self) -> JSONObject:
        """The protocol's error object (what an OpenAI SDK raises from), naming the agent's error."""
        message = self.error or "the agent ended with an error and no answer"
        return {"message": message, "type": "agent_error", "param": None, "code": self.reason}

    def body(self) -> JSONObject:
        """The `chat.completion` object, with the extension field."""
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.reply or ""},
                    "finish_reason": finish_reason(self.reason),
                    "logprobs": None,
                }
            ],
            EXTENSION: {"session": self.session_id, "reason": self.reason, "events": self.events},
        }

    def chunk(
        self, delta: JSONObject, finish: str | None = None, extension: JSONObject | None = None
    ) -> JSONObject:
        """One `chat.completion.chunk`; `extension` rides in the `agentkernel` field."""
        body: JSONObject = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if extension is not None:
            body[EXTENSION] = extension
        return body


@dataclass
class ChunkStream:
    """A turn's events as chunks: tokens as content deltas, everything else in the extension field.

    Text the model streams before a tool call and the answer after it are
    parted by a blank line, so the client does not see them run together.
    """

    completion: Completion
    _streamed_text: bool = False
    _tools_since_text: bool = False

    def opening(self) -> JSONObject:
        return self.completion.chunk(
            {"role": "assistant", "content": ""}, extension={"session": self.completion.session_id}
        )

    def chunks(self, event: StreamEvent) -> list[JSONObject]:
        """What `event` becomes on the wire (often one chunk; none for a streamed answer's `reply`)."""
        self.completion.take(event)
        if event.type == "token":
            return [self._text(str(event.data.get("text", "")))]
        if event.type == "reply":
            streamed = bool(event.data.get("streamed")) and self._streamed_text
            return [] if streamed else [self._text(str(event.data.get("content") or ""))]
        if event.type == "done":
            finish = finish_reason(self.completion.reason)
            return [self.completion.chunk({}, finish, {"type": "done", "data": event.data})]
        if event.type == "tool_call":
            self._tools_since_text = True
        return [self.completion.chunk({}, extension={"type": event.type, "data": event.data})]

    def _text(self, text: str) -> JSONObject:
        if self._streamed_text and self._tools_since_text and text:
            text = "\n\n" + text
        if text:
            self._streamed_text, self._tools_since_text = True, False
        return self.completion.chunk({"content": text})


__all__ = [
    "EXTENSION",
    "ChunkStream",
    "Completion",
    "CompletionRequest",
    "Refused",
    "conversation",
    "finish_reason",
]
