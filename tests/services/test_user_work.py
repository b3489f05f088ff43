"""A per-user cap's refusal (user_work.py): it names the user, how many run, the setting and what to do."""

from __future__ import annotations

from agentkernel.services.user_work import Cap, TooMuchWork

RUNS = Cap("tool runs", "server.max_running_tool_runs_per_user", 2, "wait for one to end")


def test_the_refusal_names_the_setting_its_limit_and_how_many_run() -> None:
    refused = TooMuchWork("alice", RUNS, 2)
    assert str(refused) == (
        "user 'alice' has 2 tool runs running, the most server.max_running_tool_runs_per_user (2) allows; "
        "wait for one to end"
    )
    assert (refused.running, refused.limit, refused.cap) == (2, 2, RUNS)
