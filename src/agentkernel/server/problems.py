"""The error bodies as OpenAPI models, so `/openapi.json` says what each route really answers.

failures.py gives every error one shape, `{detail, request_id}` (a 422 also
`errors`); FastAPI by default documents only 200 and its own 422 body,
`{detail: [...]}`, which the server never sends. A client generated from the
spec, or a checker such as schemathesis, would then trust a wrong shape and
miss the 401, 404, 409 and 413 answers. Each router documents the statuses
every route of it may give (`documented`), each route adds its own.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, Field


class ErrorObject(BaseModel):
    """OpenAI's error object, so OpenAI SDKs show the message (failures.error_body)."""

    message: str
    type: str = Field(description="authentication_error, not_found_error, invalid_request_error, …")
    param: str | None = Field(default=None, description="the field at fault (OpenAI-compatible routes)")
    code: str | None = Field(default=None, description="what failed, e.g. llm_refused (a failed turn)")


class Problem(BaseModel):
    """Every error's body (docs/server.md, "Errors")."""

    detail: str = Field(description="what went wrong, naming the field or the thing at fault")
    request_id: str = Field(description="also in the X-Request-Id header; a 500 is logged under it")
    error: ErrorObject


class FieldProblem(BaseModel):
    field: str = Field(description="where: `body.content`, `query.limit`, `body` for the body as a whole")
    message: str


class InvalidRequest(Problem):
    """A 422: the request does not fit the schema, or names what does not load (a template, a chart)."""

    errors: list[FieldProblem] | None = Field(
        default=None, description="each field at fault, when the request does not fit the schema"
    )


_WHEN: Final = {
    400: "(the OpenAI-compatible routes) a request the agent cannot honour, or that does not fit the schema, "
    "`error.param` naming the field; or the LLM refused the turn's request",
    401: "tokens are configured and the request has none, or an unknown one",
    403: "no tokens are configured and the client is not on loopback; or (GET /v1/usage) a user "
    "server.operators does not name asks for another user's usage",
    404: "unknown, or not the caller's",
    409: "the session is still answering its previous message",
    413: "the body is over server.max_body_bytes, the message over server.max_message_chars, or a chat "
    "completion's conversation over server.max_completion_messages or "
    "server.max_completion_history_bytes; `detail` names the setting",
    429: "the caller sends requests faster than server.requests_per_user_per_sec allows, after a burst of "
    "server.request_burst_per_user (`Retry-After` says in how many seconds to send again); or "
    "has as much work running as a per-user cap allows (server.max_running_turns_per_user, "
    "server.max_running_tool_runs_per_user); `detail` names the setting and says how many run; or a quota "
    "of kernel.yaml's `quotas:` is spent (`detail` names it, the use and the reset; `quota` has them)",
    422: "malformed JSON, a missing field or a wrong type; `detail` names the field",
    500: "a fault of the server; never a traceback, the log has it under the request id",
    502: "the turn ended in error without an answer: the LLM is unreachable or failing",
    503: "the turn ended in error without an answer: no LLM is configured",
}
CALLER: Final = (401, 403, 422, 429, 500)  # what any route that checks the caller may answer


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """FastAPI's `responses=` for these statuses, each with its body model and when it happens."""
    return {
        status: {"model": InvalidRequest if status == 422 else Problem, "description": _WHEN[status]}
        for status in statuses
    }


__all__ = ["CALLER", "ErrorObject", "FieldProblem", "InvalidRequest", "Problem", "documented"]
