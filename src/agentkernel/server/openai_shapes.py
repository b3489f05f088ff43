"""The OpenAI chat-completions shapes, both ways: a request in, a turn's events and end out.

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

The client's own `tools` are offered to the LLM beside the template's
(`client_tools`): a call of one ends the turn with `finish_reason:
tool_calls`, and the client sends the conversation back with the `tool`
messages of its results, the last message then. `response_format`
(`json_object`, `json_schema`) is the answer's schema, checked as
`llm_json`'s is (`output_schema`). What a client sends that an agent cannot
honour is refused by name (`Refused`, HTTP 400): non-text content parts,
`n` > 1, a `tool_choice` other than auto or none, a tool call of a tool
that is not the client's. Sampling fields (`temperature`, `max_tokens`, …)
are accepted and not used: the template and kernel.yaml choose the model
and its settings. A failed turn's status says its cause (`Failure`).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, TypeAdapter, WithJsonSchema

from agentkernel.agent.loop import LoopResult, TurnOptions
from agentkernel.llm.base import ChatMessage, ToolCall, ToolSchema
from agentkernel.llm.structured import SchemaInvalid, check_output_schema
from agentkernel.schemas.bounds import SchemaBounds
from agentkernel.schemas.parameters import describe, parameters_problem
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

    model_config = ConfigDict(extra="allow")  # name, …: not used

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


# Each message is validated only once the route has counted them (server.max_completion_messages):
# validating a body of 8 MiB of empty messages, 240,000 of them, held the event loop for seconds.
_MESSAGES: Final = TypeAdapter(list[RequestMessage])
_MESSAGES_SCHEMA: Final[JSONObject] = {
    "type": "array",
    "minItems": 1,
    "items": RequestMessage.model_json_schema(),
    "description": "the conversation; the last is the user's, or the results of the client's tool calls",
}
# OpenAI's rule for a function's name
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NO_PARAMETERS: Final[JSONObject] = {"type": "object", "properties": {}}


class CompletionRequest(BaseModel):
    """The request body; unknown fields are accepted and not used (see the module docstring)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, description="the agent's template, e.g. hello-agent (GET /v1/models)")
    messages: Annotated[list[Any], WithJsonSchema(_MESSAGES_SCHEMA)] = Field(min_length=1)
    # strict: `true` is no `n` and 1 no `stream` (lax pydantic takes one for the other, against the schema)
    stream: StrictBool = Field(default=False, description="server-sent `chat.completion.chunk`s, then [DONE]")
    stream_options: dict[str, Any] | None = Field(
        default=None, description="`include_usage`: a last chunk with the turn's usage"
    )
    n: StrictInt | None = Field(default=None, description="only 1")
    tools: list[Any] | None = Field(
        default=None, description="the client's functions, offered beside the template's tools"
    )
    tool_choice: Any = Field(default=None, description="auto (the default) or none")
    response_format: Any = Field(
        default=None, description="text, json_object, or json_schema: the answer validates against it"
    )


