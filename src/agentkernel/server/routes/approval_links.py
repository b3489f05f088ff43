"""Decision URLs (S24.4): the links an approval notice carries, where a person decides without a login.

`GET /v1/approval-links/{token}` shows a small page: the tool, its
arguments, the question, and one button that POSTs the form back to the
same URL. A GET never decides: link previewers and mail scanners fetch
links. `POST /v1/approval-links/{token}` redeems the token: that one
decision (approve or deny, with the form's optional `reason` for a deny)
of that one call, once, until the approval expires. The token is the
credential: these two routes take no bearer token (server/identity.py
serves every other route only to a caller it knows).

Answers: 200 the page, or the decision made; 404 a token this install did
not sign, or too long to be one (refused before any work; nothing leaks);
409 a token used already, or an approval decided meanwhile; 410 past its
expiry. An HTML page for a browser (its `Accept` names `text/html`), JSON
for a program (`Accept: application/json`, or no `text/html`). Every answer is `no-store`, sends no referrer,
and is held by a Content-Security-Policy with no script at all.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import html
import json
from typing import Annotated, Any, Final
from urllib.parse import parse_qs

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from agentkernel.server.failures import error_body
from agentkernel.server.identity import Parts
from agentkernel.server.parts import request_id
from agentkernel.server.routes.approvals import MAX_REASON_CHARS
from agentkernel.services.approval_tokens import EXPIRED, MAX_TOKEN_CHARS, USED, DecisionToken
from agentkernel.services.approval_values import (
    APPROVE,
    DENY,
    Approval,
    ApprovalClosed,
    ApprovalNotFound,
    ApprovalStore,
)
from agentkernel.services.approvals import TokenRefused

PATH: Final = "/v1/approval-links/{token}"
MAX_FORM_BYTES: Final = 4 * MAX_REASON_CHARS + 200  # a reason, percent-encoded, and a field name
_STYLE: Final = (
    "body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;color:#222}"
    "pre{background:#f4f4f4;padding:.75rem;overflow:auto;white-space:pre-wrap;word-break:break-all}"
    "textarea{width:100%;box-sizing:border-box}button{font-size:1rem;padding:.5rem 1.5rem;margin-top:1rem}"
)
_STYLE_HASH: Final = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
CONTENT_SECURITY_POLICY: Final = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
HEADERS: Final = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}
NO_SUCH_LINK: Final = "no such decision link: it was not made by this server, or was changed on the way"
_REFUSED_STATUS: Final = {USED: 409, EXPIRED: 410}
_PAGE_OR_JSON: Final[dict[str, dict[str, Any]]] = {"text/html": {}, "application/json": {}}


def _documented() -> dict[int | str, dict[str, Any]]:
    """The answers, each as a page or JSON (module docstring)."""
    when = {
        200: "the page (GET), or the decision made (POST)",
        404: "a token this server did not sign, or its approval is gone",
        409: "the token was used, or the approval decided meanwhile",
        410: "past the approval's expiry: the call was denied",
        413: "a form over the size a reason needs",
        422: "a body that is neither a form nor a JSON object, or a reason too long",
    }
    return {status: {"description": text, "content": _PAGE_OR_JSON} for status, text in when.items()}


router = APIRouter(tags=["approvals"])
Token = Annotated[str, Path(description="the token a notice's approve_url or deny_url ends with")]


class LinkAnswer(Exception):
    """How a decision URL is answered when it decides nothing: a status and a text for the person."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


@router.get(
    PATH,
    response_class=HTMLResponse,
    responses=_documented(),
    openapi_extra={"security": []},
)
async def show(token: Token, request: Request, parts: Parts) -> Response:
    """The page of a decision URL: the call and one button making its decision. Decides nothing."""
    try:
        if len(token) > MAX_TOKEN_CHARS:
            raise LinkAnswer(404, NO_SUCH_LINK)
        granted, approval = await asyncio.to_thread(_granted, parts.kernel.approvals(), token)
    except LinkAnswer as refused:
        return _refusal(request, refused)
    if _wants_json(request):
        return _json(200, {"decision": granted.decision, "approval": approval.to_json()})
    return _page(200, _ASK_TITLE[granted.decision], _call_html(approval) + _form(granted.decision))


@router.post(
    PATH,
    response_class=HTMLResponse,
    responses=_documented(),
    openapi_extra={"security": []},
)
async def redeem(token: Token, request: Request, parts: Parts) -> Response:
    """Make the decision the token grants, once: `reason` (form field or JSON) goes with a deny."""
    try:
        if len(token) > MAX_TOKEN_CHARS:
            raise LinkAnswer(404, NO_SUCH_LINK)
        reason = _reason(request.headers.get("content-type", ""), await _body(request))
        decided = await asyncio.to_thread(_redeem, parts.kernel.approvals(), token, reason)
    except LinkAnswer as refused:
        return _refusal(request, refused)
    if _wants_json(request):
        return _json(200, decided.to_json())
    done = "approved" if decided.decision == APPROVE else "denied"
    return _page(200, f"The call was {done}", _call_html(decided) + _p(f"Decided: {done}. Thank you."))


