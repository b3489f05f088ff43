"""The hook pipeline (S7, S24): priority order, short-circuit rules, isolation.

Hooks run in priority order (lower first, ties by name). In
`before_user_message` the first `reply` or `suppress` ends the chain, a
`replace_message` is what later hooks and the LLM see, and every notice of
the hooks that ran is delivered (S7.6). A hook that throws, loops, times out
or returns garbage is logged and recorded as an error, and the turn goes on
(S7.5): nothing a hook does can raise out of this module.

The tool-call events (S24.1–S24.3) chain the same way: each `replace_args`,
`replace_result` or `replace_messages` is what the next hook sees, and the
first `deny` ends the chain. One rule differs: a `before_tool_call` hook that
fails denies the call, unless its YAML says `on_error: allow` (S24.2) — a
guard that breaks must not wave calls through.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentkernel.agent.tool_verdicts import (
    parse_after_tool_call,
    parse_before_llm_call,
    parse_before_tool_call,
)
from agentkernel.agent.verdicts import parse_after_turn, parse_before_user_message, received
from agentkernel.config import HOOK_EVENTS, HookSpec, KernelLimits
from agentkernel.errors import ScriptError
from agentkernel.helpers.table import ScriptCall
from agentkernel.identity import Caller
from agentkernel.scripting.host import ScriptHost
from agentkernel.telemetry import genai, metrics
from agentkernel.types import JSONObject, JSONValue, NoValue
from agentkernel.util.json_size import json_length
from agentkernel.util.short_text import clip
from agentkernel.util.valid_unicode import repair_text

log = logging.getLogger("agentkernel.hooks")

# where a tool call comes from (S24.1): `call.origin` of before_tool_call and after_tool_call
CALL_ORIGINS = (
    "llm",
    "call_tool",
    "subagent",
    "mcp_client",
    "outside_mcp",
    "panel",
    "continuation",
    "client",
)
REASON_CHARS = 2_000  # a deny's reason or an ask's question is cut there: the LLM and the person read it


@dataclass(frozen=True)
class HookRecord:
    """One hook function call, as the transcript records it (kind `hook` or `error`)."""

    hook: str
    event: str
    result: JSONValue = None
    error: str | None = None
    warnings: tuple[str, ...] = ()
    earlier: int | None = None  # the index of the client's earlier message it vetted (`ctx.earlier`)

    @property
    def failed(self) -> bool:
        return self.error is not None

    def to_json(self) -> JSONObject:
        entry: JSONObject = {"hook": self.hook, "event": self.event}
        if self.earlier is not None:
            entry["earlier"] = self.earlier
        if self.error is not None:
            entry["error"] = self.error
        else:
            entry["result"] = self.result
        if self.warnings:
            entry["warnings"] = list(self.warnings)
        return entry

    def transcript_entry(self) -> tuple[str, str, str, JSONObject]:
        """`(role, kind, content, meta)` as the message store records this call (kernel.md 9).

        Kind `hook` with the return value as JSON, or `error` with the
        failure's text; the agent loop and `Kernel.run_hooks` both record
        through this, so a transcript reads the same whoever ran the hook.
        """
        if self.error is not None:
            return "hook", "error", self.error, self.to_json()
        return "hook", "hook", json.dumps(self.result, ensure_ascii=False), self.to_json()


@dataclass
class BeforeOutcome:
    """What `before_user_message` decided for one user message."""

    message: JSONObject
    notices: list[str] = field(default_factory=list)
    reply: str | None = None
    suppressed: bool = False
    inject: list[JSONObject] = field(default_factory=list)
    records: list[HookRecord] = field(default_factory=list)

    @property
    def stops_turn(self) -> bool:
        """A reply or a suppression means the LLM is not asked (S7.1)."""
        return self.reply is not None or self.suppressed


@dataclass
class ToolCallVerdicts:
    """What `before_tool_call` decided for one call (S24.2).

    `args` are the arguments the call runs with (the last `replace_args`,
    `replaced` True then: the dispatcher validates them against the tool's
    `parameters` again); `deny` the reason the call does not run, naming
    the hook (`denied by hook guard: …`), at most REASON_CHARS; `ask` the
    first hook's question for an approval (S24.4), which a later `deny`
    overrides; `denied_by`/`asked_by` the hooks that said so.
    """

    args: JSONObject
    replaced: bool = False
    deny: str | None = None
    denied_by: str | None = None
    ask: str | None = None
    asked_by: str | None = None
    notices: list[str] = field(default_factory=list)
    records: list[HookRecord] = field(default_factory=list)

    @property
    def denied(self) -> bool:
        return self.deny is not None


@dataclass
class ToolResultVerdicts:
    """What `after_tool_call` decided for one result (S24.3).

    `result` is the last `replace_result` as the hook gave it (`replaced`
    True), or the result given; the dispatcher normalizes a replaced one as
    a tool's own return (tools/results.py: its visuals checked).
    """

    result: JSONObject
    replaced: bool = False
    notices: list[str] = field(default_factory=list)
    records: list[HookRecord] = field(default_factory=list)


@dataclass
class LlmCallVerdicts:
    """What `before_llm_call` decided for one request (S24.3).

    `contents` is each message's new content, in the request's order (the
    last `replace_messages`; None: unchanged): the kernel keeps each
    message's role, tool calls and tool call id and swaps its content.
    `deny` names the hook (the turn ends `blocked`).
    """

    contents: list[str | None] | None = None
    deny: str | None = None
    denied_by: str | None = None
    notices: list[str] = field(default_factory=list)
    records: list[HookRecord] = field(default_factory=list)

    @property
    def denied(self) -> bool:
        return self.deny is not None


@dataclass(frozen=True)
class HookRun:
    """One message through hooks with no LLM to answer it (S22.1): `HookPipeline.run_message`.

    `before` is what `before_user_message` decided; `after_notices` are the
    notices of `after_turn`; `records` is every hook function call of the
    three events, in the order they ran.
    """

    before: BeforeOutcome
    after_notices: list[str]
    records: list[HookRecord]


@dataclass(frozen=True)
class TurnFacts:
    """How a turn went, as `after_turn` sees it in `ctx.turn` (S7.4).

    A hook cannot learn these from the two messages it gets, and a hook
    that keeps answers (faq_cache) or facts (memory) must not keep what a
    tool, an injected message, an earlier message or another hook's reply
    made: the answer would not be the question's alone.
    """

    reason: str
    tool_calls: int = 0
    replied_by_hook: bool = False
    history_messages: int = 0
    injected_messages: int = 0
    subagent: bool = False  # a sub-agent's run: a script chose its task and may have narrowed its tools

    def to_json(self) -> JSONObject:
        return {
            "reason": self.reason,
            "tool_calls": self.tool_calls,
            "replied_by_hook": self.replied_by_hook,
            "history_messages": self.history_messages,
            "injected_messages": self.injected_messages,
            "subagent": self.subagent,
        }


@dataclass(frozen=True)
class HookEvent:
    """One event's inputs, as a run would give them to a hook: what a hook's `tests:` case states.

    `message` is `before_user_message`'s `msg` (`earlier`: a stateless
    client's earlier message, `ctx.earlier`); `question`, `answer` and
    `turn` are `after_turn`'s (None: no answer); `reason` is `after_loop`'s;
    `call` is `before_tool_call`'s and `after_tool_call`'s
    (`{id, tool, args, origin}`), `result` `after_tool_call`'s, `request`
    `before_llm_call`'s (`{messages, tools, model}`).
    """

    event: str
    message: JSONObject | None = None
    earlier: bool = False
    question: JSONObject | None = None
    answer: JSONObject | None = None
    turn: TurnFacts | None = None
    reason: str = "job_done"
    call: JSONObject | None = None
    result: JSONObject | None = None
    request: JSONObject | None = None


@dataclass(frozen=True)
class HookEventRun:
    """One hook on one event (`HookPipeline.run_event`): whether it took part, and what it decided.

    `before` is set for `before_user_message`, `tool_call`, `tool_result`
    and `llm_call` for the S24 events; `notices` are `after_turn`'s (the
    others' are in their outcome); `records` every call, with any part of a
    verdict that was ignored.
    """

    handled: bool
    records: list[HookRecord]
    before: BeforeOutcome | None = None
    notices: list[str] = field(default_factory=list)
    tool_call: ToolCallVerdicts | None = None
    tool_result: ToolResultVerdicts | None = None
    llm_call: LlmCallVerdicts | None = None

    @property
    def failed(self) -> bool:
        return any(record.failed for record in self.records)


def hook_ctx(
    caller: Caller, spec: HookSpec, turn: TurnFacts | None = None, earlier: bool | None = None
) -> JSONObject:
    """S7.4: `{pid, agent, template, session_id, user_id, config}`; unknown values are null.

    `after_turn` also gets `turn`, the turn's `TurnFacts`; `before_user_message`
    gets `earlier`: true when `msg` is an earlier message of a stateless
    client's conversation, vetted but not being answered (`AgentLoop._vetted`).
    """
    ctx: JSONObject = {
        "pid": caller.pid,
        "agent": caller.agent,
        "template": caller.template,
        "session_id": caller.session_id,
        "user_id": caller.user_id,
        "config": spec.raw,
    }
    if turn is not None:
        ctx["turn"] = turn.to_json()
    if earlier is not None:
        ctx["earlier"] = earlier
    return ctx


class HookPipeline:
    """Runs the hooks of a process around each turn; see the module docstring."""

    def __init__(self, host: ScriptHost, limits: KernelLimits) -> None:
        self.host = host
        self.limits = limits
        self._defined: dict[Path, tuple[object, frozenset[str]]] = {}

    # -- calling one hook ------------------------------------------------------------------

    @staticmethod
    def ordered(hooks: Iterable[HookSpec]) -> list[HookSpec]:
        return sorted(hooks, key=lambda h: (h.priority, h.name))

    def handles(self, spec: HookSpec, event: str, caller: Caller) -> bool:
        """Whether the hook takes part in `event`: listed in `events` (or no list) and defined."""
        if spec.events is not None and event not in spec.events:
            return False
        return event in self.defined(spec, caller)

    def takes_part(self, hooks: Iterable[HookSpec], event: str, caller: Caller) -> bool:
        """Whether any of `hooks` takes part in `event` (one that no longer compiles does: the pipeline
        records why). Cheap once the scripts are compiled: the loop asks before it hands an event to a
        worker thread, so an event no hook listens to costs no hop. Asked at each event, so a hook
        script that comes to define the event's function is seen at the next one."""
        for spec in hooks:
            try:
                if self.handles(spec, event, caller):
                    return True
            except ScriptError:
                return True
        return False

    def defined(self, spec: HookSpec, caller: Caller) -> frozenset[str]:
        """The hook functions a script defines, cached until the script changes."""
        _, compiled = self.host.compile(spec.script)
        cached = self._defined.get(spec.script)
        if cached is not None and cached[0] is compiled:
            return cached[1]
        call = ScriptCall.limited(caller, f"hook {spec.name}", self.limits, spec.call_budget(self.limits))
        names = self.host.defined_functions(spec.script, HOOK_EVENTS, call)
        self._defined[spec.script] = (compiled, names)
        return names

    def call(
        self,
        spec: HookSpec,
        event: str,
        caller: Caller,
        args: Sequence[JSONValue],
        turn: TurnFacts | None = None,
        earlier: bool | None = None,
        *,
        grows_from: JSONValue = None,
    ) -> HookRecord:
        """Run one hook function (`_call`), its verdict counted in the metrics (S26.2)."""
        record = self._call(spec, event, caller, args, turn, earlier, grows_from=grows_from)
        metrics.hook_called(event, record.result, record.failed)
        return record

    def _call(
        self,
        spec: HookSpec,
        event: str,
        caller: Caller,
        args: Sequence[JSONValue],
        turn: TurnFacts | None = None,
        earlier: bool | None = None,
        *,
        grows_from: JSONValue = None,
    ) -> HookRecord:
        """Run one hook function; every failure becomes a record, never an exception.

        Its return may have at most `limits.max_result_chars` characters of
        JSON, more than `grows_from`'s when given (`_allowance`).
        """
        with genai.hook(spec.name, event) as traced:
            record = self._called(spec, event, caller, args, turn, earlier, grows_from)
            if traced.recording:
                traced.set({"agentkernel.hook.verdict": verdict_of(record)})
                if record.failed:
                    traced.fail("hook_error")
        return record

    def _called(
        self,
        spec: HookSpec,
        event: str,
        caller: Caller,
        args: Sequence[JSONValue],
        turn: TurnFacts | None,
        earlier: bool | None,
        grows_from: JSONValue,
    ) -> HookRecord:
        call = ScriptCall.limited(caller, f"hook {spec.name}", self.limits, spec.call_budget(self.limits))
        ctx = hook_ctx(caller, spec, turn, earlier)
        try:
            value = self.host.call(spec.script, event, [ctx, *args], [], call)
        except ScriptError as exc:
            text = repair_text(exc.describe(spec.yaml_path.parent))  # a thrown string is the script's text
            log.warning("hook %s.%s failed: %s", spec.name, event, text)
            return HookRecord(spec.name, event, error=text)
        except Exception as exc:  # a kernel bug inside a hook call must not end the turn either
            log.exception("hook %s.%s crashed in the kernel", spec.name, event)
            return HookRecord(spec.name, event, error=f"internal error: {type(exc).__name__}: {exc}")
        returned = None if isinstance(value, NoValue) else value
        kept = received(returned, *self._allowance(returned, grows_from))
        if kept.problem is not None:
            log.warning("hook %s.%s: %s", spec.name, event, kept.problem)
            return HookRecord(spec.name, event, error=kept.problem)
        for warning in kept.warnings:
            log.warning("hook %s.%s: %s", spec.name, event, warning)
        return HookRecord(spec.name, event, result=kept.value, warnings=kept.warnings)

    def _lineup(
        self, hooks: Iterable[HookSpec], event: str, caller: Caller
    ) -> list[tuple[HookSpec, HookRecord | None]]:
        """The hooks taking part in `event`, in order; one that no longer compiles with its error record."""
        lineup: list[tuple[HookSpec, HookRecord | None]] = []
        for spec in self.ordered(hooks):
            try:
                if self.handles(spec, event, caller):
                    lineup.append((spec, None))
            except ScriptError as exc:
                text = f"cannot run: {exc.describe(spec.yaml_path.parent)}"
                log.warning("hook %s %s", spec.name, text)
                lineup.append((spec, HookRecord(spec.name, event, error=text)))
        return lineup

    def _participants(
        self, hooks: Iterable[HookSpec], event: str, caller: Caller
    ) -> tuple[list[HookSpec], list[HookRecord]]:
        """The hooks taking part in `event`; one that no longer compiles is an error record (S7.5)."""
        lineup = self._lineup(hooks, event, caller)
        chosen = [spec for spec, failure in lineup if failure is None]
        return chosen, [failure for _, failure in lineup if failure is not None]

    def _allowance(self, returned: JSONValue, grows_from: JSONValue) -> tuple[int, str]:
        """How many characters of JSON a hook may return, and the setting that says so, for `received`.

        An S24 hook that scrubs a long conversation or a big result returns
        about as much as it got (`grows_from`): it may return
        `max_result_chars` more. What it got is measured only when its
        return passes `max_result_chars`, which most never do.
        """
        base = self.limits.max_result_chars
        if grows_from is None or returned is None or json_length(returned, base) is not None:
            return base, "max_result_chars"
        given = json_length(grows_from, sys.maxsize) or 0
        return base + given, f"max_result_chars, {base:,} more than the {given:,} it was given"

    # -- S7's three events --------------------------------------------------------------------

    def before_user_message(
        self, hooks: Iterable[HookSpec], caller: Caller, message: JSONObject, *, earlier: bool = False
    ) -> BeforeOutcome:
        """`message` through the hooks (S7.6); `earlier`: it is a client's earlier message (`ctx.earlier`)."""
        outcome = BeforeOutcome(message=dict(message))
        participants, outcome.records = self._participants(hooks, "before_user_message", caller)
        for spec in participants:
            record = self.call(spec, "before_user_message", caller, [outcome.message], earlier=earlier)
            outcome.records.append(record)
            if record.failed:
                continue
            verdict = parse_before_user_message(record.result)
            for problem in verdict.problems:
                outcome.records.append(self._problem(spec, "before_user_message", problem))
            if verdict.notice is not None:
                outcome.notices.append(verdict.notice)
            outcome.inject.extend(verdict.inject)
            if verdict.replace_message is not None:
                outcome.message = verdict.replace_message
            if verdict.reply is not None or verdict.suppress:
                outcome.reply = verdict.reply
                outcome.suppressed = verdict.suppress and verdict.reply is None
                break
        return outcome

    def after_turn(
        self,
        hooks: Iterable[HookSpec],
        caller: Caller,
        question: JSONObject | None,
        answer: JSONObject | None,
        turn: TurnFacts | None = None,
    ) -> tuple[list[str], list[HookRecord]]:
        notices: list[str] = []
        participants, records = self._participants(hooks, "after_turn", caller)
        for spec in participants:
            record = self.call(spec, "after_turn", caller, [question, answer], turn)
            records.append(record)
            if record.failed:
                continue
            notice, problems = parse_after_turn(record.result)
            records.extend(self._problem(spec, "after_turn", p) for p in problems)
            if notice is not None:
                notices.append(notice)
        return notices, records

    def after_loop(self, hooks: Iterable[HookSpec], caller: Caller, reason: str) -> list[HookRecord]:
        """S7.3: the return value is ignored; only failures matter."""
        participants, records = self._participants(hooks, "after_loop", caller)
        return records + [self.call(spec, "after_loop", caller, [reason]) for spec in participants]

    # -- S24's three events ------------------------------------------------------------------

    def before_tool_call(
        self, hooks: Iterable[HookSpec], caller: Caller, call: JSONObject
    ) -> ToolCallVerdicts:
        """`call = {id, tool, args, origin}` through the hooks (S24.2); see ToolCallVerdicts.

        Each hook sees the args the hooks before it replaced; the first
        `deny` ends the chain; an `ask` does not, so a later hook may still
        deny. A hook that fails (its script, its limits, a return too big,
        any part of its verdict malformed) denies the call with that error,
        unless its YAML says `on_error: allow`: then it is recorded and skipped.
        """
        event = "before_tool_call"
        given_args = call.get("args")
        outcome = ToolCallVerdicts(args=dict(given_args) if isinstance(given_args, dict) else {})
        for spec, failure in self._lineup(hooks, event, caller):
            shown = {**call, "args": outcome.args}
            record = failure or self.call(spec, event, caller, [shown], grows_from=shown)
            outcome.records.append(record)
            if record.error is not None:
                if self._fails_closed(spec, outcome, record.error):
                    break
                continue
            verdict = parse_before_tool_call(record.result)
            problems = [self._problem(spec, event, problem) for problem in verdict.problems]
            outcome.records.extend(problems)
            if problems and self._fails_closed(spec, outcome, f"a malformed verdict: {verdict.problems[0]}"):
                break
            if verdict.notice is not None:
                outcome.notices.append(verdict.notice)
            if verdict.replace_args is not None:
                outcome.args, outcome.replaced = verdict.replace_args, True
            if verdict.ask is not None and outcome.ask is None:
                outcome.ask, outcome.asked_by = clip(verdict.ask, REASON_CHARS, _CUT), spec.name
            if verdict.deny is not None:
                outcome.deny, outcome.denied_by = _denial(spec, verdict.deny), spec.name
                break
        return outcome

    @staticmethod
    def _fails_closed(spec: HookSpec, outcome: ToolCallVerdicts, error: str) -> bool:
        """A failed `before_tool_call` hook: deny the call (True), or skip the hook (`on_error: allow`)."""
        if spec.on_error == "allow":
            log.warning("hook %s.before_tool_call failed; on_error: allow, so the call goes on", spec.name)
            return False
        outcome.deny = _denial(spec, f"the hook failed (on_error: deny): {error}")
        outcome.denied_by = spec.name
        return True

    def after_tool_call(
        self, hooks: Iterable[HookSpec], caller: Caller, call: JSONObject, result: JSONObject
    ) -> ToolResultVerdicts:
        """`result` of `call` through the hooks (S24.3): each sees the result the hooks before it replaced.

        A hook's error is recorded and the hook skipped (S7.5).
        """
        event = "after_tool_call"
        outcome = ToolResultVerdicts(result=result)
        participants, outcome.records = self._participants(hooks, event, caller)
        for spec in participants:
            given: list[JSONValue] = [call, outcome.result]
            record = self.call(spec, event, caller, given, grows_from=given)
            outcome.records.append(record)
            if record.failed:
                continue
            verdict = parse_after_tool_call(record.result)
            outcome.records.extend(self._problem(spec, event, problem) for problem in verdict.problems)
            if verdict.notice is not None:
                outcome.notices.append(verdict.notice)
            if verdict.replace_result is not None:
                outcome.result, outcome.replaced = verdict.replace_result, True
        return outcome

    def before_llm_call(
        self, hooks: Iterable[HookSpec], caller: Caller, request: JSONObject
    ) -> LlmCallVerdicts:
        """`request = {messages, tools, model}` through the hooks (S24.3); see LlmCallVerdicts.

        Each hook sees the messages with the contents the hooks before it
        replaced; a `replace_messages` is checked against the request's own
        messages (tool_verdicts.py's rule); the first `deny` ends the chain.
        A hook's error is recorded and the hook skipped (S7.5).
        """
        event = "before_llm_call"
        given_messages = request.get("messages")
        originals = (
            [m for m in given_messages if isinstance(m, dict)] if isinstance(given_messages, list) else []
        )
        messages = originals
        outcome = LlmCallVerdicts()
        participants, outcome.records = self._participants(hooks, event, caller)
        for spec in participants:
            shown: JSONObject = {**request, "messages": list(messages)}
            record = self.call(spec, event, caller, [shown], grows_from=shown)
            outcome.records.append(record)
            if record.failed:
                continue
            verdict = parse_before_llm_call(record.result, originals)
            outcome.records.extend(self._problem(spec, event, problem) for problem in verdict.problems)
            if verdict.notice is not None:
                outcome.notices.append(verdict.notice)
            if verdict.contents is not None:
                outcome.contents = list(verdict.contents)
                messages = [{**m, "content": c} for m, c in zip(originals, verdict.contents, strict=True)]
            if verdict.deny is not None:
                outcome.deny, outcome.denied_by = _denial(spec, verdict.deny), spec.name
                break
        return outcome

    def run_message(self, hooks: Iterable[HookSpec], caller: Caller, message: JSONObject) -> HookRun:
        """`message` through the three events as a run would take it, with no LLM (S22.1).

        `after_turn` gets the message (or its `replace_message`) as the
        question and `{role: "assistant", content: <the reply, or "">}` as the
        answer, null when the message was suppressed; `after_loop` gets
        `job_done`; `ctx.turn` says no tool ran and no earlier message was
        there, and whether a hook replied. What `hook_tool` shows, and `Kernel.run_hooks` returns.
        """
        hooks = list(hooks)
        before = self.before_user_message(hooks, caller, message)
        answer: JSONObject | None = (
            None if before.suppressed else {"role": "assistant", "content": before.reply or ""}
        )
        turn = TurnFacts(
            reason="blocked" if before.suppressed else "job_done",
            replied_by_hook=before.reply is not None,
            injected_messages=len(before.inject),
        )
        after_notices, after_records = self.after_turn(hooks, caller, before.message, answer, turn)
        loop_records = self.after_loop(hooks, caller, "job_done")
        return HookRun(before, after_notices, [*before.records, *after_records, *loop_records])

    def run_event(self, spec: HookSpec, caller: Caller, given: HookEvent) -> HookEventRun:
        """One hook on one event, as the loop calls it; `handled` False when the hook takes no part."""
        try:
            handled = self.handles(spec, given.event, caller)
        except ScriptError as exc:
            error = f"cannot run: {exc.describe(spec.yaml_path.parent)}"
            return HookEventRun(True, [HookRecord(spec.name, given.event, error=error)])
        if not handled:
            return HookEventRun(False, [])
        if given.event == "before_user_message":
            before = self.before_user_message([spec], caller, given.message or {}, earlier=given.earlier)
            return HookEventRun(True, before.records, before)
        if given.event == "after_turn":
            turn = given.turn or TurnFacts(reason="job_done")
            notices, records = self.after_turn([spec], caller, given.question, given.answer, turn)
            return HookEventRun(True, records, notices=notices)
        if given.event == "before_tool_call":
            tool_call = self.before_tool_call([spec], caller, given.call or {})
            return HookEventRun(True, tool_call.records, tool_call=tool_call)
        if given.event == "after_tool_call":
            tool_result = self.after_tool_call([spec], caller, given.call or {}, given.result or {})
            return HookEventRun(True, tool_result.records, tool_result=tool_result)
        if given.event == "before_llm_call":
            llm_call = self.before_llm_call([spec], caller, given.request or {})
            return HookEventRun(True, llm_call.records, llm_call=llm_call)
        return HookEventRun(True, self.after_loop([spec], caller, given.reason))

    @staticmethod
    def _problem(spec: HookSpec, event: str, problem: str) -> HookRecord:
        text = f"ignored part of the verdict: {problem}"
        log.warning("hook %s.%s: %s", spec.name, event, text)
        return HookRecord(spec.name, event, error=text)


