"""`llm` and `llm_json` (S9): a script asks the kernel's LLM, as the calling process.

The request goes through the kernel's provider (the named service `llm`),
so the kernel-wide concurrency limit applies (llm/limited.py), on the
kernel's event loop (services/llm.py): the script's worker thread blocks,
nothing else does (S21.3), and the wait ends with the script's time (its
`CallBudget`).

Tokens: a caller that is a process (an agent's tool call) spends its budget
group (S9.2). Before asking, the helper holds an upper bound of what the
call can cost — the prompt's UTF-8 bytes (no tokenizer makes more tokens
than bytes) plus a margin per message, plus `max_tokens` — so scripts in
parallel never spend past the limit; `max_tokens` shrinks to what is left
when that is less, and `caller budget exhausted` is thrown when not even a
one-token answer fits. The answer's reported usage is then charged to the
process and its group. A bare caller (`agentkernel tool run`) has no budget;
the server's tool runs are processes too (server/tool_runs.py).

`llm_json` validates with llm/structured.py, which `run_subagent`'s
`output_schema` shares.

In a trace (S26.1) a call is a span named after the helper, the parent of
the provider's `chat` span — of each of them, when `llm_json` asks again
for a valid answer — and the time it spent waiting for its turn; the
prompt stays out of it (the `chat` span has the contents, when captured).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentkernel.errors import HelperError
from agentkernel.helpers.table import HelperTable, ScriptCall, Traced
from agentkernel.llm.base import ChatMessage, Completion, CompletionRequest, ProviderError
from agentkernel.llm.structured import (
    SchemaInvalid,
    StructuredOutputInvalid,
    ValidationStopped,
    check_output_schema,
    schema_instruction,
    structured_answer,
)
from agentkernel.llm.token_bound import held_for, prompt_bound
from agentkernel.ports import LLM, Inference
from agentkernel.types import JSONValue
from agentkernel.util.short_text import shown_value

DEFAULT_MAX_TOKENS = 1024
MAX_TOKENS_CAP = 4096
MAX_TEMPERATURE = 2.0

_OPTIONS = ("user", "system", "max_tokens", "temperature", "provider")
_JSON_OPTIONS = (*_OPTIONS, "output_schema")
_STRUCTURED_REFUSED = (400, 422)
"""HTTP statuses of a server refusing `response_format`: llm_json asks again without it."""


@dataclass(frozen=True)
class Question:
    """One `llm`/`llm_json` call's arguments, checked."""

    user: str
    system: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = None
    provider: str | None = None  # a provider of kernel.yaml's `llm:` the caller's template allows (S26.4)

    def messages(self, extra_system: str | None = None) -> list[ChatMessage]:
        system = "\n\n".join(part for part in (self.system, extra_system) if part)
        return [*([ChatMessage.system(system)] if system else []), ChatMessage.user(self.user)]


# -- the helpers --------------------------------------------------------------------------------------


def llm(call: ScriptCall, first: JSONValue, second: JSONValue = None) -> JSONValue:
    """`llm(user)`, `llm(system, user)`, `llm({user, system?, max_tokens?, temperature?})`: the text."""
    if second is not None:
        question = Question(_text("llm", "user", second), system=_text("llm", "system", first))
    elif isinstance(first, dict):
        question = _question("llm", first, _OPTIONS)
    else:
        question = Question(_text("llm", "user", first))
    completion = ask_once(call, "llm", question.messages(), question)
    return completion.text or ""


def llm_json(call: ScriptCall, options: JSONValue) -> JSONValue:
    """`llm_json({user, output_schema, system?, max_tokens?, temperature?})`: the answer, parsed and valid."""
    if not isinstance(options, dict):
        raise HelperError(
            f"llm_json: expected an object {{user, output_schema, …}}, got {shown_value(options)}"
        )
    question = _question("llm_json", options, _JSON_OPTIONS)
    if options.get("output_schema") is None:
        raise HelperError("llm_json: output_schema is required (a JSON Schema object)")
    try:
        schema = check_output_schema(options["output_schema"], call.schema_bounds)
    except SchemaInvalid as exc:
        raise HelperError(f"llm_json: output_schema {exc}") from None
    structured = _StructuredMode(schema)

    def ask(conversation: Sequence[ChatMessage]) -> str | None:
        return structured.ask(call, conversation, question)

    left = call.remaining_secs()
    deadline = None if left is None else time.monotonic() + left
    try:
        return structured_answer(
            ask, question.messages(schema_instruction(schema)), schema, deadline=deadline
        )
    except StructuredOutputInvalid as exc:
        raise HelperError(f"llm: {exc}") from None
    except ValidationStopped as exc:
        raise HelperError(f"llm_json: output_schema: {exc}") from None


# -- one inference ------------------------------------------------------------------------------------


