"""The agent loop (S23.3): user message → hooks → LLM ↔ tools → answer → hooks.

One `run` handles one user message of a process and ends with a reason
(S7.3): `job_done`, `terminated` (the process was terminated, or the user
stopped the turn), `blocked` (a hook suppressed the message),
`budget_exhausted`, `max_turns` or `error`. Everything the user should see
is emitted as `LoopEvent`s as it happens (notices, tokens, tool calls and
results, visual blocks, warnings, the answer, errors); everything that
happened is recorded in the message store (S23.5), the end reason of each
run included. Scripts and helpers are synchronous, so tools and hooks run on
worker threads of the kernel's script pool, shared fairly between users
(fair_pool.py, DESIGN rule 10).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from agentkernel.agent.approval_gate import ApprovalGate
from agentkernel.agent.hooks import BeforeOutcome, HookPipeline, HookRecord, TurnFacts
from agentkernel.agent.llm_hooks import LlmCallHooks
from agentkernel.agent.processes import Process
from agentkernel.agent.resume import Prompt, Resumed, left_here, resumed
from agentkernel.agent.steps import Emit, LoopEvent, Step, StepWriter, Transcript, usage_meta
from agentkernel.agent.tool_steps import MAX_RECORDED_VISUAL_BYTES, NOT_RUN, ToolSteps
from agentkernel.budget import BudgetExhausted
from agentkernel.bundle import Services
from agentkernel.config import HookSpec
from agentkernel.config.templates import TemplateSpec
from agentkernel.errors import QuotaExhausted
from agentkernel.identity import Caller
from agentkernel.llm.base import (
    ChatMessage,
    Completion,
    CompletionRequest,
    Provider,
    ProviderError,
    StreamDone,
    TextDelta,
    ToolCall,
    ToolSchema,
    Usage,
)
from agentkernel.llm.structured import (
    ATTEMPTS,
    AnswerInvalid,
    StructuredOutputInvalid,
    correction_request,
    parse_valid,
    schema_instruction,
)
from agentkernel.llm.token_bound import held_for_async
from agentkernel.ports import Entry, Record
from agentkernel.schemas.bounds import ValidationStopped
from agentkernel.telemetry import genai, metrics
from agentkernel.telemetry.context import current_traceparent, remote
from agentkernel.telemetry.spans import SpanBlock, Traced
from agentkernel.tools.dispatch import Dispatcher
from agentkernel.types import JSONObject
from agentkernel.util.fair_pool import FairPool

if TYPE_CHECKING:
    from opentelemetry.context import Context

log = logging.getLogger("agentkernel.loop")
T = TypeVar("T")


class EndReason(StrEnum):
    JOB_DONE = "job_done"
    TERMINATED = "terminated"
    BLOCKED = "blocked"
    BUDGET_EXHAUSTED = "budget_exhausted"
    MAX_TURNS = "max_turns"
    ERROR = "error"


@dataclass
class LoopSettings:
    """A template's part of a run: instructions, model settings, limits and hooks."""

    instructions: str
    hooks: Sequence[HookSpec] = ()
    # hooks its tool calls and LLM calls pass besides its own (S24.5): a sub-agent's caller's, so a
    # script cannot get past its template's guard by asking a sub-agent
    call_hooks: Sequence[HookSpec] = ()
    max_turns: int = 8
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    provider: str | None = None  # the provider of `llm:` asked first (S26.4); None: the first listed

    @classmethod
    def for_template(cls, template: TemplateSpec, available: Mapping[str, HookSpec]) -> LoopSettings:
        """The template's settings, its hooks resolved by name among `available` (unknown ones logged,
        skipped)."""
        hooks = []
        for name in template.hooks:
            spec = available.get(name)
            if spec is None:
                log.error("template %s: hook %r is not loaded; running without it", template.name, name)
            else:
                hooks.append(spec)
        return cls(
            instructions=template.instructions,
            hooks=tuple(hooks),
            max_turns=template.max_turns,
            model=template.model.name,
            max_tokens=template.model.max_tokens,
            temperature=template.model.temperature,
            provider=template.model.provider,
        )


@dataclass(frozen=True)
class Vetted:
    """A client's earlier messages after the hooks: as they let them through, up to where they stopped.

    `blocked` is the outcome of the message whose `reply` or `suppress`
    blocks the turn; `stopped`, that the run was stopped (its client left)
    before every message was vetted.
    """

    history: list[ChatMessage]
    blocked: BeforeOutcome | None = None
    stopped: bool = False


@dataclass(frozen=True)
class TurnOptions:
    """What a client asks of one turn beyond its message (`POST /v1/chat/completions`).

    `tools` are the client's own tools, offered to the LLM beside the
    template's: a call of one is not run here, it ends the turn
    (`LoopResult.client_calls`) for the client to run and send back.
    `output_schema`, a checked JSON Schema (llm/structured.py), is what the
    answer must validate against: asked for and checked as `llm_json` does,
    up to ATTEMPTS answers, the problem of one fed into the next. Each
    validation ends within `validate_secs` (the kernel's
    `limits.timeout_secs`, as a script's call would), or the process's
    deadline if sooner: a schema within the size bounds can still take
    exponential time on a nested answer.
    """

    tools: tuple[ToolSchema, ...] = ()
    output_schema: dict[str, Any] | None = None
    validate_secs: float = 30.0
    # how long a call waits for a person's decision before it is denied (None: until the approval's
    # timeout); a non-streamed request holds its client that long (approvals.completion_wait_secs)
    approval_wait_secs: float | None = None


