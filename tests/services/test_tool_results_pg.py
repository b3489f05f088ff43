"""Tool results copied from an embedded project's tool_results.db into PostgreSQL (`store migrate`, S27.2).

Written through the real SQLite store, copied in one transaction, read back
through the PostgreSQL store: the same results in the same order, the same
sessions in the same least-recently-used order.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from agentkernel.config import load_kernel_config
from agentkernel.config.kernel_yaml import KernelConfig
from agentkernel.errors import AgentKernelError
from agentkernel.identity import Caller
from agentkernel.services.tool_results import FILE_NAME, ToolResultStore
from agentkernel.services.tool_results_pg import WRITE_LOCK, PostgresToolResults, copy_from_sqlite
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.results import ToolResult
from tests.conftest import write_kernel_yaml


@pytest.fixture
def config(tmp_path: Path) -> KernelConfig:
    return load_kernel_config(write_kernel_yaml(tmp_path))


def copy(config: KernelConfig, pg_url: str) -> dict[str, int]:
    with PostgresToolResults(pg_url, per_tool=1, sessions=1):  # the tables made first, as the command does
        pass
    with psycopg.connect(pg_url) as conn, conn.transaction():
        return copy_from_sqlite(config, conn)


def test_every_session_and_result_is_copied_in_its_order(config: KernelConfig, pg_url: str) -> None:
    with ToolResultStore(config.messages_db.with_name(FILE_NAME), per_tool=2, sessions=2) as embedded:
        for n in range(3):
            embedded.record("a", "t", {"n": n, "text": "é"})
        embedded.record("b", "t", {"n": 9})
        embedded.record("a", "u", {"n": 10})  # a used last: b goes first
    assert copy(config, pg_url) == {"tool_result_sessions": 2, "tool_results": 4}
    with PostgresToolResults(pg_url, per_tool=2, sessions=2) as moved:
        assert [moved.get("a", "t", i) for i in range(2)] == [{"n": 2, "text": "é"}, {"n": 1, "text": "é"}]
        moved.record("a", "t", {"n": 3})  # numbered after the copied ones
        assert moved.get("a", "t", 0) == {"n": 3} and moved.get("a", "t", 1) == {"n": 2, "text": "é"}
        moved.record("c", "t", {"n": 11})
        assert moved.get("b", "t", 0) is None and moved.get("a", "u", 0) == {"n": 10}
    with pytest.raises(AgentKernelError, match="table tool_result_sessions already holds rows"):
        copy(config, pg_url)


def test_a_project_without_tool_results_copies_nothing(config: KernelConfig, pg_url: str) -> None:
    assert copy(config, pg_url) == {}


def test_a_record_waits_for_another_writer_at_most_the_busy_timeout_and_the_history_goes_on(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    def open_store() -> PostgresToolResults:
        return PostgresToolResults(pg_url, per_tool=2, sessions=2, busy_timeout_secs=0.2)

    history = ToolResultHistory(open_store=open_store, shown="the store database")
    caller = Caller(user_id="u", session_id="s")
    try:
        with psycopg.connect(pg_url) as other, other.transaction():  # another process's write, stuck
            other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            history.record(caller, "t", ToolResult(content="lost"))
        assert "was not kept for get_tool_result (the store database)" in caplog.text
        assert "lock timeout" in caplog.text
        history.record(caller, "t", ToolResult(content="kept"))
        found = history.get(caller, "t")
        assert found is not None and found.content == "kept"
    finally:
        history.close()
