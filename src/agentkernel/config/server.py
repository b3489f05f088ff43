"""kernel.yaml's `server:` section (S23.6): who may call `agentkernel serve`, and how much they may send.

`tokens` maps the SHA-256 (hex) of a bearer token to a user id: the file
never holds a token itself, so it can sit in a repository and be read by
scripts' authors. `agentkernel token new USER` prints a fresh token and the
line to paste here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentkernel.config.schema import Where, expect, section

TOKEN_HASH = "^[0-9a-f]{64}$"
USER_ID = r"^[A-Za-z0-9_.@-]{1,128}$"
YEAR_SECS = 365 * 24 * 3600
MOST_REQUESTS_PER_SEC = 1_000_000  # finite: a bucket refilled at .inf would compute inf * 0 = nan
LOCAL_USER = "local"  # everyone, when no tokens are configured (the server then binds to loopback only)
TOKEN_HINT = (
    "the token never sits in YAML: `agentkernel token new USER` prints a token "
    "and its SHA-256 line for `tokens`"
)


@dataclass(frozen=True)
class ServerSettings:
    """The `server:` section, validated; every field has a default, so the section may be absent."""

    tokens: Mapping[str, str] = field(default_factory=dict)  # sha256 hex of a bearer token -> user id
    max_message_chars: int = 100_000
    max_body_bytes: int = 8 << 20  # any request body (a tool run's args included); more is 413
    max_completion_messages: int = 1_000  # messages of one chat completion's conversation; more is 413
    max_completion_history_bytes: int = 2 << 20  # UTF-8 text of a completion's earlier messages; more is 413
    max_completion_tools: int = 128  # a chat completion's client-side tools (OpenAI's own cap); more is 400
    max_open_chats: int = 256  # sessions kept open in memory; the least recently used idle ones end
    max_running_turns_per_user: int = 4  # turns answering at once for one user, every route; more is 429
    turn_lease_secs: float = 20.0  # a turn's hold on its session, renewed as it runs; a dead server's lapses
    max_running_tool_runs_per_user: int = 4  # tool runs, MCP calls, continuations at once; more is 429
    work_lease_secs: float = 30.0  # a dead process's tool runs stop counting against their users after this
    max_run_streams_per_user: int = 8  # GET /v1/runs/{id}/events streams one user reads at once; more is 429
    tool_run_token_budget: int = 100_000  # tokens one tool run outside a chat session may spend (S9.2)
    max_mcp_sessions_per_user: int = 32  # handshake-era MCP sessions one user holds open; more is 429
    mcp_session_idle_secs: float = 30 * 60.0  # an MCP session with no request for this long ends
    mcp_stateless: bool = False  # /mcp keeps no session between requests: any server process answers any
    keepalive_secs: float = 15.0  # a comment line on a quiet event stream, so proxies keep it open
    max_stream_backlog_bytes: int = 8 << 20  # events a slow client may lag behind before it is cut off
    shutdown_grace_secs: float = 30.0  # how long Ctrl-C or SIGTERM waits for running turns
    transcript_limit: int = 1_000  # the most records GET /v1/sessions/{id}/messages returns
    continuation_ttl_secs: float = 24 * 3600.0  # how long a table's "more" id answers (S6.3)
    operators: tuple[str, ...] = ()  # users who may read every user's usage (GET /v1/usage, S26.3)
    # requests one token user may send a second, each process (None: no limit); past it 429 (rate_limit.py)
    requests_per_user_per_sec: float | None = 50.0
    request_burst_per_user: int = 200  # requests a user may send at once before the rate holds them

    def user_of(self, token: str) -> str | None:
        """The user a bearer token belongs to; None for a token not configured."""
        return self.tokens.get(token_hash(token))


def token_hash(token: str) -> str:
    """The form a token takes in kernel.yaml: its SHA-256, hex."""
    import hashlib  # (OpenSSL's library) when a token is checked, not to read the settings

    return hashlib.sha256(token.encode()).hexdigest()


SERVER_SCHEMA = section(
    {
        "tokens": {  # the value is never echoed: someone may have pasted a token itself as a key
            "type": "object",
            "propertyNames": {"pattern": TOKEN_HASH},
            "additionalProperties": {"type": "string", "pattern": USER_ID},
            "x-message": "expected a mapping of a token's SHA-256 (64 lowercase hex digits) to a user id "
            "(1-128 of letters, digits, _ . @ -); " + TOKEN_HINT,
        },
        "max_message_chars": expect("an integer >= 1", type="integer", minimum=1),
        "max_body_bytes": expect("an integer >= 1", type="integer", minimum=1),
        "max_completion_messages": expect("an integer >= 1", type="integer", minimum=1),
        "max_completion_history_bytes": expect("an integer >= 0", type="integer", minimum=0),
        "max_completion_tools": expect("an integer >= 0", type="integer", minimum=0),
        "max_open_chats": expect("an integer >= 1", type="integer", minimum=1),
        "max_running_turns_per_user": expect("an integer >= 1", type="integer", minimum=1),
        "turn_lease_secs": expect(
            "a number of seconds >= 0.1, at most 3600", type="number", minimum=0.1, maximum=3600
        ),
        "max_running_tool_runs_per_user": expect("an integer >= 1", type="integer", minimum=1),
        "max_run_streams_per_user": expect("an integer >= 1", type="integer", minimum=1),
        "work_lease_secs": expect(
            "a number of seconds >= 1, at most 3600", type="number", minimum=1, maximum=3600
        ),
        "tool_run_token_budget": expect("a number of tokens >= 1", type="integer", minimum=1),
        "max_mcp_sessions_per_user": expect("an integer >= 1", type="integer", minimum=1),
        "mcp_session_idle_secs": expect(  # finite: the SDK refuses an endless idle timeout
            "a number of seconds > 0, at most 31536000 (a year)",
            type="number",
            exclusiveMinimum=0,
            maximum=YEAR_SECS,
        ),
        "mcp_stateless": expect("true or false", type="boolean"),
        "max_stream_backlog_bytes": expect("an integer >= 1", type="integer", minimum=1),
        "keepalive_secs": expect("a number of seconds > 0", type="number", exclusiveMinimum=0),
        "shutdown_grace_secs": expect("a number of seconds >= 0", type="number", minimum=0),
        "transcript_limit": expect("an integer >= 1", type="integer", minimum=1),
        "continuation_ttl_secs": expect("a number of seconds > 0", type="number", exclusiveMinimum=0),
        "requests_per_user_per_sec": expect(
            f"a number of requests > 0, at most {MOST_REQUESTS_PER_SEC}, or null for no limit",
            type=["number", "null"],
            exclusiveMinimum=0,
            maximum=MOST_REQUESTS_PER_SEC,
        ),
        "request_burst_per_user": expect("an integer >= 1", type="integer", minimum=1),
        "operators": expect(
            "a list of user ids (1-128 of letters, digits, _ . @ -), each once",
            type="array",
            items={"type": "string", "pattern": USER_ID},
            uniqueItems=True,
        ),
    },
    **{"x-refused": dict.fromkeys(("token", "api_key", "password"), TOKEN_HINT)},
)


def server_settings(values: Mapping[str, Any], where: Where) -> ServerSettings:
    seconds = {
        key: float(values.get(key, getattr(ServerSettings, key)))
        for key in (
            "shutdown_grace_secs",
            "keepalive_secs",
            "continuation_ttl_secs",
            "mcp_session_idle_secs",
            "work_lease_secs",
            "turn_lease_secs",
        )
    }
    tokens = dict(values.get("tokens", {}))
    operators = tuple(values.get("operators", ()))
    users = set(tokens.values()) if tokens else {LOCAL_USER}
    for index, name in enumerate(operators):
        if name not in users:
            known = (
                f"its users: {', '.join(sorted(users))}"
                if tokens
                else f"none is set: the one user is {LOCAL_USER}"
            )
            raise where.error(
                ("server", "operators", index), f"{name!r} is no user of server.tokens ({known})"
            )
    rate = values.get("requests_per_user_per_sec", ServerSettings.requests_per_user_per_sec)
    rate = None if rate is None else float(rate)  # YAML's 50 is an int
    return ServerSettings(
        **{**values, "tokens": tokens, "operators": operators, **seconds, "requests_per_user_per_sec": rate}
    )


__all__ = [
    "LOCAL_USER",
    "MOST_REQUESTS_PER_SEC",
    "SERVER_SCHEMA",
    "ServerSettings",
    "server_settings",
    "token_hash",
]