class Refused(ValueError):
    """A request an agent cannot honour: `field` names where, the message says why (HTTP 400)."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")
        self.field = where


@dataclass(frozen=True)
class Bounds:
    """What a request may ask of the server: its tools' count, schemas' size, an answer's validation time.

    server.max_completion_tools, limits.max_schema_*, limits.timeout_secs.
    """

    max_tools: int = 128
    schema: SchemaBounds = field(default_factory=SchemaBounds)
    validate_secs: float = 30.0


@dataclass(frozen=True)
class ClientTurn:
    """A request read: the history, the new user message (None after tool results), and its options."""

    history: list[ChatMessage]
    text: str | None
    options: TurnOptions


def conversation(
    request: CompletionRequest, template_tools: Collection[str] = (), bounds: Bounds | None = None
) -> ClientTurn:
    """The history (every message but the last), the new message, the client's tools and answer schema.

    Refused naming the field for what an agent cannot honour (a client tool
    named as one of `template_tools`, or a `srv__*` grant of them, among
    others); pydantic's ValidationError, located within `messages`, for a
    message of the wrong shape.
    """
    bounds = bounds or Bounds()
    if request.n is not None and request.n != 1:
        raise Refused("body.n", f"{request.n}: only one choice is made (n = 1)")
    tools = client_tools(request.tools, template_tools, bounds)
    if request.tool_choice not in (None, "auto", "none"):
        raise Refused(
            "body.tool_choice", "only 'auto' and 'none' are supported (the agent chooses which tool to call)"
        )
    offered = () if request.tool_choice == "none" else tools
    schema = output_schema(request.response_format, bounds.schema)
    *earlier, last = _MESSAGES.validate_python(request.messages)
    names = {t.name for t in tools}
    history = _history(earlier, names)
    where = f"body.messages.{len(earlier)}"
    if last.role == "tool":
        history.append(_tool_result(where, last, history))
        return ClientTurn(history, None, TurnOptions(offered, schema, bounds.validate_secs))
    if last.role != "user":
        raise Refused(
            f"{where}.role", f"{last.role!r}: the last message must be the user's, or a tool's result"
        )
    return ClientTurn(history, _text(where, last), TurnOptions(offered, schema, bounds.validate_secs))


def client_tools(
    tools: list[Any] | None, template_tools: Collection[str], bounds: Bounds
) -> tuple[ToolSchema, ...]:
    """The client's `tools` as the LLM is offered them, each checked and bounded (Refused naming where)."""
    if not tools:
        return ()
    if len(tools) > bounds.max_tools:
        raise Refused(
            "body.tools", f"{len(tools):,} tools; at most {bounds.max_tools:,} (server.max_completion_tools)"
        )
    grants = tuple(name[:-1] for name in template_tools if name.endswith("__*"))
    schemas: list[ToolSchema] = []
    for index, tool in enumerate(tools):
        where = f"body.tools.{index}"
        schema = _tool(where, tool, bounds.schema)
        if schema.name in template_tools or schema.name.startswith(grants):
            raise Refused(
                f"{where}.function.name",
                f"{schema.name!r} is a tool of the template already; give the client's tool another name",
            )
        if any(s.name == schema.name for s in schemas):
            raise Refused(f"{where}.function.name", f"{schema.name!r} is named twice")
        schemas.append(schema)
    return tuple(schemas)


def _tool(where: str, tool: object, bounds: SchemaBounds) -> ToolSchema:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise Refused(f"{where}.type", "only tools of type 'function' are supported")
    function = tool.get("function")
    if not isinstance(function, dict):
        raise Refused(f"{where}.function", "must be an object {name, description?, parameters?}")
    name = function.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise Refused(f"{where}.function.name", "must be 1 to 64 letters, digits, underscores or dashes")
    description = function.get("description", "")
    if not isinstance(description, str):
        raise Refused(f"{where}.function.description", "must be a string")
    parameters = function.get("parameters", _NO_PARAMETERS)
    problem = parameters_problem(parameters, bounds)
    if problem is not None:  # `parameters.properties.q.type: …`
        at, _, why = describe(problem).partition(": ")
        raise Refused(f"{where}.function.{at}", why)
    return ToolSchema(name, description, dict(parameters))


def output_schema(response_format: object, bounds: SchemaBounds) -> dict[str, Any] | None:
    """The JSON Schema the answer must validate against: None for text; checked as llm_json's is."""
    where = "body.response_format"
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind != "json_schema":
        raise Refused(f"{where}.type", f"{kind!r}: expected text, json_object or json_schema")
    assert isinstance(response_format, dict)
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or "schema" not in spec:
        raise Refused(f"{where}.json_schema", "must be an object {name, schema, strict?}")
    try:
        return check_output_schema(spec["schema"], bounds)
    except SchemaInvalid as exc:
        raise Refused(f"{where}.json_schema.schema", str(exc)) from None


def _history(earlier: list[RequestMessage], client_tools: set[str]) -> list[ChatMessage]:
    history: list[ChatMessage] = []
    for index, message in enumerate(earlier):
        where = f"body.messages.{index}"
        if message.role == "tool":
            history.append(_tool_result(where, message, history))
        elif message.role == "assistant" and message.tool_calls:
            calls = tuple(
                _call(f"{where}.tool_calls.{j}", c, client_tools) for j, c in enumerate(message.tool_calls)
            )
            history.append(ChatMessage.assistant(_text(where, message) or None, calls))
        else:
            text = _text(where, message)
            if message.role in ("system", "developer"):
                history.append(ChatMessage.system(text))
            else:
                history.append(
                    ChatMessage.user(text) if message.role == "user" else ChatMessage.assistant(text)
                )
    return history


