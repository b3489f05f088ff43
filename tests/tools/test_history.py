"""get_tool_result's record in the store: what one process records another reads (S16.4, issue 27 item 5).

Two histories on one file stand for two server processes (each has its own
connections); the whole server with `--workers 2` is tests/server/test_workers.py's.
"""

from __future__ import annotations

from pathlib import Path

from agentkernel.identity import Caller
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.results import ToolResult


def test_a_result_recorded_through_one_history_is_read_through_another_on_the_same_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tool_results.db"
    one, other = ToolResultHistory(path, per_tool=2), ToolResultHistory(path, per_tool=2)
    alice, bob = Caller(user_id="alice", session_id="s"), Caller(user_id="bob", session_id="s")
    try:
        for n in range(3):
            one.record(
                alice, "t", ToolResult(content=str(n), data={"n": n}, visual=[{"type": "text", "text": "v"}])
            )
        latest = other.get(alice, "t")
        assert latest is not None and latest.for_script() == {
            "content": "2",
            "success": True,
            "data": {"n": 2},
            "visual": [{"type": "text", "text": "v"}],
        }
        assert [r.content for r in (other.get(alice, "t", 1),) if r] == ["1"]
        assert other.get(alice, "t", 2) is None  # per_tool: 2
        assert other.get(bob, "t") is None
        other.forget_session("alice", "s")
        assert one.get(alice, "t") is None
    finally:
        one.close()
        other.close()


def test_a_failed_result_keeps_its_error(tmp_path: Path) -> None:
    history = ToolResultHistory(tmp_path / "tool_results.db")
    caller = Caller(user_id="u", session_id="s")
    try:
        history.record(caller, "t", ToolResult.failure("it broke"))
        found = history.get(caller, "t")
        assert found is not None and (found.success, found.error, found.content) == (
            False,
            "it broke",
            "it broke",
        )
    finally:
        history.close()