_CUT = "…"


VERDICT_KEYS = (
    "deny",
    "ask",
    "reply",
    "suppress",
    "replace_message",
    "replace_args",
    "replace_result",
    "replace_messages",
    "inject",
    "notice",
)


def verdict_of(record: HookRecord) -> str:
    """What a hook call said, for its span: `error`, the verdict's keys (`deny`, `replace_args,notice`…),
    or `none` — never their values, which may quote the conversation."""
    if record.failed:
        return "error"
    result = record.result
    said = [key for key in VERDICT_KEYS if isinstance(result, dict) and result.get(key) not in (None, False)]
    return ",".join(said) or "none"


def _denial(spec: HookSpec, reason: str) -> str:
    """`denied by hook NAME: REASON`, cut to REASON_CHARS (a hook may deny with megabytes)."""
    text = f"denied by hook {spec.name}: {reason}" if reason else f"denied by hook {spec.name}"
    return clip(text, REASON_CHARS, _CUT)


__all__ = [
    "CALL_ORIGINS",
    "REASON_CHARS",
    "BeforeOutcome",
    "HookEvent",
    "HookEventRun",
    "HookPipeline",
    "HookRecord",
    "HookRun",
    "LlmCallVerdicts",
    "ToolCallVerdicts",
    "ToolResultVerdicts",
    "TurnFacts",
    "hook_ctx",
]
