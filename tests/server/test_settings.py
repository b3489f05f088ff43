"""kernel.yaml's `server:` section (issue 11 §3) and the loop-event → SSE mapping (§2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel.agent.loop import LoopEvent
from agentkernel.config import ServerSettings, load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.errors import ConfigError
from agentkernel.server.events import stream_event
from agentkernel.server.serving import ServeRefused, check_binding
from tests.conftest import write_kernel_yaml


def test_the_section_is_optional_with_defaults(tmp_path: Path) -> None:
    assert load_kernel_config(write_kernel_yaml(tmp_path)).server == ServerSettings()


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("tokens: {not-a-hash: alice}", "server.tokens: expected a mapping of a token's SHA-256"),
        (f"tokens: {{{'a' * 64}: 'two words'}}", "server.tokens: expected a mapping of a token's SHA-256"),
        ("token: s3cret", "server.token: the token never sits in YAML"),
        ("max_message_chars: 0", "server.max_message_chars: expected an integer >= 1, got 0"),
        ("shutdown_grace_secs: -1", "server.shutdown_grace_secs: expected a number of seconds >= 0, got -1"),
        (
            "max_running_turns_per_user: 0",
            "server.max_running_turns_per_user: expected an integer >= 1, got 0",
        ),
        (
            "max_running_tool_runs_per_user: 0",
            "server.max_running_tool_runs_per_user: expected an integer >= 1, got 0",
        ),
        ("tool_run_token_budget: 0", "server.tool_run_token_budget: expected a number of tokens >= 1, got 0"),
        (
            "max_mcp_sessions_per_user: 1.5",
            "server.max_mcp_sessions_per_user: expected an integer >= 1, got 1.5",
        ),
        ("mcp_session_idle_secs: 0", "server.mcp_session_idle_secs: expected a number of seconds > 0"),
        (
            "mcp_session_idle_secs: .inf",
            "server.mcp_session_idle_secs: expected a number of seconds > 0, at most",
        ),
        (
            "max_completion_messages: 0",
            "server.max_completion_messages: expected an integer >= 1, got 0",
        ),
        (
            "max_completion_history_bytes: -1",
            "server.max_completion_history_bytes: expected an integer >= 0, got -1",
        ),
        ("turn_lease_secs: 0", "server.turn_lease_secs: expected a number of seconds >= 0.1, at most 3600"),
        ("turn_lease_secs: .inf", "server.turn_lease_secs: expected a number of seconds >= 0.1"),
        *(
            (
                f"requests_per_user_per_sec: {value}",
                "server.requests_per_user_per_sec: expected a number of requests > 0, at most 1000000, "
                f"or null for no limit, got {shown}",
            )
            for value, shown in (
                ("0", "0"),
                ("-5", "-5"),
                (".inf", "inf"),
                ("fast", "'fast'"),
                ("true", "True"),
            )
        ),
        ("request_burst_per_user: 0", "server.request_burst_per_user: expected an integer >= 1, got 0"),
        ("request_burst_per_user: 2.5", "server.request_burst_per_user: expected an integer >= 1, got 2.5"),
        ("request_burst_per_user: null", "server.request_burst_per_user: expected an integer >= 1, got None"),
        ("port: 80", "server.port: unknown field (known: tokens, max_message_chars"),
        ("operators: alice", "server.operators: expected a list of user ids"),
        ("operators: [alice, alice]", "server.operators: expected a list of user ids (1-128 of letters"),
        (
            f"tokens: {{{'a' * 64}: alice}}\n  operators: [alice, bob]",
            "server.operators[1]: 'bob' is no user of server.tokens (its users: alice)",
        ),
        (
            "operators: [alice]",
            "server.operators[0]: 'alice' is no user of server.tokens (none is set: the one user is local)",
        ),
    ],
)
def test_mistakes_name_the_field(tmp_path: Path, section: str, expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_kernel_config(write_kernel_yaml(tmp_path, f"server:\n  {section}\n"))
    assert expected in str(raised.value)


def test_the_request_rate_is_a_number_or_null_for_no_limit(tmp_path: Path) -> None:
    def loaded(section: str) -> ServerSettings:
        return load_kernel_config(write_kernel_yaml(tmp_path, f"server:\n  {section}\n")).server

    default = ServerSettings()
    assert (default.requests_per_user_per_sec, default.request_burst_per_user) == (50.0, 200)
    rate = loaded("requests_per_user_per_sec: 3").requests_per_user_per_sec
    assert rate == 3.0 and isinstance(rate, float)
    assert loaded("requests_per_user_per_sec: 0.25").requests_per_user_per_sec == 0.25
    assert loaded("requests_per_user_per_sec: null").requests_per_user_per_sec is None
    assert loaded("request_burst_per_user: 1").request_burst_per_user == 1


def test_a_token_pasted_as_a_key_is_never_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_kernel_config(write_kernel_yaml(tmp_path, "server:\n  tokens: {pasted-token-value: alice}\n"))
    assert "pasted-token-value" not in str(raised.value)


def test_tokens_are_looked_up_by_their_hash(tmp_path: Path) -> None:
    text = f"server:\n  tokens: {{{token_hash('t0k')}: alice}}\n  max_message_chars: 5\n"
    settings = load_kernel_config(write_kernel_yaml(tmp_path, text)).server
    assert settings.user_of("t0k") == "alice" and settings.user_of(token_hash("t0k")) is None
    assert settings.max_message_chars == 5


def test_operators_are_users_of_the_tokens(tmp_path: Path) -> None:
    text = f"server:\n  tokens: {{{token_hash('a')}: alice, {token_hash('b')}: bob}}\n  operators: [bob]\n"
    assert load_kernel_config(write_kernel_yaml(tmp_path, text)).server.operators == ("bob",)


def test_only_loopback_without_tokens() -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.1.2.3"):
        check_binding(host, ServerSettings())
    for host in ("0.0.0.0", "192.168.1.5", "::", "example.org"):
        with pytest.raises(ServeRefused, match=r"no server\.tokens"):
            check_binding(host, ServerSettings())
    check_binding("0.0.0.0", ServerSettings(tokens={token_hash("t"): "alice"}))


def test_loop_events_map_to_the_documented_sse_types() -> None:
    def shown(kind: str, data: dict[str, object]) -> tuple[str, object] | None:
        event = stream_event(LoopEvent(kind, data))  # type: ignore[arg-type]
        return None if event is None else (event.type, event.data)

    assert shown("answer", {"content": "hi", "streamed": True}) == (
        "reply",
        {"content": "hi", "streamed": True},
    )
    assert shown("end", {"reason": "blocked"}) == ("done", {"reason": "blocked"})
    assert shown("tool_call", {"id": "1", "name": "t", "arguments": "{bad"}) == (
        "tool_call",
        {"id": "1", "tool": "t", "args": "{bad"},
    )
    assert shown("visual", {"tool": "t", "block": {"type": "text", "text": "x"}}) is None
    assert shown("warning", {"tool": "t", "message": "m"}) == ("warning", {"tool": "t", "message": "m"})
    frame = stream_event(LoopEvent("token", {"text": "a\nb"}))
    assert frame is not None and frame.frame() == b'event: token\ndata: {"text": "a\\nb"}\n\n'