@dataclass(frozen=True)
class RunState:
    """A run left unfinished, as its records have it: the user's message, the hooks' prompt (None when
    they never finished), its records (oldest first) and the tool call it had started last."""

    text: str | None
    prompt: Prompt | None
    records: Sequence[Record]
    started_call: str | None
    traceparent: str | None = None  # the run's span as it began: a resumed run joins its trace


@dataclass(frozen=True)
class _Invalid:
    """An answer that did not validate: why, and whether asking again may mend it (not past the time)."""

    problem: str
    again: bool = True


@dataclass
class LoopResult:
    answer: str | None
    reason: EndReason
    history: list[ChatMessage] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)  # the tokens of the turn's LLM calls, summed
    client_calls: tuple[ToolCall, ...] = ()  # calls of the client's tools that ended the turn


@dataclass
class _Tally:
    """What one run's LLM calls cost, and the client's tool calls that ended it."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    client_calls: tuple[ToolCall, ...] = ()
    # the answer's step when nothing runs between it and the run's end (no after_turn or after_loop
    # hook takes part): written with the end, one transaction (`_finish`)
    answer: Step | None = None

    def add(self, usage: Usage) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens

    @property
    def usage(self) -> Usage:
        return Usage(self.prompt_tokens, self.completion_tokens)


class AgentLoop:
    """Runs turns for processes; see the module docstring."""

    def __init__(
        self,
        provider: Provider | None,
        dispatcher: Dispatcher,
        hooks: HookPipeline,
        services: Services,
        transcript: Transcript | None = None,
        *,
        stream: bool = True,
        pool: FairPool | None = None,
        gate: ApprovalGate | None = None,
        default_model: str | None = None,
    ) -> None:
        self.provider = provider
        self.default_model = default_model  # kernel.yaml's `llm.model`: the model a template leaves unnamed
        self.dispatcher = dispatcher
        self.hooks = hooks
        self.services = services
        self.transcript = transcript
        self.steps = StepWriter(transcript)  # each step in one transaction, before its events (steps.py)
        self.stream = stream
        # where tools and hooks run, shared fairly between users: the dispatcher's pool unless
        # given one. A sub-agent's loop has a pool of its own, so a script waiting for it never
        # holds a worker the sub-agent needs.
        self.pool = pool or dispatcher.pool
        self.tool_steps = ToolSteps(dispatcher, self.pool, self.steps, gate)
        self.llm_hooks = LlmCallHooks(hooks, self.steps, self.pool)

    async def _in_thread(self, caller: Caller, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` on a worker of this loop's pool, in `caller`'s user's queue (DESIGN rule 10)."""
        return await self.pool.run(caller.user_id, functools.partial(function, *args))

    # -- recording -------------------------------------------------------------------------------

    def _record(
        self, caller: Caller, role: str, kind: str, content: str, meta: JSONObject | None = None
    ) -> None:
        """One record that is a step by itself, shown to nobody."""
        self.steps.write(caller.session_id, caller.user_id, Step().add(Entry(role, kind, content, meta)))

    async def _commit(
        self, caller: Caller, step: Step, emit: Emit, run_update: Mapping[str, Any] | None = None
    ) -> None:
        """Write the step in one transaction, then show its events (steps.py)."""
        await self.steps.commit(caller.session_id, caller.user_id, step, emit, run_update)

    def _record_hooks(self, caller: Caller, records: Sequence[HookRecord]) -> None:
        self.steps.write(caller.session_id, caller.user_id, _hook_step(Step(), records))

    # -- the run ---------------------------------------------------------------------------------

    async def run(
        self,
        process: Process,
        settings: LoopSettings,
        history: list[ChatMessage],
        text: str | None,
        emit: Emit,
        stop: asyncio.Event | None = None,
        *,
        unvetted: int = 0,
        options: TurnOptions | None = None,
    ) -> LoopResult:
        """Handle one user message; `history` is the conversation so far (not changed).

        Setting `stop` ends the run with `terminated` at once: an answer being
        streamed is cut where it is (the text shown so far is kept and
        recorded), a running tool call is waited for, and no further LLM call
        or tool call is made. The first `unvetted` messages of `history`
        came from a client, not from earlier runs: they pass the hooks first
        (`_vetted`). `text` None goes on from `history` as it is: it ends
        with the results of the client's tool calls (`options.tools`), so
        there is no new user message. The result says what the turn's LLM
        calls cost, summed (`usage`).
        """
        tally, started = _Tally(), time.perf_counter()
        with self._run_span(process) as traced:
            result = await self._turn(
                process,
                settings,
                history,
                text,
                emit,
                stop or asyncio.Event(),
                unvetted,
                options or TurnOptions(),
                tally,
            )
            result.usage, result.client_calls = tally.usage, tally.client_calls
            _ended_span(traced, result)
        metrics.turn_ended(process.template_name, result.reason, time.perf_counter() - started)
        return result

    async def resume(
        self,
        process: Process,
        settings: LoopSettings,
        history: list[ChatMessage],
        run: RunState,
        emit: Emit,
        stop: asyncio.Event | None = None,
    ) -> LoopResult:
        """Go on with a run its process left unfinished (S25.3, resume.py); `history` is the conversation
        before it. Nothing recorded is done again; the events shown are the ones it had not shown yet."""
        started = time.perf_counter()
        metrics.run_resumed()
        with self._run_span(process, remote(run.traceparent)) as traced:
            result = await self._resumed(process, settings, history, run, emit, stop)
            _ended_span(traced, result)
        metrics.turn_ended(process.template_name, result.reason, time.perf_counter() - started)
        return result

    async def _resumed(
        self,
        process: Process,
        settings: LoopSettings,
        history: list[ChatMessage],
        run: RunState,
        emit: Emit,
        stop: asyncio.Event | None,
    ) -> LoopResult:
        tally = _Tally()
        if self.dispatcher.home is not None:
            self.dispatcher.home.adopt(asyncio.get_running_loop())
        caller = replace(process.caller(self.services), hooks=_call_hooks(settings))
        prompt = run.prompt
        if prompt is None:  # the hooks had not finished (or had nothing to say): they are asked again
            message: JSONObject = {"role": "user", "content": run.text or ""}
            user = next((r.id for r in run.records if r.kind == "user"), None)
            if user is None:
                entry = Entry("user", "user", run.text or "")
                written = self.steps.write(caller.session_id, caller.user_id, Step().add(entry))
                user = None if written is None else written[0]
            prompt = await self._prompt(settings, caller, user, message, emit)
        progress = resumed(prompt, run.records, run.started_call)
        shape = TurnFacts(
            "",
            subagent=process.depth > 0,
            history_messages=len(history),
            injected_messages=len(prompt.inject),
        )
        stop = stop or asyncio.Event()
        result = await self._answer(
            process, settings, caller, history, prompt, emit, stop, TurnOptions(), tally, shape, progress
        )
        result.usage = tally.usage
        return result

    def _run_span(self, process: Process, parent: Context | None = None) -> SpanBlock:
        """The run's `invoke_agent` span: under `parent` (a resumed run's stored trace), else the current
        span (a request's traceparent, or the tool call that started a sub-agent)."""
        return genai.invoke_agent(
            process.template_name,
            session_id=process.session_id,
            user_id=process.user_id,
            run_id=self.steps.run_id(),
            parent=parent,
            resumed=parent is not None,
        )

    async def _turn(
        self,
        process: Process,
        settings: LoopSettings,
        history: list[ChatMessage],
        text: str | None,
        emit: Emit,
        stop: asyncio.Event,
        unvetted: int,
        options: TurnOptions,
        tally: _Tally,
    ) -> LoopResult:
        if self.dispatcher.home is not None:  # a hook's or tool's sub-agent runs on this loop too
            self.dispatcher.home.adopt(asyncio.get_running_loop())
        caller = replace(process.caller(self.services), hooks=_call_hooks(settings))
        if options.output_schema is not None:
            settings = replace(
                settings,
                instructions=f"{settings.instructions}\n\n{schema_instruction(options.output_schema)}",
            )
        user = None if text is None else Entry("user", "user", text)
        if text is None:  # the client's tool results: what after_turn is told the turn answered
            last = history[-1] if history else ChatMessage.user("")
            message: JSONObject = {"role": last.role, "content": last.content or ""}
        else:
            message = {"role": "user", "content": text}
        base = TurnFacts("", subagent=process.depth > 0)
        if unvetted:
            vetted = await self._vetted(process, settings, caller, history, unvetted, stop)
            history = vetted.history
            if vetted.blocked is not None or vetted.stopped:
                shape = replace(base, history_messages=len(history))
                return await self._refused(
                    process, settings, caller, message, vetted, history, emit, shape, user
                )
        trace = _trace_column(current_traceparent())  # kept with the run: a resumed run joins its trace
        if text is None:
            if trace is not None:
                self.steps.write(caller.session_id, caller.user_id, Step(), trace)
            shape = replace(base, history_messages=len(history))
            messages = [ChatMessage.system(settings.instructions), *history]
            converse = self._converse(process, settings, caller, messages, emit, stop, options, tally)
            answer, reason, messages = await converse
            shape = replace(shape, tool_calls=sum(len(m.tool_calls) for m in messages[1 + len(history) :]))
            return await self._finish(
                process, settings, caller, message, answer, reason, messages[1:], emit, shape, tally.answer
            )
        assert user is not None
        # recorded before the hooks see it (a hook reading the transcript finds it)
        recorded = self.steps.write(caller.session_id, caller.user_id, Step().add(user), trace)
        prompt = await self._prompt(
            settings, caller, None if recorded is None else recorded[0], message, emit
        )
        shape = replace(base, history_messages=len(history), injected_messages=len(prompt.inject))
        return await self._answer(
            process, settings, caller, history, prompt, emit, stop, options, tally, shape
        )

    async def _prompt(
        self, settings: LoopSettings, caller: Caller, user: int | None, message: JSONObject, emit: Emit
    ) -> Prompt:
        """`before_user_message` on the user's message (record `user`); its verdicts recorded in one step.

        The run's `prompt` (what the LLM is asked, or the hook's reply) is
        recorded with them: a run resumed after a crash goes on from it
        without asking the hooks again (resume.py). A message a hook replaced
        is noted on its record (`meta.asked`): the conversation read back
        from the transcript has what the LLM saw.
        """
        before = BeforeOutcome(message=dict(message))
        if self.hooks.takes_part(settings.hooks, "before_user_message", caller):
            before = await self._in_thread(
                caller, self.hooks.before_user_message, settings.hooks, caller, message
            )
        prompt = Prompt(before.message, tuple(before.inject), before.reply, before.suppressed)
        asked = before.message.get("content")
        step = _hook_step(Step(), before.records)
        if user is not None and asked != message["content"]:
            step.amend(user, {"asked": asked})
        for notice in before.notices:
            step.add(Entry("system", "notice", notice), LoopEvent("notice", {"text": notice}))
        if prompt.reply is not None:
            answer = LoopEvent("answer", {"content": prompt.reply, "streamed": False})
            step.add(Entry("assistant", "agent", prompt.reply, {"from": "hook"}), answer)
        plain = prompt == Prompt(message)  # no hook had a say: a resumed run makes the same prompt again
        await self._commit(caller, step, emit, None if plain and not step else {"prompt": prompt.to_json()})
        return prompt

    async def _answer(
        self,
        process: Process,
        settings: LoopSettings,
        caller: Caller,
        history: list[ChatMessage],
        prompt: Prompt,
        emit: Emit,
        stop: asyncio.Event,
        options: TurnOptions,
        tally: _Tally,
        shape: TurnFacts,
        resumed: Resumed | None = None,
    ) -> LoopResult:
        """The turn after its prompt: the hook's reply, or the LLM and tools (`resumed`: from where a run
        its process left stood), then the end."""
        question = prompt.message
        if prompt.suppressed:
            return await self._finish(
                process, settings, caller, question, None, EndReason.BLOCKED, history, emit, shape
            )
        if prompt.reply is not None:
            new_history = [
                *history,
                ChatMessage(str(question["role"]), str(question["content"])),
                ChatMessage.assistant(prompt.reply),
            ]
            shape = replace(shape, replied_by_hook=True)
            return await self._finish(
                process,
                settings,
                caller,
                question,
                prompt.reply,
                EndReason.JOB_DONE,
                new_history,
                emit,
                shape,
            )
        messages = [
            ChatMessage.system(settings.instructions),
            *history,
            *(ChatMessage(str(m["role"]), str(m["content"])) for m in prompt.inject),
            ChatMessage(str(question["role"]), str(question["content"])),  # replace_message keeps its role
        ]
        if resumed is not None:
            messages.extend(resumed.steps)
        converse = self._converse(process, settings, caller, messages, emit, stop, options, tally, resumed)
        answer, reason, messages = await converse
        # injected messages serve this turn only; the conversation keeps the rest
        start = 1 + len(history)
        kept = messages[1:start] + messages[start + len(prompt.inject) :]
        calls = sum(len(m.tool_calls) for m in messages[start + len(prompt.inject) :])
        shape = replace(shape, tool_calls=calls)
        return await self._finish(
            process, settings, caller, question, answer, reason, kept, emit, shape, tally.answer
        )

    async def _vetted(
        self,
        process: Process,
        settings: LoopSettings,
        caller: Caller,
        history: list[ChatMessage],
        unvetted: int,
        stop: asyncio.Event,
    ) -> Vetted:
        """The client's messages as `before_user_message` leaves them, or the one that blocks the turn.

        A stateless client (`POST /v1/chat/completions`) sends the whole
        conversation each time, so its earlier messages never passed the
        hooks as a session's do, and it wrote the assistant's messages
        itself: a hook that polices what is said would be bypassed by saying
        it one message earlier, or in the assistant's mouth. Each message it
        sent, whatever its role, passes the hooks here with `msg.role` its
        own and `ctx.earlier` true. What each verdict means for it
        (docs/server.md 8): `replace_message` replaces its text (its role
        stays); `reply` or `suppress` blocks the turn before the LLM is
        asked; injected messages and the notices of a message that does not
        block are dropped (the turn that answered it is past). Hook failures
        are recorded as in a run, other hook calls only for the message that
        blocks, so a long conversation does not fill the transcript again
        with every request. A stop (the client left) ends the vetting at the
        next message.
        """
        vetted = list(history)
        if not settings.hooks:
            return Vetted(vetted)
        for index, said in enumerate(history[:unvetted]):
            if process.terminated or left_here(stop):
                return Vetted(vetted[:index], stopped=True)
            asked: JSONObject = {"role": said.role, "content": said.content or ""}
            outcome = await self._in_thread(
                caller,
                functools.partial(self.hooks.before_user_message, earlier=True),
                settings.hooks,
                caller,
                asked,
            )
            outcome.records = [replace(r, earlier=index) for r in outcome.records]
            if outcome.stops_turn:
                return Vetted(vetted[:index], blocked=outcome)
            self._record_hooks(caller, [r for r in outcome.records if r.failed])
            vetted[index] = replace(said, content=str(outcome.message.get("content", "")))
        return Vetted(vetted)

    async def _refused(
        self,
        process: Process,
        settings: LoopSettings,
        caller: Caller,
        question: JSONObject,
        vetted: Vetted,
        history: list[ChatMessage],
        emit: Emit,
        shape: TurnFacts,
        user: Entry | None,
    ) -> LoopResult:
        """The end of a turn whose earlier messages were not all let through: blocked, or stopped first.

        The new message (`user`) is recorded; a blocking message's hooks are
        recorded and their notices delivered (they say why); a hook's `reply`
        to it is the turn's answer, given without asking the LLM.
        """
        step = Step() if user is None else Step().add(user)
        blocked = vetted.blocked
        if blocked is None:
            await self._commit(caller, step, emit)
            return await self._finish(
                process, settings, caller, question, None, EndReason.TERMINATED, history, emit, shape
            )
        _hook_step(step, blocked.records)
        for notice in blocked.notices:
            step.add(Entry("system", "notice", notice), LoopEvent("notice", {"text": notice}))
        if blocked.reply is not None:
            answer = LoopEvent("answer", {"content": blocked.reply, "streamed": False})
            step.add(Entry("assistant", "agent", blocked.reply, {"from": "hook"}), answer)
        await self._commit(caller, step, emit)
        shape = replace(shape, replied_by_hook=blocked.reply is not None)
        return await self._finish(
            process, settings, caller, question, blocked.reply, EndReason.BLOCKED, history, emit, shape
        )

    async def _converse(
        self,
        process: Process,
        settings: LoopSettings,
        caller: Caller,
        messages: list[ChatMessage],
        emit: Emit,
        stop: asyncio.Event,
        options: TurnOptions,
        tally: _Tally,
        resumed: Resumed | None = None,
    ) -> tuple[str | None, EndReason, list[ChatMessage]]:
        """The LLM and the tools until an answer; a `resumed` run goes on from its recorded steps."""
        tools = await self._offered(caller, options, emit)
        if tools is None:
            return None, EndReason.ERROR, messages
        client_tools = frozenset(t.name for t in options.tools)
        answers_left = ATTEMPTS  # answers that may fail the output schema, the first included
        last_text: str | None = None
        asked_already = 0
        if resumed is not None:
            if resumed.answer is not None:  # recorded and shown: only the end is left
                messages.append(ChatMessage.assistant(resumed.answer))
                return resumed.answer, EndReason.JOB_DONE, messages
            asked_already = resumed.llm_calls
            await self._run_pending(caller, resumed, messages, emit, stop, _origin(process))
        for _ in range(settings.max_turns - asked_already):
            if process.terminated or left_here(stop):
                return last_text, EndReason.TERMINATED, messages
            streamed: list[str] = []
            quiet = options.output_schema is not None  # only an answer that validates is shown
            model = settings.model or self.default_model
            sent = await self.llm_hooks.outgoing(caller, caller.hooks, messages, tools, model, emit)
            if sent is None:  # a `before_llm_call` hook denied it (S24.3)
                return last_text, EndReason.BLOCKED, messages
            asked = self._inference(process, settings, sent, tools, emit, streamed, quiet)
            try:
                completion = await _unless_stopped(asked, stop)
            except BudgetExhausted as exc:
                await self._error(caller, str(exc), emit, "budget_exhausted")
                return last_text, EndReason.BUDGET_EXHAUSTED, messages
            except ProviderError as exc:
                text, code = _provider_failure(exc)
                await self._error(caller, text, emit, code)
                return last_text, EndReason.ERROR, messages
            except QuotaExhausted as exc:  # the user's quota (S26.3): refused before the LLM was asked
                await self._error(caller, str(exc), emit, "quota_exhausted")
                return last_text, EndReason.ERROR, messages
            if completion is None:
                left_here(stop)  # a run left for another process keeps nothing of a cut answer
                partial = self._keep_partial(caller, "".join(streamed), messages)
                return partial or last_text, EndReason.TERMINATED, messages
            tally.add(completion.usage)
            completion = _unique_call_ids(completion, messages)
            theirs = tuple(c for c in completion.tool_calls if c.name in client_tools)
            if theirs:  # the client runs them; the template's calls beside them are not made
                handed, refused = await self.tool_steps.handed(caller, theirs)
                if refused:  # the LLM reads why, and is asked again: nothing is handed
                    await self.tool_steps.refused(caller, completion, theirs, refused, messages, emit)
                    continue
                theirs = handed
                messages.append(ChatMessage.assistant(completion.text, theirs))
                process.prompt_tokens.learn(messages, completion.usage)
                self.tool_steps.client_calls(caller, completion, theirs)
                tally.client_calls = theirs
                return completion.text, EndReason.JOB_DONE, messages
            messages.append(ChatMessage.assistant(completion.text, completion.tool_calls))
            process.prompt_tokens.learn(messages, completion.usage)
            last_text = completion.text
            if not completion.tool_calls:
                answer: str | _Invalid = completion.text or ""
                if options.output_schema is not None:
                    answers_left -= 1
                    answer = await self._checked(process, caller, completion.text or "", options)
                if isinstance(answer, _Invalid):
                    if answers_left and answer.again:  # asked again as llm_json asks, the problem fed back
                        messages.append(ChatMessage.user(correction_request(answer.problem)))
                        continue
                    why = _invalid_answer(answer, ATTEMPTS - answers_left)
                    await self._error(caller, why, emit, "invalid_structured_output")
                    return None, EndReason.ERROR, messages
                shown = LoopEvent("answer", {"content": answer, "streamed": self.stream and not quiet})
                step = Step().add(Entry("assistant", "agent", answer, usage_meta(completion.usage)), shown)
                if self._hooks_after(settings, caller):  # they may read the transcript: the answer is there
                    await self._commit(caller, step, emit)
                else:
                    tally.answer = step
                return answer, EndReason.JOB_DONE, messages
            await self._run_tools(caller, completion, messages, emit, stop, _origin(process), options)
        await self._error(
            caller, f"stopped after max_turns ({settings.max_turns}) LLM calls", emit, "max_turns"
        )
        return last_text, EndReason.MAX_TURNS, messages

    async def _offered(
        self, caller: Caller, options: TurnOptions, emit: Emit
    ) -> tuple[ToolSchema, ...] | None:
        """The tools the LLM is offered: the caller's, then the client's; None (an error emitted) when
        there is no LLM to offer them to, or a client tool has the name of one of the caller's."""
        if self.provider is None:
            await self._error(caller, "no LLM provider is configured (kernel.yaml `llm:`)", emit, "no_llm")
            return None
        registry = self.dispatcher.registry
        if registry.granted_servers(caller):  # on a worker thread: listing may start these MCP servers
            visible = await self._in_thread(caller, registry.visible_to, caller)
        else:  # the script tools only: the catalog's lookup, as the chat's opening made on the loop
            visible = registry.visible_to(caller)
        clash = _clash(visible, options.tools)
        if clash is not None:
            await self._error(caller, clash, emit, "client_tool_clash")
            return None
        return (*(ToolSchema(s.name, s.description, dict(s.parameters)) for s in visible), *options.tools)

    async def _checked(
        self, process: Process, caller: Caller, answer: str, options: TurnOptions
    ) -> str | _Invalid:
        """The answer as compact JSON when it validates against `options.output_schema`, else why not.

        Validated off the event loop, until `options.validate_secs` from now
        or the process's deadline, whichever comes first (TurnOptions).
        """
        assert options.output_schema is not None
        deadline = time.monotonic() + options.validate_secs
        if process.deadline is not None:
            deadline = min(deadline, process.deadline)
        try:
            value = await self._in_thread(caller, parse_valid, answer, options.output_schema, deadline)
        except AnswerInvalid as exc:
            return _Invalid(str(exc))
        except ValidationStopped as exc:
            return _Invalid(f"{exc} (limits.timeout_secs: {options.validate_secs:g} s)", again=False)
        return json.dumps(value, ensure_ascii=False)

    async def _inference(
        self,
        process: Process,
        settings: LoopSettings,
        messages: list[ChatMessage],
        tools: tuple[ToolSchema, ...],
        emit: Emit,
        streamed: list[str],
        quiet: bool = False,
    ) -> Completion:
        """One LLM call, its cost's bound held in the budget group meanwhile (llm/token_bound.py).

        Sub-agents and scripts spending one group in parallel thus never
        spend past its limit; near the limit this waits for their calls to
        settle; BudgetExhausted when the bound does not fit even so. A stop
        cancels it: the hold is released and nothing is charged (the server
        reports no usage for a stream cut short).
        """
        bound = process.prompt_tokens.bound(messages, tools)
        async with held_for_async(process.budget, bound, settings.max_tokens, process.deadline) as max_tokens:
            request = CompletionRequest(
                messages=tuple(messages),
                tools=tools,
                max_tokens=max_tokens,
                temperature=settings.temperature,
                model=settings.model,
                user=process.user_id,  # the LLM's slots are shared fairly between users
                template=process.template_name,
                provider=settings.provider,
            )
            model = request.model or self.default_model  # what the provider asks for when none is named
            with genai.chat(model, max_tokens, settings.temperature) as traced:
                if genai.capturing():
                    traced.set({"gen_ai.input.messages": genai.content(_message_contents(messages))})
                completion = await self._complete(request, emit, streamed, quiet)
                _answered_span(traced, completion)
            process.charge(completion.usage.total_tokens)
        return completion

    async def _run_tools(
        self,
        caller: Caller,
        completion: Completion,
        messages: list[ChatMessage],
        emit: Emit,
        stop: asyncio.Event,
        origin: str,
        options: TurnOptions,
    ) -> None:
        """The completion's tool calls, recorded then run (tool_steps.py)."""
        waits = options.approval_wait_secs
        await self.tool_steps.response(caller, completion, messages, emit, stop, origin, waits)

    async def _run_pending(
        self,
        caller: Caller,
        resumed: Resumed,
        messages: list[ChatMessage],
        emit: Emit,
        stop: asyncio.Event,
        origin: str,
    ) -> None:
        """A resumed run's calls left without results (resume.py, tool_steps.py)."""
        if resumed.pending:
            await self.tool_steps.calls(caller, resumed.pending, messages, emit, stop, resumed, origin=origin)

    def _keep_partial(self, caller: Caller, partial: str, messages: list[ChatMessage]) -> str | None:
        """The text of a stopped answer stays: the user saw it, and the model sees it next time."""
        if not partial:
            return None
        self._record(caller, "assistant", "agent", partial, {"stopped": True})
        messages.append(ChatMessage.assistant(partial))
        return partial

    async def _complete(
        self, request: CompletionRequest, emit: Emit, streamed: list[str], quiet: bool = False
    ) -> Completion:
        """One LLM call; the streamed text is also appended to `streamed`, in case it is cut short.

        `quiet`: its tokens are not emitted (an answer that must validate is shown once it does).
        """
        assert self.provider is not None
        if not self.stream:
            return await self.provider.complete(request)
        final: Completion | None = None
        # aclosing: stopping early must still free the stream's concurrency slot
        async with contextlib.aclosing(self.provider.stream(request)) as events:  # type: ignore[type-var]
            async for event in events:
                if isinstance(event, TextDelta):
                    streamed.append(event.text)
                    if not quiet:
                        await emit(LoopEvent("token", {"text": event.text}))
                elif isinstance(event, StreamDone):
                    final = event.completion
        if final is None:
            raise ProviderError("the LLM stream ended without a final message", status=None, retryable=False)
        return final

    async def _finish(
        self,
        process: Process,
        settings: LoopSettings,
        caller: Caller,
        question: JSONObject,
        answer: str | None,
        reason: EndReason,
        history: list[ChatMessage],
        emit: Emit,
        shape: TurnFacts,
        answer_step: Step | None = None,
    ) -> LoopResult:
        """`after_turn` (with how the turn went, `ctx.turn`), `after_loop`, the end record.

        `answer_step`: the answer's step, not written yet (no hook runs after the turn): it is written
        with the end, in one transaction, its events first.
        """
        answer_message: JSONObject | None = (
            {"role": "assistant", "content": answer} if answer is not None else None
        )
        turn = replace(shape, reason=reason.value)
        notices: list[str] = []
        records: list[HookRecord] = []
        if self.hooks.takes_part(settings.hooks, "after_turn", caller):
            notices, records = await self._in_thread(
                caller, self.hooks.after_turn, settings.hooks, caller, question, answer_message, turn
            )
        step = _hook_step(answer_step or Step(), records)
        for notice in notices:
            step.add(Entry("system", "notice", notice), LoopEvent("notice", {"text": notice}))
        loop_records: list[HookRecord] = []
        if self.hooks.takes_part(settings.hooks, "after_loop", caller):
            loop_records = await self._in_thread(
                caller, self.hooks.after_loop, settings.hooks, caller, reason.value
            )
        _hook_step(step, loop_records).add(
            Entry("system", "end", reason.value), LoopEvent("end", {"reason": reason.value})
        )
        ended = {"status": "ended", "reason": reason.value, "ended_at": time.time()}
        await self._commit(caller, step, emit, ended)
        return LoopResult(answer, reason, history)

    def _hooks_after(self, settings: LoopSettings, caller: Caller) -> bool:
        """Whether a hook runs after the turn's answer (`after_turn`, `after_loop`), before its end."""
        return self.hooks.takes_part(settings.hooks, "after_turn", caller) or self.hooks.takes_part(
            settings.hooks, "after_loop", caller
        )

    async def _error(self, caller: Caller, text: str, emit: Emit, code: str) -> None:
        """An `error` event: `message` for a person, `code` (ERROR_CODES) for a program to act on."""
        log.warning("process %s: %s", caller.pid, text)
        shown = LoopEvent("error", {"message": text, "code": code})
        await self._commit(caller, Step().add(Entry("system", "error", text, {"code": code}), shown), emit)


