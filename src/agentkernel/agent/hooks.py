"""The hook pipeline (S7): priority order, short-circuit rules, isolation.

Hooks run in priority order (lower first, ties by name). In
`before_user_message` the first `reply` or `suppress` ends the chain, a
`replace_message` is what later hooks and the LLM see, and every notice of
the hooks that ran is delivered (S7.6). A hook that throws, loops, times out
or returns garbage is logged and recorded as an error, and the turn goes on
(S7.5): nothing a hook does can raise out of this module.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentkernel.agent.verdicts import parse_after_turn, parse_before_user_message, received
from agentkernel.config import HOOK_EVENTS, HookSpec, KernelLimits
from agentkernel.errors import ScriptError
from agentkernel.helpers.table import ScriptCall
from agentkernel.identity import Caller
from agentkernel.scripting.host import ScriptHost
from agentkernel.types import JSONObject, JSONValue, NoValue
from agentkernel.util.valid_unicode import repair_text

log = logging.getLogger("agentkernel.hooks")


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
    `turn` are `after_turn`'s (None: no answer); `reason` is `after_loop`'s.
    """

    event: str
    message: JSONObject | None = None
    earlier: bool = False
    question: JSONObject | None = None
    answer: JSONObject | None = None
    turn: TurnFacts | None = None
    reason: str = "job_done"


@dataclass(frozen=True)
class HookEventRun:
    """One hook on one event (`HookPipeline.run_event`): whether it took part, and what it decided.

    `before` is set for `before_user_message`; `notices` are `after_turn`'s
    (and `before.notices` `before_user_message`'s); `records` every call,
    with any part of a verdict that was ignored.
    """

    handled: bool
    records: list[HookRecord]
    before: BeforeOutcome | None = None
    notices: list[str] = field(default_factory=list)

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
    ) -> HookRecord:
        """Run one hook function; every failure becomes a record, never an exception."""
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
        kept = received(None if isinstance(value, NoValue) else value, self.limits.max_result_chars)
        if kept.problem is not None:
            log.warning("hook %s.%s: %s", spec.name, event, kept.problem)
            return HookRecord(spec.name, event, error=kept.problem)
        for warning in kept.warnings:
            log.warning("hook %s.%s: %s", spec.name, event, warning)
        return HookRecord(spec.name, event, result=kept.value, warnings=kept.warnings)

    def _participants(
        self, hooks: Iterable[HookSpec], event: str, caller: Caller
    ) -> tuple[list[HookSpec], list[HookRecord]]:
        """The hooks taking part in `event`; one that no longer compiles is an error record (S7.5)."""
        chosen: list[HookSpec] = []
        failures: list[HookRecord] = []
        for spec in self.ordered(hooks):
            try:
                if self.handles(spec, event, caller):
                    chosen.append(spec)
            except ScriptError as exc:
                text = f"cannot run: {exc.describe(spec.yaml_path.parent)}"
                log.warning("hook %s %s", spec.name, text)
                failures.append(HookRecord(spec.name, event, error=text))
        return chosen, failures

    # -- the three events ----------------------------------------------------------------------

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
        return HookEventRun(True, self.after_loop([spec], caller, given.reason))

    @staticmethod
    def _problem(spec: HookSpec, event: str, problem: str) -> HookRecord:
        text = f"ignored part of the verdict: {problem}"
        log.warning("hook %s.%s: %s", spec.name, event, text)
        return HookRecord(spec.name, event, error=text)


__all__ = [
    "BeforeOutcome",
    "HookEvent",
    "HookEventRun",
    "HookPipeline",
    "HookRecord",
    "HookRun",
    "TurnFacts",
    "hook_ctx",
]
