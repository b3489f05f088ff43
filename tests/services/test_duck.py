"""One DuckDB file used by several processes (`serve --workers N`): they take turns, within the call's budget.

DuckDB lets one process at a time open a file; the pool hands a file over
when another process asks (services/file_turns.py). Each test runs a real
second Python process on the same folder, taking turns by `flock` and by
the store database's advisory locks (services/file_turns_pg.py, S27.2:
what machines sharing the folder use); the calls through the helpers
are tests/helpers/test_duck.py's, the whole server's tests/server/test_workers.py's.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel.services.duck import DuckError, DuckService, DuckSettings
from agentkernel.services.file_turns_pg import PgFileTurns

WAIT_SECS = 60.0  # an upper bound for the other process, never a measured time
WRITES = 40

OTHER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentkernel.services.duck import DuckService
    from agentkernel.services.file_turns import FileTurn

    root, what, url = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    if url:
        from agentkernel.services.file_turns_pg import PgFileTurns
        turn_of = PgFileTurns(url, root.resolve())
    else:
        turn_of = FileTurn
    if what == "hold":  # a process stuck with the file's turn: it never gives it up
        turn = turn_of(root.resolve() / "shared.duckdb")
        assert turn.acquire(float("inf"))
        print("held", flush=True)
        sys.stdin.read()
        raise SystemExit(0)
    service = DuckService(root, turn_of=turn_of)
    service.execute("shared.duckdb", "CREATE TABLE IF NOT EXISTS t (who VARCHAR, n INTEGER)")
    for n in range(int(what)):
        service.execute("shared.duckdb", "INSERT INTO t VALUES ('other', ?)", [n])
        service.query("shared.duckdb", "SELECT count(*) FROM t", 1)
    print("done", flush=True)
    sys.stdin.read()  # the file stays in this process's pool, idle, until the test ends it
    service.close()
    """
)


@pytest.fixture(params=["flock", "postgres"])
def turns(request: pytest.FixtureRequest) -> str:
    """How processes take turns: "" (flock, one machine) or the store database's URL (advisory locks)."""
    return "" if request.param == "flock" else str(request.getfixturevalue("pg_url"))


def service_on(root: Path, turns: str, settings: DuckSettings | None = None) -> DuckService:
    """This process's service on `root`, taking turns as `turns` says."""
    if not turns:
        return DuckService(root, settings)
    return DuckService(root, settings, PgFileTurns(turns, root.resolve()))


@pytest.fixture
def other_process(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for process in started:
            process.kill()
            process.wait()


def start_other(
    started: list[subprocess.Popen[str]], root: Path, what: str, turns: str
) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", OTHER, str(root), what, turns],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(process)
    return process


def first_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line:
        assert process.stderr is not None
        pytest.fail(f"the other process ended: {process.wait(WAIT_SECS)} {process.stderr.read()}")
    return line


def test_two_processes_write_one_database_at_once_and_every_write_lands(
    tmp_path: Path, other_process: list[subprocess.Popen[str]], turns: str
) -> None:
    service = service_on(tmp_path, turns)
    try:
        service.execute("shared.duckdb", "CREATE TABLE IF NOT EXISTS t (who VARCHAR, n INTEGER)")
        other = start_other(other_process, tmp_path, str(WRITES), turns)
        for n in range(WRITES):
            service.execute("shared.duckdb", "INSERT INTO t VALUES ('this', ?)", [n])
        assert first_line(other) == "done"
        counted = service.query(
            "shared.duckdb", "SELECT who, count(*) AS c FROM t GROUP BY who ORDER BY who", 10
        )
        assert counted["rows"] == [{"who": "other", "c": WRITES}, {"who": "this", "c": WRITES}]
    finally:
        service.close()


def test_a_file_left_open_and_idle_by_another_process_is_given_up_when_asked(
    tmp_path: Path, other_process: list[subprocess.Popen[str]], turns: str
) -> None:
    other = start_other(other_process, tmp_path, "1", turns)
    assert first_line(other) == "done"  # the other process keeps the file open in its pool
    service = service_on(tmp_path, turns)
    try:
        assert service.query("shared.duckdb", "SELECT count(*) AS c FROM t", 1)["rows"] == [{"c": 1}]
        assert service.execute("shared.duckdb", "INSERT INTO t VALUES ('this', 1)") == 1
    finally:
        service.close()


def test_the_wait_for_a_file_another_process_holds_ends_with_the_calls_budget(
    tmp_path: Path, other_process: list[subprocess.Popen[str]], turns: str
) -> None:
    holder = start_other(other_process, tmp_path, "hold", turns)
    assert first_line(holder) == "held"
    service = service_on(tmp_path, turns, DuckSettings(query_timeout_secs=0.2))
    try:
        with pytest.raises(DuckError) as caught:
            service.execute("shared.duckdb", "CREATE TABLE t (n INTEGER)")
        assert str(caught.value) == (
            "gave up waiting for this database, in use by another server process: "
            "duckdb.query_timeout_secs ran out"
        )
        assert service.pool.open_files == ()
    finally:
        service.close()


def test_a_holder_killed_with_9_gives_its_turn_up_with_it(
    tmp_path: Path, other_process: list[subprocess.Popen[str]], turns: str
) -> None:
    holder = start_other(other_process, tmp_path, "hold", turns)
    assert first_line(holder) == "held"
    holder.kill()
    holder.wait()
    service = service_on(tmp_path, turns, DuckSettings(query_timeout_secs=WAIT_SECS))
    try:
        assert service.execute("shared.duckdb", "CREATE TABLE t (n INTEGER)") == 0
    finally:
        service.close()
