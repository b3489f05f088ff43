"""The kernel's spans under OpenTelemetry's GenAI conventions (S26.1): names and attributes in one place.

A run is `invoke_agent {template}`; each LLM call inside it `chat {model}`
(a client span); each tool call `execute_tool {tool}`; each hook function
call `hook {hook}.{event}`. Attributes follow the conventions
(`gen_ai.operation.name`, `gen_ai.agent.name`, `gen_ai.conversation.id`,
`gen_ai.request.model`, `gen_ai.usage.input_tokens`, `gen_ai.tool.name`,
`gen_ai.tool.call.id`…); what they have no name for is `agentkernel.*`.
A user id is `user.hash` (the first 16 hex digits of its SHA-256) unless
`telemetry.record_user_ids` makes it `user.id`; message contents, tool
arguments and results are set only with `telemetry.capture_content`, each
cut at CONTENT_CHARS.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentkernel.telemetry.spans import NO_SPAN, SpanBlock, Value, span
from agentkernel.telemetry.tracing import active

if TYPE_CHECKING:
    from opentelemetry.context import Context

CONTENT_CHARS = 16_384  # a captured content attribute's most characters (a span stays a bounded size)
PROVIDER = "openai"  # gen_ai.provider.name: the kernel speaks OpenAI's chat completions to every server


def user_attributes(user_id: str | None) -> dict[str, Value]:
    """`user.hash` (or `user.id` with `record_user_ids`) for a span; nothing when traces are off."""
    tracing = active()
    if tracing is None or user_id is None:
        return {}
    if tracing.record_user_ids:
        return {"user.id": user_id}
    import hashlib  # OpenSSL's library: only once traces are on

    return {"user.hash": hashlib.sha256(user_id.encode()).hexdigest()[:16]}


def capturing() -> bool:
    """Whether contents go on spans (`telemetry.capture_content`, traces on)."""
    tracing = active()
    return tracing is not None and tracing.capture_content


def content(value: Any) -> str | None:
    """`value` as a captured content attribute (JSON, cut), or None when contents are not captured."""
    if not capturing():
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= CONTENT_CHARS else text[:CONTENT_CHARS] + "…"


def invoke_agent(
    template: str | None,
    *,
    session_id: str | None,
    user_id: str | None,
    run_id: str | None,
    parent: Context | None = None,
    resumed: bool = False,
) -> SpanBlock:
    """The span of one run of an agent (a turn, a cron run, a sub-agent's run)."""
    if active() is None:
        return NO_SPAN
    attributes: dict[str, Value] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": template,
        "gen_ai.conversation.id": session_id,
        "agentkernel.run.id": run_id,
        "agentkernel.run.resumed": resumed or None,
        **user_attributes(user_id),
    }
    return span(f"invoke_agent {template or ''}".rstrip(), attributes, parent=parent)


def chat(model: str | None, max_tokens: int | None, temperature: float | None) -> SpanBlock:
    """The span of one LLM call (a client span: the LLM server is another service)."""
    if active() is None:
        return NO_SPAN
    attributes: dict[str, Value] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": max_tokens,
        "gen_ai.request.temperature": temperature,
    }
    return span(f"chat {model or ''}".rstrip(), attributes, client=True)


def execute_tool(tool: str, call_id: str, origin: str, args: Any = None) -> SpanBlock:
    """The span of one tool call, from its hooks through its approval to its result (`args` kept only
    with `capture_content`)."""
    if active() is None:
        return NO_SPAN
    attributes: dict[str, Value] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id or None,
        "gen_ai.tool.type": "function",
        "agentkernel.tool.origin": origin,
        "gen_ai.tool.call.arguments": content(args),
    }
    return span(f"execute_tool {tool}", attributes)


def hook(name: str, event: str) -> SpanBlock:
    """The span of one hook function call."""
    if active() is None:
        return NO_SPAN
    attributes: dict[str, Value] = {"agentkernel.hook.name": name, "agentkernel.hook.event": event}
    return span(f"hook {name}.{event}", attributes)


__all__ = [
    "CONTENT_CHARS",
    "PROVIDER",
    "capturing",
    "chat",
    "content",
    "execute_tool",
    "hook",
    "invoke_agent",
    "user_attributes",
]