def _ended_span(traced: Traced, result: LoopResult) -> None:
    """The run's span told how the run ended and what its LLM calls cost."""
    traced.set(
        {
            "agentkernel.end_reason": result.reason.value,
            "gen_ai.usage.input_tokens": result.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": result.usage.completion_tokens,
        }
    )
    if result.reason == EndReason.ERROR:
        traced.fail("run_error")


def _answered_span(traced: Traced, completion: Completion) -> None:
    """An LLM call's span told the answer: its model, tokens, finish reason, the provider that gave it."""
    if not traced.recording:
        return
    traced.set(
        {
            "gen_ai.response.model": completion.model,
            "gen_ai.usage.input_tokens": completion.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": completion.usage.completion_tokens,
            "gen_ai.response.finish_reasons": (completion.finish_reason or "unknown",),
            "agentkernel.llm.provider": completion.provider,
        }
    )
    if genai.capturing():
        traced.set({"gen_ai.output.messages": genai.content(_message_contents([completion.message()]))})


def _message_contents(messages: Sequence[ChatMessage]) -> list[JSONObject]:
    """Messages as a span's captured contents: role, text, and the tool calls' names and arguments."""
    shown: list[JSONObject] = []
    for message in messages:
        entry: JSONObject = {"role": message.role, "content": message.content}
        if message.tool_calls:
            entry["tool_calls"] = [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls]
        shown.append(entry)
    return shown


