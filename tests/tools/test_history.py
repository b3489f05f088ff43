"""get_tool_result's record in the store: what one process records another reads (S16.4, issue 27 item 5).

Two histories on one file (or database) stand for two server processes (each
has its own connections); the whole server with `--workers 2` is
tests/server/test_workers.py's. Each test runs on the file and on PostgreSQL
(kernel.yaml `store.url`, S27.2, tests/pg.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel.identity import Caller
from agentkernel.services.tool_results_pg import PostgresToolResults
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.results import ToolResult


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the results live: a tool_results.db file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "tool_results.db")
    return str(request.getfixturevalue("pg_url"))


def history_on(where: str, per_tool: int = 20) -> ToolResultHistory:
    """A history on that file, or on that database as the kernel makes it with `store.url`."""
    if not where.startswith("postgresql://"):
        return ToolResultHistory(Path(where), per_tool=per_tool)

    def open_store() -> PostgresToolResults:
        return PostgresToolResults(where, per_tool=per_tool, sessions=1000)

    return ToolResultHistory(per_tool=per_tool, open_store=open_store, shown="the store database")


def test_a_result_recorded_through_one_history_is_read_through_another_on_the_same_file(
    where: str,
) -> None:
    one, other = history_on(where, per_tool=2), history_on(where, per_tool=2)
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


def test_a_failed_result_keeps_its_error(where: str) -> None:
    history = history_on(where)
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