def _call(where: str, call: dict[str, Any], client_tools: set[str]) -> ToolCall:
    """A tool call the client sends back: only of its own tools (a template tool's would be its word)."""
    function = call.get("function")
    if not isinstance(function, dict):
        raise Refused(f"{where}.function", "must be an object {name, arguments}")
    name, arguments, call_id = function.get("name"), function.get("arguments", ""), call.get("id")
    if name not in client_tools:
        raise Refused(
            f"{where}.function.name",
            f"{name!r} is not one of this request's tools (body.tools): only calls of the client's own "
            "tools are sent back; the template's tools are called by the agent itself",
        )
    if not isinstance(call_id, str) or not isinstance(arguments, str):
        raise Refused(where, "a tool call needs a string `id` and `function.arguments`")
    return ToolCall(call_id, str(name), arguments)


def _tool_result(where: str, message: RequestMessage, history: list[ChatMessage]) -> ChatMessage:
    """A `tool` message: the result of a call of the last assistant message that made calls."""
    asked = next((m for m in reversed(history) if m.role == "assistant"), None)
    ids = {c.id: c.name for c in asked.tool_calls} if asked is not None else {}
    if message.tool_call_id not in ids:
        raise Refused(
            f"{where}.tool_call_id",
            f"{message.tool_call_id!r} is not a call of the assistant message before it",
        )
    return ChatMessage.tool(message.tool_call_id, _text(where, message), ids[message.tool_call_id])


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


# an `error` event's code (agent/loop.py ERROR_CODES) → the status OpenAI would answer, its error type,
# and whether the same request may succeed if sent again; no code: the server failed (turns.py)
_FAILURES: Final[dict[str | None, tuple[int, str, bool]]] = {
    "llm_refused": (400, "invalid_request_error", False),
    "client_tool_clash": (400, "invalid_request_error", False),
    "llm_rate_limited": (429, "rate_limit_error", True),
    "quota_exhausted": (429, "insufficient_quota", False),  # S26.3: not before the quota resets
    "llm_unavailable": (502, "server_error", True),
    "no_llm": (503, "server_error", False),
    "invalid_structured_output": (500, "server_error", True),
    None: (500, "server_error", True),
}


@dataclass(frozen=True)
class Failure:
    """A failed turn as an HTTP answer: its status, OpenAI's error object, and whether a retry is safe.

    A retry is safe when it may succeed and nothing the turn did would be
    done twice: no tool ran. Otherwise the answer says `x-should-retry:
    false`, which OpenAI's SDKs obey (they retry 408, 409, 429 and 5xx).
    """

    status: int
    error: JSONObject
    retry: bool


@dataclass
class Completion:
    """One completion's identity and what the turn said, gathered as its events come."""

    model: str
    session_id: str
    run_id: str = ""  # the turn's run (S25.1): GET /v1/runs/{id}
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))
    reply: str | None = None
    reason: str = "error"
    error: str | None = None
    error_code: str | None = None
    ran_tools: bool = False  # a template tool was called: a retry would call it again
    events: list[JSONValue] = field(default_factory=list)
    usage: JSONObject = field(default_factory=lambda: usage_of(None))
    client_calls: tuple[ToolCall, ...] = ()

    def take(self, event: StreamEvent) -> None:
        """Note what `event` says about the answer, the end, or the extension's events."""
        if event.type == "run":  # the extension says it once, beside the session
            return
        if event.type == "reply":
            self.reply = str(event.data.get("content") or "")
        elif event.type == "done":
            self.reason = str(event.data.get("reason", "error"))
        elif event.type == "tool_call":
            self.ran_tools = True
        if event.type == "error":
            self.error = str(event.data.get("message", ""))
            code = event.data.get("code")
            self.error_code = code if isinstance(code, str) else None
        if event.type not in _STANDARD:
            self.events.append({"type": event.type, "data": event.data})

    def end(self, result: LoopResult | None) -> None:
        """What the loop's result adds once the turn is over: the usage, the client's tool calls (None:
        no result, as for a retry answered from a run's records, which set the usage already)."""
        if result is not None:
            self.usage = usage_of(result)
        if result is not None and result.client_calls:
            self.client_calls = result.client_calls
            self.reply = result.answer

    @property
    def failed(self) -> bool:
        """True when the agent ended in error without an answer: the client gets an error, not a reply."""
        return self.reason == "error" and not self.reply and not self.client_calls

    @property
    def finish(self) -> str:
        return "tool_calls" if self.client_calls else finish_reason(self.reason)

    def failure(self) -> Failure:
        """The failed turn's status and error object: 400 for a request the LLM refused, not 'unavailable'."""
        status, kind, transient = _FAILURES.get(self.error_code, _FAILURES[None])
        message = self.error or "the agent ended with an error and no answer"
        code = self.error_code or "internal_error"
        error: JSONObject = {"message": message, "type": kind, "param": None, "code": code}
        return Failure(status, error, transient and not self.ran_tools)

    def message(self) -> JSONObject:
        """The assistant message: the answer, or the calls of the client's tools (content then null)."""
        if not self.client_calls:
            return {"role": "assistant", "content": self.reply or ""}
        return {
            "role": "assistant",
            "content": self.reply or None,
            "tool_calls": tool_calls(self.client_calls),
        }

    def body(self) -> JSONObject:
        """The `chat.completion` object, with the extension field."""
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "message": self.message(), "finish_reason": self.finish, "logprobs": None}
            ],
            "usage": self.usage,
            EXTENSION: {
                "session": self.session_id,
                "run": self.run_id,
                "reason": self.reason,
                "events": self.events,
            },
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

    def usage_chunk(self) -> JSONObject:
        """The last chunk when `stream_options.include_usage` is set: no choices, the turn's usage."""
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": self.usage,
        }