def _trace_column(traceparent: str | None) -> dict[str, Any] | None:
    """The run's `traceparent` column set, when the run is traced."""
    return None if traceparent is None else {"traceparent": traceparent}


def _unique_call_ids(completion: Completion, messages: Sequence[ChatMessage]) -> Completion:
    """The completion with each tool call's id unique in the conversation: a server that numbers its
    calls afresh in each response (`call_0` again) would otherwise have a later call taken for an
    earlier one — its recorded result reused when its run is resumed, its approval found decided."""
    if not completion.tool_calls:
        return completion
    seen = {call.id for message in messages for call in message.tool_calls}
    calls = []
    for call in completion.tool_calls:
        fresh, number = call.id or "call", 1
        while fresh in seen:
            number += 1
            fresh = f"{call.id or 'call'}_{number}"
        seen.add(fresh)
        calls.append(call if fresh == call.id else replace(call, id=fresh))
    return replace(completion, tool_calls=tuple(calls))


def _call_hooks(settings: LoopSettings) -> tuple[HookSpec, ...]:
    """The hooks a loop's tool and LLM calls pass: its own, then those it inherits (by name, once)."""
    own = tuple(settings.hooks)
    names = {spec.name for spec in own}
    return own + tuple(spec for spec in settings.call_hooks if spec.name not in names)