def ask_once(
    call: ScriptCall,
    helper: str,
    messages: Sequence[ChatMessage],
    question: Question,
    json_schema: dict[str, Any] | None = None,
) -> Completion:
    """One completion for the caller: its budget held and charged, its time bounding the wait."""
    provider = _provider(call, helper)
    process = call.caller.process
    if process is not None and process.terminated:
        raise HelperError(f"{helper}: the calling process has ended")
    bound = prompt_bound(messages, json_schema)
    budget = process.budget if process is not None else None
    with held_for(budget, bound, question.max_tokens, call.remaining_secs()) as max_tokens:
        request = CompletionRequest(
            tuple(messages),
            json_schema=json_schema,
            max_tokens=max_tokens,
            temperature=question.temperature,
            user=call.caller.user_id,  # the LLM's slots are shared fairly between users
            template=call.caller.template,
            provider=_provider_for(call, helper, question),
        )
        completion = _complete(call, helper, provider, request)
        if process is not None:
            process.charge(completion.usage.total_tokens)
    return completion


def _provider(call: ScriptCall, helper: str) -> Inference:
    return call.caller.services.require(LLM, helper)


def _complete(call: ScriptCall, helper: str, provider: Inference, request: CompletionRequest) -> Completion:
    """The provider's answer, waited for no longer than the script may run."""
    try:
        return provider.complete(request, call.remaining_secs())
    except TimeoutError:
        limit = call.budget.timeout_secs if call.budget is not None else None
        shown = f" ({limit:g} s)" if limit is not None else ""
        raise HelperError(f"{helper}: no answer before the script's time limit{shown} ran out") from None
    except ProviderError as exc:
        raise LLMFailed(f"{helper}: {exc.message}", exc.status) from None


class LLMFailed(HelperError):
    """The provider failed (after its own retries); `status` is the server's HTTP status, if any."""

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status


class _StructuredMode:
    """Asks with `response_format` (the server constrains the answer) until the server refuses it.

    A server that does not support structured output answers 400 or 422 to
    `response_format`; the attempt is then made again without it, and the
    schema stays in the instructions only, for the rest of the call.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema: dict[str, Any] | None = schema

    def ask(self, call: ScriptCall, conversation: Sequence[ChatMessage], question: Question) -> str | None:
        if self.schema is not None:
            try:
                return ask_once(call, "llm_json", conversation, question, self.schema).text
            except LLMFailed as exc:
                if exc.status not in _STRUCTURED_REFUSED:
                    raise
                self.schema = None
        return ask_once(call, "llm_json", conversation, question).text


# -- arguments ----------------------------------------------------------------------------------------


def _question(helper: str, options: dict[str, JSONValue], known: tuple[str, ...]) -> Question:
    unknown = sorted(set(options) - set(known))
    if unknown:
        hint = " (llm_json takes output_schema)" if "output_schema" in unknown else ""
        raise HelperError(
            f"{helper}: unknown option {shown_value(unknown[0])}{hint}; expected: {', '.join(known)}"
        )
    system = options.get("system")
    return Question(
        user=_text(helper, "user", options.get("user")),
        system=None if system is None else _text(helper, "system", system),
        max_tokens=_max_tokens(helper, options.get("max_tokens")),
        temperature=_temperature(helper, options.get("temperature")),
        provider=None if options.get("provider") is None else _text(helper, "provider", options["provider"]),
    )


def _provider_for(call: ScriptCall, helper: str, question: Question) -> str | None:
    """The provider to ask first: the one the script names, if its template allows it (S26.4), else the
    template's own."""
    caller = call.caller
    named = question.provider
    if named is None or named == caller.llm_provider:
        return caller.llm_provider
    if named not in caller.llm_providers:
        allowed = ", ".join(sorted(caller.llm_providers)) or "none"
        whose = f"template {caller.template!r}" if caller.template else "a caller with no template"
        raise HelperError(
            f"{helper}: provider {named!r} is not allowed for {whose} (its model.providers: {allowed})"
        )
    return named


def _text(helper: str, name: str, value: JSONValue) -> str:
    if not isinstance(value, str):
        raise HelperError(f"{helper}: {name} must be a string, got {shown_value(value)}")
    if name == "user" and not value.strip():
        raise HelperError(f"{helper}: user must not be empty")
    return value


def _max_tokens(helper: str, value: JSONValue) -> int:
    """1024 when absent; a larger value than 4096 is capped, not refused (S9.1)."""
    if value is None:
        return DEFAULT_MAX_TOKENS
    whole = _whole(value)
    if whole is None or whole < 1:
        raise HelperError(f"{helper}: max_tokens must be a whole number from 1 up, got {shown_value(value)}")
    return min(whole, MAX_TOKENS_CAP)


def _whole(value: JSONValue) -> int | None:
    """An integer, or a float that is one (JS has only numbers); None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _temperature(helper: str, value: JSONValue) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= MAX_TEMPERATURE:
        return float(value)
    raise HelperError(
        f"{helper}: temperature must be a number from 0 to {MAX_TEMPERATURE:g}, got {shown_value(value)}"
    )


HELPERS: dict[str, Callable[..., JSONValue]] = {"llm": llm, "llm_json": llm_json}


def register(table: HelperTable) -> None:
    """Add `llm` and `llm_json` (S9) to `table`."""
    for name, function in HELPERS.items():
        table.register(name, function, traced=Traced())  # the parent of its `chat` spans (S26.1)


__all__ = [
    "DEFAULT_MAX_TOKENS",
    "HELPERS",
    "MAX_TOKENS_CAP",
    "LLMFailed",
    "Question",
    "ask_once",
    "register",
]
