"""Approvals (S24.4, S24.6): decide a call waiting for a person, list the ones waiting, and the rules.

`POST /v1/runs/{run_id}/approvals/{call_id}` decides: the session's owner,
or a user the tool's `approvers:` names; anyone else gets 404, as for a
call that does not exist. A call decided already, or past its timeout, is
409 (of two deciders at once exactly one wins: the store decides in one
transaction). An `edit`'s arguments are checked against the tool's
`parameters` first (422 naming the field). The run waiting on it, on
whichever process, sees the decision within a second and goes on.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from agentkernel.server.identity import Parts, User
from agentkernel.server.parts import ServerParts
from agentkernel.server.problems import CALLER, documented
from agentkernel.services.approval_values import EDIT, Approval, ApprovalClosed, ApprovalNotFound, BadDecision

router = APIRouter(tags=["approvals"], responses=documented(*CALLER))

MAX_REASON_CHARS = 2000
MOST_LISTED = 100
_ID = r"^[A-Za-z0-9_.:-]{1,200}$"


class DecisionBody(BaseModel):
    """A person's decision on a call waiting for one."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny", "edit"]
    reason: str | None = Field(None, max_length=MAX_REASON_CHARS, description="what the LLM is told")
    args: dict[str, Any] | None = Field(None, description="`edit`: the arguments to run the call with")
    remember: bool = Field(False, description="`approve`: approve this tool in this template from now on")


@router.post("/v1/runs/{run_id}/approvals/{call_id}", responses=documented(404, 409, 422))
async def decide(
    run_id: Annotated[str, Path(pattern=_ID)],
    call_id: Annotated[str, Path(pattern=_ID)],
    body: DecisionBody,
    user: User,
    parts: Parts,
) -> dict[str, Any]:
    """Decide a call: `approve` (with `remember`, a rule for this tool in this template), `deny` with a
    `reason` the LLM sees, or `edit` with new `args` (validated). The approval as decided."""
    decided = await asyncio.to_thread(_decide, parts, run_id, call_id, user, body)
    return decided.to_json()


def _decide(parts: ServerParts, run_id: str, call_id: str, user: str, body: DecisionBody) -> Approval:
    store = parts.kernel.approvals()
    found = store.get(run_id, call_id)
    if found is None or not found.may_decide(user):
        raise HTTPException(404, str(ApprovalNotFound(run_id, call_id)))
    if body.decision == EDIT:
        problem = (
            "args: required for an edit"
            if body.args is None
            else parts.kernel.edit_problem(found.tool, body.args)
        )
        if problem is not None:
            raise HTTPException(422, f"body.{problem}")
    try:
        return store.decide(run_id, call_id, user, body.decision, body.reason, body.args, body.remember)
    except ApprovalNotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except ApprovalClosed as exc:
        raise HTTPException(409, str(exc)) from exc
    except BadDecision as exc:
        raise HTTPException(422, f"body: {exc}") from exc


@router.get("/v1/approvals")
async def pending(user: User, parts: Parts) -> dict[str, Any]:
    """`{approvals: [...]}`: the calls waiting for the caller's decision (theirs, or naming them among
    a tool's `approvers:`), newest first, at most 100."""
    found = await asyncio.to_thread(parts.kernel.approvals().pending_for, user, MOST_LISTED)
    return {"approvals": [approval.to_json() for approval in found]}


@router.get("/v1/approval-rules")
async def rules(user: User, parts: Parts) -> dict[str, Any]:
    """`{rules: [{id, tool, template, created_at, …}]}`: the caller's standing approvals (`remember`)."""
    found = await asyncio.to_thread(parts.kernel.approvals().rules_of, user)
    return {"rules": [rule.to_json() for rule in found]}


@router.delete(
    "/v1/approval-rules/{rule_id}", status_code=204, response_class=Response, responses=documented(404)
)
async def revoke(rule_id: Annotated[int, Path(ge=1, le=2**63 - 1)], user: User, parts: Parts) -> Response:
    """Revoke one of the caller's rules: that tool asks again from the next call."""
    if not await asyncio.to_thread(parts.kernel.approvals().delete_rule, user, rule_id):
        raise HTTPException(404, f"no approval rule {rule_id}")
    return Response(status_code=204)


__all__ = ["router"]
