"""`usage()` and the quota refusal in scripts and hooks (S26.3), JS and Rhai, through the real provider stack.

Each test runs a script tool through the kernel's one dispatch path as a
user, against the scripted LLM on 127.0.0.1 (each answer costs 10 input and
5 output tokens); the ledger and the quotas are the kernel's own.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.services.quotas import rfc3339
from agentkernel.types import JSONObject, JSONValue
from tests.conftest import ToolFactory, write_kernel_yaml
from tests.fakes import FakeLLMServer, Reply
from tests.helpers.probes import ENGINES, probe_source

QUOTAS = """
quotas:
  default: {calls_per_day: 2, tokens_per_month: 1000}
  users: {carol: {calls_per_day: null}}
"""


def kernel_of(project: Path, server: FakeLLMServer) -> Kernel:
    llm = f"llm:\n  base_url: {server.base_url}\n  model: m\n  max_retries: 0\n"
    return Kernel(load_kernel_config(write_kernel_yaml(project, llm + QUOTAS)))


def run_as(kernel: Kernel, tool: str, user: str) -> JSONValue:
    """The probe's value (or the error it caught), run as `user`."""
    result = kernel.run_tool(tool, {}, kernel.caller(user_id=user))
    assert result.success, result.error
    assert isinstance(result.data, dict), result
    return result.data.get("value", result.data.get("error"))


def tomorrow() -> str:
    return rfc3339(datetime.combine(datetime.now(UTC).date() + timedelta(days=1), datetime.min.time(), UTC))


@pytest.mark.parametrize("engine", ENGINES)
def test_llm_throws_a_catchable_quota_exhausted_once_the_users_calls_are_spent(
    project: Path, make_tool: ToolFactory, engine: str
) -> None:
    with FakeLLMServer() as server:
        server.add(Reply(text="one"), Reply(text="two"), Reply(text="bob's"))
        make_tool("asks", probe_source(engine, 'llm("hi")'), ext=engine)
        with kernel_of(project, server) as kernel:
            assert run_as(kernel, "asks", "alice") == "one"
            assert run_as(kernel, "asks", "alice") == "two"
            refused = run_as(kernel, "asks", "alice")
            assert run_as(kernel, "asks", "bob") == "bob's"  # another user's quota is their own
    assert refused == (f"quota exhausted: calls_per_day for user alice: 2 of 2 used; resets at {tomorrow()}")
    assert len(server.requests) == 3  # the refused call never reached the LLM


@pytest.mark.parametrize("engine", ENGINES)
def test_usage_gives_the_callers_own_figures_and_quotas(
    project: Path, make_tool: ToolFactory, engine: str
) -> None:
    with FakeLLMServer() as server:
        server.add(Reply(text="one"), Reply(text="other"))
        make_tool("asks", probe_source(engine, 'llm("hi")'), ext=engine)
        make_tool("usage_of", probe_source(engine, "usage()"), ext=engine)
        with kernel_of(project, server) as kernel:
            fresh = run_as(kernel, "usage_of", "alice")
            run_as(kernel, "asks", "alice")
            run_as(kernel, "asks", "bob")
            mine = run_as(kernel, "usage_of", "alice")
            lifted = run_as(kernel, "usage_of", "carol")
    assert isinstance(fresh, dict) and isinstance(mine, dict)
    nothing = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "tokens": 0}
    assert fresh["today"] == nothing and fresh["month"] == nothing
    month_reset = fresh["quotas"][1]["resets_at"]  # type: ignore[index,call-overload]
    assert isinstance(month_reset, str) and month_reset.endswith("-01T00:00:00Z")
    figures = {"calls": 1, "input_tokens": 10, "output_tokens": 5, "tokens": 15}
    assert mine["today"] == figures and mine["month"] == figures  # bob's call is not alice's
    assert mine["quotas"] == [
        {
            "name": "calls_per_day",
            "template": None,
            "limit": 2,
            "used": 1,
            "remaining": 1,
            "resets_at": tomorrow(),
        },
        {
            "name": "tokens_per_month",
            "template": None,
            "limit": 1000,
            "used": 15,
            "remaining": 985,
            "resets_at": month_reset,
        },
    ]
    assert isinstance(lifted, dict)
    assert json.dumps(lifted["quotas"]).count('"name"') == 1  # calls_per_day lifted for carol
    assert "tokens_per_month" in json.dumps(lifted["quotas"])


HOOKS = {
    ".js": """
function before_user_message(ctx, msg) {
    const calls = usage().quotas.find((q) => q.name === "calls_per_day");
    if (calls.remaining === 0) { return { reply: `no LLM until ${calls.resets_at}` }; }
    return { notice: `${calls.remaining} calls left` };
}
""",
    ".rhai": """
fn before_user_message(ctx, msg) {
    let calls = usage().quotas[0];
    if calls.remaining == 0 { return #{ reply: `no LLM until ${calls.resets_at}` }; }
    #{ notice: `${calls.remaining} calls left` }
}
""",
}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_hook_reads_usage_to_answer_before_the_quota_refuses(
    project: Path, make_tool: ToolFactory, engine: str
) -> None:
    hooks = project / "config" / "scripts" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    (hooks / f"thrift{engine}").write_text(HOOKS[engine], encoding="utf-8")
    (hooks / "thrift.yaml").write_text(f"kind: script_hook\nname: thrift\nscript: thrift{engine}\n")
    message: JSONObject = {"role": "user", "content": "hi"}
    with FakeLLMServer() as server:
        server.add(Reply(text="one"), Reply(text="two"))
        make_tool("asks", probe_source(engine, 'llm("hi")'), ext=engine)
        with kernel_of(project, server) as kernel:
            alice = kernel.caller(user_id="alice", session_id="s-1")
            fresh = kernel.run_hooks("thrift", message, alice).before
            for _ in range(2):
                run_as(kernel, "asks", "alice")
            spent = kernel.run_hooks("thrift", message, alice).before
    assert (fresh.notices, fresh.reply) == (["2 calls left"], None)
    assert spent.reply == f"no LLM until {tomorrow()}"
