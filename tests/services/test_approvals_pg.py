"""Approvals copied from an embedded project's message store into PostgreSQL (`store migrate`, S27.2).

The SQLite rows are written through the real SQLite store, copied in one
transaction, and read back through the PostgreSQL store: the same rows, the
rules' ids kept (and new ones after them), and decision URLs already sent
still deciding once, the install's secret having moved with them.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from agentkernel.config import load_kernel_config
from agentkernel.config.kernel_yaml import KernelConfig
from agentkernel.errors import AgentKernelError
from agentkernel.services.approval_tokens import USED
from agentkernel.services.approval_values import DENIED, PendingApproval
from agentkernel.services.approvals import Approvals, TokenRefused
from agentkernel.services.approvals_pg import PostgresApprovals, copy_from_sqlite
from agentkernel.services.postgres import StoreUnavailable
from tests.conftest import write_kernel_yaml


def pending(call_id: str, user_id: str = "alice", **changes: object) -> PendingApproval:
    fields: dict[str, object] = {
        "run_id": "r1",
        "call_id": call_id,
        "session_id": "s1",
        "user_id": user_id,
        "template": "assistant",
        "tool": "send_invoice",
        "args": {"to": "bob@example.com"},
        "question": "send it?",
        "origin": "llm",
        "timeout_secs": 3600,
    }
    fields.update(changes)
    return PendingApproval(**fields)  # type: ignore[arg-type]


@pytest.fixture
def config(tmp_path: Path) -> KernelConfig:
    return load_kernel_config(write_kernel_yaml(tmp_path))


def copy(config: KernelConfig, pg_url: str) -> dict[str, int]:
    with PostgresApprovals(pg_url):  # the tables made, as the migration command makes them first
        pass
    with psycopg.connect(pg_url) as conn, conn.transaction():
        return copy_from_sqlite(config, conn)


def test_every_approval_rule_and_used_token_is_copied_and_a_url_sent_before_still_decides_once(
    config: KernelConfig, pg_url: str
) -> None:
    with Approvals(config.messages_db) as embedded:
        embedded.ask(pending("c1", approvers=("bob",)))
        embedded.ask(pending("c2"))
        embedded.ask(pending("c3"))
        embedded.decide("r1", "c1", "bob", "approve", remember=True)
        embedded.redeem(embedded.decision_token("r1", "c2", "deny"), reason="no")
        gone = embedded.add_rule("alice", "old_tool", "assistant")
        kept = embedded.add_rule("carol", "a_tool", "t")
        assert embedded.delete_rule("alice", gone.id)
        sent = embedded.decision_token("r1", "c3", "deny")
        before = embedded.get_many([("r1", c) for c in ("c1", "c2", "c3")])
        rules = embedded.rules_of("alice") + embedded.rules_of("carol")
    assert copy(config, pg_url) == {
        "approvals": 3,
        "approval_approvers": 1,
        "approval_rules": 2,
        "approval_tokens": 1,
        "approval_secret": 1,
    }
    with PostgresApprovals(pg_url) as moved:
        assert moved.get_many([("r1", c) for c in ("c1", "c2", "c3")]) == before
        assert moved.rules_of("alice") + moved.rules_of("carol") == rules
        assert [a.call_id for a in moved.pending_for("bob")] == []
        assert moved.redeem(sent).status == DENIED  # signed by the file's secret, now the database's
        with pytest.raises(TokenRefused) as replay:
            moved.redeem(sent)
        assert replay.value.reason == USED
        assert moved.add_rule("dave", "b_tool", "t").id > kept.id  # ids only increase


def test_a_second_copy_into_the_same_database_is_refused_naming_the_table(
    config: KernelConfig, pg_url: str
) -> None:
    with Approvals(config.messages_db) as embedded:
        embedded.ask(pending("c1"))
    copy(config, pg_url)
    with pytest.raises(AgentKernelError, match="table approvals already holds rows"):
        copy(config, pg_url)
    with PostgresApprovals(pg_url) as moved:
        assert len(moved.pending_of_run("r1")) == 1  # the refused copy left nothing half-written


def test_a_project_without_a_message_store_or_without_approvals_copies_nothing(
    config: KernelConfig, pg_url: str
) -> None:
    assert copy(config, pg_url) == {}
    config.messages_db.parent.mkdir(parents=True)
    sqlite3.connect(config.messages_db).close()  # a message store whose approvals were never opened
    assert copy(config, pg_url) == {}


def test_approvals_a_newer_kernel_wrote_are_refused_naming_the_file_and_the_versions(
    config: KernelConfig, pg_url: str
) -> None:
    with Approvals(config.messages_db):
        pass
    with closing(sqlite3.connect(config.messages_db)) as conn, conn:
        conn.execute("UPDATE approvals_schema SET version = 9")
    with pytest.raises(
        AgentKernelError, match=r"messages.db: the approvals have schema version 9, .* version 1"
    ):
        copy(config, pg_url)


def test_a_decision_waits_for_a_row_locked_elsewhere_at_most_the_busy_timeout(pg_url: str) -> None:
    with PostgresApprovals(pg_url, busy_timeout_secs=0.2) as store:
        store.ask(pending("c1"))
        with psycopg.connect(pg_url) as other, other.transaction():  # another process deciding, stuck
            other.execute("SELECT 1 FROM approvals WHERE call_id = 'c1' FOR UPDATE")
            with pytest.raises(StoreUnavailable, match="lock timeout"):
                store.decide("r1", "c1", "alice", "approve")
        assert store.decide("r1", "c1", "alice", "approve").decided_by == "alice"
