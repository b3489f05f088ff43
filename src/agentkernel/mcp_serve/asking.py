"""Asking the person behind an MCP client about a tool call that needs approval (S24.4): elicitation.

Our MCP server hands each `tools/call` an `ElicitingAsker` (tools/dispatch.py
`Asker`). When the call needs a person (its tool's `approval: always`, or a
`before_tool_call` hook's `ask`):

- a rule the user made (`remember`) lets it through, asking nobody;
- a client that declared the `elicitation` capability (form mode, MCP
  2025-06-18 and later), on a connection that can carry a request back to
  it, is asked: the approval is recorded pending in the store first (so it
  is audited, listed by `GET /v1/approvals` and told to the sinks like any
  other), then `elicitation/create` shows the question, the tool and its
  arguments with a form of `approve` (boolean) and `reason` (string). The
  answer is the decision of the caller's user, made with the store's
  atomic decide; a decision made meanwhile elsewhere (the API, a decision
  URL) or the approval's expiry wins when it comes first, and the question
  to the client is withdrawn;
- a client of the 2026-07-28 protocol that declared `elicitation` is asked
  the same question in an `input_required` result instead (the call ends
  there, its approval pending in the store); it retries the call with the
  answer and the `requestState` naming that approval (`answered`), which
  must be its own user's, about the same tool and arguments;
- any other client cannot be asked: the call is denied at once, its result
  saying why and how to approve it. Never a wait.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentkernel.agent.approval_gate import ApprovalGate
from agentkernel.identity import Caller
from agentkernel.services.approval_values import Approval
from agentkernel.tools.dispatch import Decision, Vetted

Context = ServerRequestContext[Any, Any]
MAX_SHOWN_ARGS_CHARS = 4000  # of a call's arguments as JSON in the question; the rest is cut, saying so
MAX_REASON_CHARS = 2000  # of a reason the client gives, as the API's decisions are bounded
DECLINED = "declined by the MCP client"
CANCELLED = "the MCP client dismissed the question without deciding"
APPROVED_HERE = "approved through the MCP client"
WITHDRAWN = "the MCP client cancelled the call before anyone decided"
INPUT_KEY = "approval"  # the question's key in an `input_required` result, and its answer's on the retry
STATE_PREFIX = "agentkernel-approval "  # a retry's `requestState`: this, the run id, a space, the call id
CHANGED = "the call's arguments are not those the person was asked about"
WAITING = "denied: not run yet: the MCP client is asked first (input_required)"

FORM: dict[str, Any] = {  # elicitation forms are flat: primitives only
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Run the tool call as shown.",
        },
        "reason": {
            "type": "string",
            "title": "Reason",
            "description": "Why not (the model reads it), or a note for the record.",
            "maxLength": MAX_REASON_CHARS,
        },
    },
    "required": ["approve"],
}


class ElicitingAsker:
    """Asks one `tools/call`'s client, as the module docstring says."""

    def __init__(self, gate: ApprovalGate, ctx: Context, tasks: TaskGroup | None = None) -> None:
        self._gate = gate
        self._ctx = ctx
        self._tasks = tasks  # the request's own: the question ends with it, even if the call outlives it
        self.input_required: types.InputRequiredResult | None = None  # the call's answer, when set

    async def __call__(self, vetted: Vetted, caller: Caller) -> Decision:
        ruled = await anyio.to_thread.run_sync(self._gate.ruled, vetted, caller)
        if ruled is not None:
            return ruled
        why = unaskable(self._ctx) if caller.user_id is not None else "the call has no user to ask"
        if why is not None:
            return Decision(False, reason=cannot_ask(vetted.spec.name, why))
        assert caller.user_id is not None
        call_id = vetted.call.id or f"call_{uuid.uuid4().hex[:12]}"
        vetted = replace(vetted, call=replace(vetted.call, id=call_id))
        asked = await anyio.to_thread.run_sync(self._gate.ask, vetted, caller, f"call-{uuid.uuid4()}")
        if asked.decision is not None:
            return asked.decision
        assert asked.approval is not None
        if self._ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            self.input_required = input_required(asked.approval)
            return Decision(False, reason=WAITING)
        return await self._first(asked.approval, caller.user_id)

    async def _first(self, approval: Approval, user: str) -> Decision:
        """The client's answer or the store's decision (made elsewhere, or expiry), whichever comes first.

        Asked on the request's `tasks` when given: a call run to its end
        whatever happens to its request (server/tool_runs.py) would not hear
        the request cancelled; the question, asked there, does.
        """
        if self._tasks is None:
            return await self._asked(approval, user)
        done = anyio.Event()
        decided: list[Decision] = []

        async def asking() -> None:
            try:
                decided.append(await self._asked(approval, user))
            finally:
                done.set()

        self._tasks.start_soon(asking)
        await done.wait()
        return decided[0] if decided else Decision(False, reason=f"denied: {WITHDRAWN}")

    async def _asked(self, approval: Approval, user: str) -> Decision:
        """`_race`; a call cancelled meanwhile denies its approval, so none is left pending with nobody
        waiting."""
        try:
            return await self._race(approval, user)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._gate.settle, approval, user, False, WITHDRAWN)
            raise

    async def _race(self, approval: Approval, user: str) -> Decision:
        decided: list[Decision] = []
        async with anyio.create_task_group() as group:

            async def from_client() -> None:
                decided.append(await self._from_client(approval, user))
                group.cancel_scope.cancel()

            async def from_store() -> None:
                found = await self._gate.wait(approval, asyncio.Event())  # never set: cancelled instead
                if found is not None:
                    decided.append(found)
                group.cancel_scope.cancel()

            group.start_soon(from_client)
            group.start_soon(from_store)
        return decided[0]

    async def _from_client(self, approval: Approval, user: str) -> Decision:
        try:
            answer = await self._ctx.session.elicit_form(
                question_of(approval), FORM, related_request_id=self._ctx.request_id
            )
        except Exception as exc:  # the client failed or went away: denied, and recorded so
            approved, reason = False, f"the MCP client could not be asked: {type(exc).__name__}: {exc}"
        else:
            approved, reason = answer_of(answer)
        with anyio.CancelScope(shield=True):  # once the answer is written, it is what the call gets
            decision = await anyio.to_thread.run_sync(self._gate.settle, approval, user, approved, reason)
        return decision


