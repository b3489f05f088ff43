"""A hook case's expectations against what the call decided: each one broken, as `field: expected …, got …`.

The call's verdict is read as the loop reads it (`HookEventRun`): the
notice a run would show, the reply, the suppression, the message the LLM
would see, the messages injected; for the tool-call events the deny's
reason as the LLM gets it, the question asked, the args the tool runs
with, the result the LLM sees, the contents the LLM is sent; `result` is
the value the function returned, as it is; a failed call is one whose
record has an `error` (a throw, a limit, a verdict with a part ignored).
"""

from __future__ import annotations

import json

from agentkernel.agent.hooks import HookEventRun
from agentkernel.testing.hook_cases import HookCase
from agentkernel.types import JSONValue
from agentkernel.util.short_text import shown_value

SHOWN_CHARS = 160  # how much of a value a failure line shows


def _shown(value: JSONValue) -> str:
    """A string quoted, any other value as its JSON (`true`, `{"role": …}`), both cut to SHOWN_CHARS."""
    if value is None:
        return "none"
    if isinstance(value, str):
        return shown_value(value, SHOWN_CHARS)
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _errors(run: HookEventRun) -> str:
    return "; ".join(record.error for record in run.records if record.error is not None)


def _notices(run: HookEventRun) -> list[str]:
    for outcome in (run.before, run.tool_call, run.tool_result, run.llm_call):
        if outcome is not None:
            return outcome.notices
    return run.notices


def _tool_decided(run: HookEventRun, key: str) -> JSONValue:
    """What a tool-call event decided for `key` (hook_cases.VERDICTS): a value, or None for none."""
    if run.tool_call is not None:
        verdicts = run.tool_call
        if key == "replace_args":
            return verdicts.args if verdicts.replaced else None
        return verdicts.deny if key == "deny" else verdicts.ask
    if run.tool_result is not None:
        return run.tool_result.result if run.tool_result.replaced else None
    assert run.llm_call is not None  # the event's own verdicts only (hook_cases.VERDICTS)
    if key == "deny":
        return run.llm_call.deny
    contents = run.llm_call.contents
    return None if contents is None else list(contents)


def _decided(case: HookCase, run: HookEventRun, key: str) -> JSONValue:
    """What the call decided for the verdict field `key`, in the form a case states it."""
    before = run.before
    if key == "notice":
        notices = _notices(run)
        return notices[0] if notices else None
    if before is None:
        return _tool_decided(run, key)
    if key == "reply":
        return before.reply
    if key == "suppress":
        return before.suppressed
    if key == "inject":
        return list(before.inject)
    replaced = before.message != case.given.message
    return before.message if replaced else None  # replace_message


def _verdict_failures(case: HookCase, run: HookEventRun) -> list[str]:
    found: list[str] = []
    for key, wanted in case.expect.checks.items():
        if key in ("error_contains", "result"):
            continue
        got = _decided(case, run, key)
        if key in ("replace_message", "replace_result") and isinstance(wanted, str) and isinstance(got, dict):
            got = got.get("content")  # a text expected: the text the LLM would see
        elif key == "replace_result" and isinstance(wanted, dict) and isinstance(got, dict):
            got = {field: got.get(field) for field in wanted}  # the fields the case states
        if got != wanted:
            found.append(f"{key}: expected {_shown(wanted)}, got {_shown(got)}")
    return found


def hook_mismatches(case: HookCase, run: HookEventRun) -> list[str]:
    """Each expectation of `case` the call broke; a hook that took no part in the event breaks them all."""
    if not run.handled:
        return [f"the hook takes no part in {case.event}: its script defines no {case.event} function"]
    errors = _errors(run)
    found: list[str] = []
    if run.failed == case.expect.success:
        detail = f" ({errors})" if errors else ""
        found.append(
            f"success: expected {str(case.expect.success).lower()}, got {str(not run.failed).lower()}"
            + detail
        )
    checks = case.expect.checks
    if "error_contains" in checks and str(checks["error_contains"]) not in errors:
        found.append(
            f"error_contains: expected {_shown(checks['error_contains'])} in the error, "
            f"got {_shown(errors) if errors else 'no error'}"
        )
    if "result" in checks:
        call = run.records[0]
        got = call.result if call.error is None else f"an error: {call.error}"
        if call.error is not None or got != checks["result"]:
            found.append(f"result: expected {_shown(checks['result'])}, got {_shown(got)}")
    return found + _verdict_failures(case, run)


__all__ = ["hook_mismatches"]