def _origin(process: Process) -> str:
    """Where the loop's tool calls come from, as their hooks see it (S24.1)."""
    return "subagent" if process.depth > 0 else "llm"


def _hook_step(step: Step, records: Sequence[HookRecord]) -> Step:
    """`step` with the records of these hook calls added (shown to nobody: the transcript's)."""
    for record in records:
        step.add(Entry(*record.transcript_entry()))
    return step


def _provider_failure(exc: ProviderError) -> tuple[str, str]:
    """What a failed LLM call is told as, and its code: a request the LLM refused is not its being down.

    A 4xx other than a timeout or a rate limit (400 for a request it cannot
    take, 401 for a wrong key, 404 for an unknown model) will fail the same
    way each time: `llm_refused`. A rate limit is `llm_rate_limited`; the rest
    (5xx, no connection, a timeout) `llm_unavailable`.
    """
    if exc.status == 429:
        return f"the LLM is rate-limited: {exc}", "llm_rate_limited"
    if exc.status is not None and 400 <= exc.status < 500 and exc.status != 408:
        return f"the LLM refused the request: {exc}", "llm_refused"
    return f"the LLM is unavailable: {exc}", "llm_unavailable"


def _invalid_answer(invalid: _Invalid, attempts: int) -> str:
    """Why a turn that must answer in JSON ends without an answer (an `error` event)."""
    if not invalid.again:
        return f"structured output could not be validated: {invalid.problem}"
    return str(StructuredOutputInvalid(attempts, invalid.problem))


