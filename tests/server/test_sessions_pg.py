"""The session directory on PostgreSQL (S27.2): `copy_from_sqlite`, which moves a project's sessions over.

The directory's behaviour shared with the sessions file is tested on both
databases in tests/server/test_sessions.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from agentkernel.config import KernelConfig, load_kernel_config
from agentkernel.errors import AgentKernelError
from agentkernel.server.sessions import SessionDirectory, sessions_file
from agentkernel.server.sessions_pg import PostgresSessionDirectory, copy_from_sqlite


@pytest.fixture
def config(project: Path) -> KernelConfig:
    return load_kernel_config(project / "config" / "kernel.yaml")


def test_copy_from_sqlite_moves_every_session_with_its_owner_and_title(
    config: KernelConfig, pg_url: str
) -> None:
    with SessionDirectory(sessions_file(config)) as directory:
        first = directory.create("alice", "tester")
        directory.name(first.id, "Plan my week")
        second = directory.create("alice", "other")
        bobs = directory.create("bob", "tester")
        expected = directory.of_user("alice")
    with PostgresSessionDirectory(pg_url) as moved:
        with psycopg.connect(pg_url) as target, target.transaction():
            assert copy_from_sqlite(config, target) == {"sessions": 3}
        assert moved.of_user("alice") == expected and [s.id for s in expected] == [first.id, second.id]
        titled = moved.owned(first.id, "alice")
        assert titled is not None and titled.title == "Plan my week"
        assert moved.owned(bobs.id, "alice") is None and moved.owned(bobs.id, "bob") == bobs
        refused = pytest.raises(AgentKernelError, match="table sessions already holds rows")
        with psycopg.connect(pg_url) as target, target.transaction(), refused:
            copy_from_sqlite(config, target)


def test_copy_from_sqlite_of_no_file_and_of_a_file_from_before_titles(
    config: KernelConfig, pg_url: str
) -> None:
    with PostgresSessionDirectory(pg_url) as moved, psycopg.connect(pg_url) as target:
        assert copy_from_sqlite(config, target) == {}
        path = sessions_file(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        old = sqlite3.connect(path)  # schema version 1, as a release before titles wrote it
        with old:
            old.execute(
                "CREATE TABLE sessions (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, template TEXT NOT NULL, "
                "created_at TEXT NOT NULL)"
            )
            old.execute("INSERT INTO sessions VALUES ('s1', 'alice', 'tester', '2026-01-01T00:00:00+00:00')")
        old.close()
        assert copy_from_sqlite(config, target) == {"sessions": 1}
        target.commit()
        assert [s.to_json() for s in moved.of_user("alice")] == [
            {"id": "s1", "template": "tester", "created_at": "2026-01-01T00:00:00+00:00", "title": ""}
        ]