# -- the store's answers, as LinkAnswers ----------------------------------------------------------------


def _granted(store: ApprovalStore, token: str) -> tuple[DecisionToken, Approval]:
    try:
        granted, approval = store.granted(token)
    except (TokenRefused, ApprovalNotFound) as exc:
        raise _refused(exc) from exc
    if not approval.pending:
        raise LinkAnswer(409, str(ApprovalClosed(approval)))
    return granted, approval


def _redeem(store: ApprovalStore, token: str, reason: str | None) -> Approval:
    try:
        granted, _ = store.granted(token)
        return store.redeem(token, reason=reason if granted.decision == DENY else None)
    except (TokenRefused, ApprovalNotFound) as exc:
        raise _refused(exc) from exc
    except ApprovalClosed as exc:
        raise LinkAnswer(409, str(exc)) from exc


def _refused(exc: TokenRefused | ApprovalNotFound) -> LinkAnswer:
    """A forged token, or one whose approval is gone: 404, the same words; used 409; expired 410."""
    status = _REFUSED_STATUS.get(exc.reason, 404) if isinstance(exc, TokenRefused) else 404
    return LinkAnswer(status, NO_SUCH_LINK if status == 404 else _refusal_text(status, str(exc)))


def _refusal_text(status: int, detail: str) -> str:
    if status == 410:
        return f"This decision link has expired: the call was denied for want of a decision ({detail})."
    return f"This decision link cannot be used again ({detail})."


# -- the request ----------------------------------------------------------------------------------------


async def _body(request: Request) -> bytes:
    """The body, at most MAX_FORM_BYTES (a longer one is refused unread past that)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise LinkAnswer(
                413,
                f"the form is over {MAX_FORM_BYTES} bytes: a reason has at most "
                f"{MAX_REASON_CHARS} characters",
            )
    return body


def _reason(content_type: str, body: bytes) -> str | None:
    """The optional `reason`: a form field, or a JSON object's; LinkAnswer 422 when unreadable or long."""
    if not body.strip():
        return None
    try:
        if content_type.split(";")[0].strip().lower() == "application/json":
            found = json.loads(body)
            reason = found.get("reason") if isinstance(found, dict) else None
        else:
            reason = parse_qs(body.decode(), max_num_fields=4).get("reason", [None])[0]
    except (ValueError, UnicodeDecodeError) as exc:
        raise LinkAnswer(422, f"body: not a form nor a JSON object ({exc})") from exc
    if reason is not None and not isinstance(reason, str):
        raise LinkAnswer(422, "body.reason: expected a string")
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise LinkAnswer(422, f"body.reason: at most {MAX_REASON_CHARS} characters, got {len(reason)}")
    return None if reason is None else reason.strip() or None


def _wants_json(request: Request) -> bool:
    """JSON unless the client is a browser: its `Accept` names text/html (and not application/json)."""
    accept = request.headers.get("accept", "").lower()
    return "application/json" in accept or "text/html" not in accept


# -- the answers ----------------------------------------------------------------------------------------

_ASK_TITLE: Final = {APPROVE: "Approve this tool call?", DENY: "Deny this tool call?"}


def _refusal(request: Request, refused: LinkAnswer) -> Response:
    if _wants_json(request):
        return _json(refused.status, error_body(refused.status, refused.text, request_id(request)))
    return _page(refused.status, "This link decides nothing", _p(refused.text))


def _json(status: int, body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=HEADERS)


def _page(status: int, title: str, body: str) -> HTMLResponse:
    text = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="robots" content="noindex"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(text, status_code=status, headers=HEADERS)


def _p(text: str) -> str:
    return f"<p>{html.escape(text)}</p>"


def _call_html(approval: Approval) -> str:
    args = json.dumps(approval.args, indent=2, ensure_ascii=False)
    return (
        _p(approval.question)
        + f"<p>Tool: <strong>{html.escape(approval.tool)}</strong></p>"
        + f"<pre>{html.escape(args)}</pre>"
    )


def _form(decision: str) -> str:
    """The one button, POSTing to this same URL; a deny has a field for the reason the LLM is told."""
    reason = (
        f'<p><label for="reason">Reason (the agent is told):</label><br>'
        f'<textarea id="reason" name="reason" rows="3" maxlength="{MAX_REASON_CHARS}"></textarea></p>'
        if decision == DENY
        else ""
    )
    label = "Approve" if decision == APPROVE else "Deny"
    return f'<form method="post">{reason}<button type="submit">{label}</button></form>'


__all__ = ["PATH", "router"]
