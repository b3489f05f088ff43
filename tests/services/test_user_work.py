"""The per-user work counter (user_work.py): a cap per kind, refused before work starts, freed at its end."""

from __future__ import annotations

import pytest

from agentkernel.services.user_work import Cap, TooMuchWork, UserWork

RUNS = Cap("tool runs", "server.max_running_tool_runs_per_user", 2, "wait for one to end")
TURNS = Cap("turns", "server.max_running_turns_per_user", 1, "wait")


class Refused(TooMuchWork):
    """A route's own kind of refusal (TooManyTurns, TooManyToolRuns)."""


def test_past_the_cap_the_refusal_names_the_setting_and_counts_are_per_user_and_kind() -> None:
    work = UserWork()
    work.start("alice", RUNS)
    work.start("alice", RUNS)
    with pytest.raises(Refused) as refused:
        work.start("alice", RUNS, Refused)
    assert str(refused.value) == (
        "user 'alice' has 2 tool runs running, the most server.max_running_tool_runs_per_user (2) allows; "
        "wait for one to end"
    )
    assert (refused.value.running, refused.value.limit) == (2, 2)
    work.start("bob", RUNS)  # another user's count is their own
    work.start("alice", TURNS)  # and another kind's
    work.end("alice", RUNS)
    work.start("alice", RUNS)
    assert (work.running("alice", RUNS), work.running("bob", RUNS), work.running("alice", TURNS)) == (2, 1, 1)


def test_held_frees_its_slot_however_the_block_ends() -> None:
    work = UserWork()
    with pytest.raises(ValueError), work.held("alice", TURNS):
        raise ValueError("the work failed")
    with work.held("alice", TURNS), pytest.raises(TooMuchWork):
        work.start("alice", TURNS)
    assert work.running("alice", TURNS) == 0
