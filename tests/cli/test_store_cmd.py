"""`agentkernel store` (S27.2): the store database's schemas, and an embedded project copied into it.

On the real PostgreSQL of tests/pg.py; the SQLite side written through the
stores' own classes, the PostgreSQL side read back through theirs.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tests.cli.conftest import cli
from tests.cli.test_usage_cmd import TODAY, spend
from tests.conftest import write_kernel_yaml

PASSWORD = "s3cret-never-shown"


def with_password(url: str) -> str:
    """`url` with a password (the test cluster trusts every local connection, so any password works)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{PASSWORD}@{parts.hostname}:{parts.port}"))


def usage_rows(project: Path, url: str) -> list[dict[str, object]]:
    since = TODAY.replace(day=1).isoformat()
    shown = cli(
        "agentkernel", "usage", "--since", since, "--json", cwd=project, env={"AGENTKERNEL_STORE_URL": url}
    )
    assert shown.returncode == 0, shown.stderr
    rows: list[dict[str, object]] = json.loads(shown.stdout)["rows"]
    return rows


def test_without_a_store_database_the_command_says_how_to_name_one(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path)
    refused = cli("agentkernel", "store", "status", cwd=tmp_path, env={"AGENTKERNEL_STORE_URL": ""})
    assert refused.returncode == 2
    assert "store: {url: postgresql://" in refused.stderr and "$AGENTKERNEL_STORE_URL" in refused.stderr


def test_migrate_brings_the_tables_up_and_status_shows_them_without_the_password(
    tmp_path: Path, pg_url: str
) -> None:
    write_kernel_yaml(tmp_path, f"store: {{url: '{with_password(pg_url)}'}}\n")
    before = cli("agentkernel", "store", "status", cwd=tmp_path)
    assert before.returncode == 0, before.stderr
    assert "the usage ledger: version none" in before.stdout
    migrated = cli("agentkernel", "store", "migrate", cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    after = cli("agentkernel", "store", "status", cwd=tmp_path)
    assert "the usage ledger: version 1 (up to date)" in after.stdout
    every = before.stdout + before.stderr + migrated.stdout + migrated.stderr + after.stdout + after.stderr
    assert PASSWORD not in every and ":***@" in after.stdout


def test_migrate_from_sqlite_copies_the_project_once(tmp_path: Path, pg_url: str) -> None:
    write_kernel_yaml(tmp_path)
    spend(tmp_path)
    embedded = usage_rows(tmp_path, "")
    assert len(embedded) == 2  # ann's and bob's this month
    env = {"AGENTKERNEL_STORE_URL": pg_url}
    copied = cli("agentkernel", "store", "migrate", "--from", "sqlite", cwd=tmp_path, env=env)
    assert copied.returncode == 0, copied.stderr
    assert "usage: 3 rows copied" in copied.stdout  # the row of 45 days ago too
    assert usage_rows(tmp_path, pg_url) == embedded
    again = cli("agentkernel", "store", "migrate", "--from", "sqlite", cwd=tmp_path, env=env)
    assert again.returncode == 1
    assert "table usage already holds rows" in again.stderr
    assert usage_rows(tmp_path, pg_url) == embedded  # nothing doubled


def test_migrate_from_sqlite_copies_the_server_s_sessions_and_sealed_rows(
    tmp_path: Path, pg_url: str
) -> None:
    """sessions.db and the message store's continuations and downloads, read back through the PG stores."""
    from agentkernel.config import load_kernel_config
    from agentkernel.server.continuations import ContinuationStore
    from agentkernel.server.sealed_ids_pg import PostgresContinuationStore
    from agentkernel.server.sessions import SessionDirectory, sessions_file
    from agentkernel.server.sessions_pg import PostgresSessionDirectory

    config = load_kernel_config(write_kernel_yaml(tmp_path))
    with SessionDirectory(sessions_file(config)) as directory:
        session = directory.create("ann", "tester")
    with ContinuationStore(config.messages_db) as pages:
        page = pages.put(owner="ann", tool="t", args={"page": 2}, session_id=session.id)
    copied = cli(
        "agentkernel",
        "store",
        "migrate",
        "--from",
        "sqlite",
        cwd=tmp_path,
        env={"AGENTKERNEL_STORE_URL": pg_url},
    )
    assert copied.returncode == 0, copied.stderr
    assert "sessions: 1 rows copied" in copied.stdout and "continuations: 1 rows copied" in copied.stdout
    status = cli("agentkernel", "store", "status", cwd=tmp_path, env={"AGENTKERNEL_STORE_URL": pg_url})
    assert "the server's sessions: version 1 (up to date)" in status.stdout
    assert "the continuation store: version 1 (up to date)" in status.stdout
    with PostgresSessionDirectory(pg_url) as moved, PostgresContinuationStore(pg_url) as moved_pages:
        assert moved.owned(session.id, "ann") == session
        found = moved_pages.get(page, "ann")
        assert found is not None and found.args == {"page": 2}