class AnsweredAsker:
    """A retried call's asker (2026-07-28): the decision its client's answer made, if the call is the one
    the person was asked about."""

    input_required: types.InputRequiredResult | None = None

    def __init__(self, approval: Approval, decision: Decision) -> None:
        self._approval = approval
        self._decision = decision

    async def __call__(self, vetted: Vetted, caller: Caller) -> Decision:
        args = vetted.call.args if isinstance(vetted.call.args, dict) else {"value": vetted.call.args}
        if args != self._approval.args:
            return Decision(False, reason=f"denied: {CHANGED}")
        return self._decision


def answered(
    gate: ApprovalGate, found: Approval | None, tool: str, user: str, responses: Any
) -> AnsweredAsker | None:
    """The asker of a retried call whose `requestState` named `found`: the decision the client's answer
    made as its user's, if it was the first (a retry sent twice, or one after a decision made elsewhere,
    is denied: an answer runs the call at most once); None when `found` is no question of `user`'s
    about `tool` from an MCP client (blocking: the store)."""
    if found is None or found.user_id != user or found.tool != tool or found.origin != "mcp_client":
        return None
    answer = responses.get(INPUT_KEY) if isinstance(responses, dict) else None
    if isinstance(answer, types.ElicitResult):
        approved, reason = answer_of(answer)
    else:
        approved, reason = False, "the MCP client retried the call without an answer"
    return AnsweredAsker(found, gate.settle(found, user, approved, reason, once=True))


def state_ids(state: str) -> tuple[str, str] | None:
    """The (run id, call id) a retry's `requestState` names; None for anything else."""
    if not state.startswith(STATE_PREFIX):
        return None
    parts = state[len(STATE_PREFIX) :].split(" ")
    return (parts[0], parts[1]) if len(parts) == 2 and all(parts) else None


def input_required(approval: Approval) -> types.InputRequiredResult:
    """The question as a 2026-07-28 client is asked it: one elicitation form, and the state to retry with."""
    form = types.ElicitRequestFormParams(message=question_of(approval), requested_schema=FORM)
    return types.InputRequiredResult(
        input_requests={INPUT_KEY: types.ElicitRequest(params=form)},
        request_state=f"{STATE_PREFIX}{approval.run_id} {approval.call_id}",
    )


def unaskable(ctx: Context) -> str | None:
    """Why this request's client cannot be asked through elicitation; None when it can."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS  # asked in the result: no channel back needed
    if not modern and not ctx.session.can_send_request:
        return "this connection cannot carry a request back to the client (server.mcp_stateless is on)"
    if elicitation is None:
        return _UNDECLARED
    if elicitation.form is None and elicitation.url is not None:
        return "it supports elicitation in URL mode only, and the question is a form"
    return None


_UNDECLARED = "it did not declare the `elicitation` capability (MCP 2025-06-18 and later)"


def cannot_ask(tool: str, why: str) -> str:
    """The reason a call is denied when its client cannot be asked: why, and how to approve it."""
    return (
        f"denied: it needs a person's approval, and this MCP client cannot be asked: {why}. To run it, "
        "call it from an MCP client that supports elicitation (it is asked there), or make a rule: "
        f"approve one call of {tool!r} with `remember: true` (the page, `agentkernel chat`, or "
        "POST /v1/runs/{run}/approvals/{call}), and its calls in this template need nobody from then on"
    )


def question_of(approval: Approval) -> str:
    """What the client shows: the question, the tool, its template and its arguments (cut if long)."""
    args = json.dumps(approval.args, ensure_ascii=False, indent=2, sort_keys=True)
    if len(args) > MAX_SHOWN_ARGS_CHARS:
        more = len(args) - MAX_SHOWN_ARGS_CHARS
        args = f"{args[:MAX_SHOWN_ARGS_CHARS]}\n… ({more} more characters not shown)"
    where = f" (template {approval.template!r})" if approval.template else ""
    return f"{approval.question}\n\nTool: {approval.tool}{where}\nArguments:\n{args}"


def answer_of(answer: types.ElicitResult) -> tuple[bool, str]:
    """The client's answer as (approved, reason): only `accept` with `approve` true approves."""
    content = answer.content or {}
    given = content.get("reason")
    reason = given.strip()[:MAX_REASON_CHARS] if isinstance(given, str) else ""
    if answer.action == "accept" and content.get("approve") is True:
        return True, reason or APPROVED_HERE
    if answer.action == "cancel":
        return False, reason or CANCELLED
    return False, reason or DECLINED


__all__ = [
    "FORM",
    "AnsweredAsker",
    "ElicitingAsker",
    "answer_of",
    "answered",
    "cannot_ask",
    "input_required",
    "question_of",
    "state_ids",
    "unaskable",
]