def _clash(visible: Sequence[Any], client: Sequence[ToolSchema]) -> str | None:
    """Why the client's tools cannot be offered beside the template's: the first name both have."""
    names = {spec.name for spec in visible}
    for index, tool in enumerate(client):
        if tool.name in names:
            return (
                f"body.tools.{index}.function.name: {tool.name!r} is a tool of the template already; "
                "give the client's tool another name"
            )
    return None


async def _unless_stopped(work: Awaitable[T], stop: asyncio.Event) -> T | None:
    """`work`'s result, or None when `stop` is set first; `work` is then cancelled.

    Cancelling closes an LLM stream (its connection and concurrency slot go
    at once), so a server that stalls cannot hold a stop back.
    """
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait((task,))
    return None if task.cancelled() else task.result()


# the `code` of an `error` event (`_error`): what failed, for a client to act on (server/openai_shapes.py)
ERROR_CODES = (
    "no_llm",
    "llm_refused",
    "llm_rate_limited",
    "llm_unavailable",
    "quota_exhausted",
    "budget_exhausted",
    "max_turns",
    "invalid_structured_output",
    "client_tool_clash",
)

__all__ = [
    "ERROR_CODES",
    "MAX_RECORDED_VISUAL_BYTES",
    "NOT_RUN",
    "AgentLoop",
    "Emit",
    "EndReason",
    "LoopEvent",
    "LoopResult",
    "LoopSettings",
    "RunState",
    "Transcript",
    "TurnOptions",
]