def usage_of(result: LoopResult | None) -> JSONObject:
    """The tokens the LLM reported for the turn's calls, summed (zeros for a turn that asked it nothing)."""
    prompt = result.usage.prompt_tokens if result is not None else 0
    completion = result.usage.completion_tokens if result is not None else 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def tool_calls(calls: tuple[ToolCall, ...]) -> list[JSONValue]:
    """The calls in the protocol's shape."""
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in calls
    ]


@dataclass
class ChunkStream:
    """A turn's events as chunks: tokens as content deltas, everything else in the extension field.

    Text the model streams before a tool call and the answer after it are
    parted by a blank line, so the client does not see them run together.
    The end (`done`) waits for `closing`: only the loop's result says whether
    the turn ended with calls of the client's tools, and what it cost.
    """

    completion: Completion
    include_usage: bool = False
    _streamed_text: bool = False
    _tools_since_text: bool = False
    _done: JSONObject | None = None

    def opening(self) -> JSONObject:
        return self.completion.chunk(
            {"role": "assistant", "content": ""},
            extension={"session": self.completion.session_id, "run": self.completion.run_id},
        )

    def chunks(self, event: StreamEvent) -> list[JSONObject]:
        """What `event` becomes on the wire (often one chunk; none for a streamed answer's `reply`)."""
        self.completion.take(event)
        if event.type == "run":
            return []
        if event.type == "token":
            return [self._text(str(event.data.get("text", "")))]
        if event.type == "reply":
            streamed = bool(event.data.get("streamed")) and self._streamed_text
            return [] if streamed else [self._text(str(event.data.get("content") or ""))]
        if event.type == "done":
            self._done = event.data
            return []
        if event.type == "tool_call":
            self._tools_since_text = True
        return [self.completion.chunk({}, extension={"type": event.type, "data": event.data})]

    def closing(self, result: LoopResult | None) -> list[JSONObject]:
        """The last chunks once the turn is over: the client's tool calls, the finish, the usage."""
        completion = self.completion
        completion.end(result)
        chunks: list[JSONObject] = []
        if completion.client_calls:
            calls: list[JSONValue] = [
                {"index": i, **c}
                for i, c in enumerate(tool_calls(completion.client_calls))
                if isinstance(c, dict)
            ]
            chunks.append(completion.chunk({"tool_calls": calls}))
        if self._done is not None:
            chunks.append(completion.chunk({}, completion.finish, {"type": "done", "data": self._done}))
        if self.include_usage:
            chunks.append(completion.usage_chunk())
        return chunks

    def _text(self, text: str) -> JSONObject:
        if self._streamed_text and self._tools_since_text and text:
            text = "\n\n" + text
        if text:
            self._streamed_text, self._tools_since_text = True, False
        return self.completion.chunk({"content": text})


__all__ = [
    "EXTENSION",
    "Bounds",
    "ChunkStream",
    "ClientTurn",
    "Completion",
    "CompletionRequest",
    "Failure",
    "Refused",
    "conversation",
    "finish_reason",
]
