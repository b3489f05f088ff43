"""A throw-away PostgreSQL for the PostgreSQL stores' tests (S27.2): Debian's `postgresql`, never a mock.

`pg_cluster` (one a session) runs `initdb` and `pg_ctl` from the newest
/usr/lib/postgresql/*/bin in a temp folder, listening on a free 127.0.0.1
port and on a socket in that folder, with trust authentication and no
fsync (nothing here must outlive the session); `pg_ctl start -w` returns
once the server accepts connections, and `pg_isready` confirms it. As root
(CI), the cluster runs as `nobody` (made if missing), since PostgreSQL
refuses to run as root. Without the binaries the tests FAIL, saying what to install: a
silent skip would let CI pass without ever testing a store.

`pg_url` (one a test) is a fresh database on that cluster, dropped after;
`own_pg` a cluster of the test's own, which it may stop and start again.

Deployments (S27.3): a test runs on `embedded` (the project's files) or
`postgres` (every kernel's stores on PostgreSQL: the test's
`AGENTKERNEL_STORE_URL` is a fresh database of the session's cluster,
inherited by the servers and commands it starts). A test (or module)
marked `across_deployments` runs once on each, in every run of the suite;
`--deployment postgres` runs every other test on PostgreSQL too, tests of
the embedded files' own behaviour (marked `embedded_only`) left out.
Loaded by tests/conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN_GLOB = "/usr/lib/postgresql/*/bin"
UNPRIVILEGED = "nobody"  # who runs the cluster when the tests run as root
SUPERUSER = "postgres"
START_TRIES = 3  # a free port found may be taken before the server binds it
COMMAND_SECS = 120.0
INITDB_OPTIONS = ("--auth=trust", "--encoding=UTF8", "--no-sync")
_numbers = itertools.count(1)
EMBEDDED, POSTGRES = "embedded", "postgres"
DEPLOYMENTS = (EMBEDDED, POSTGRES)
STORE_URL_ENV = "AGENTKERNEL_STORE_URL"


@dataclass(frozen=True)
class Cluster:
    """A running cluster: where it listens, and how to reach its maintenance database."""

    folder: Path
    port: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"


def postgres_bin() -> Path:
    """The newest installed PostgreSQL's bin folder; the test fails (never skips) without one."""
    found = [p for p in Path("/").glob(BIN_GLOB.lstrip("/")) if (p / "initdb").is_file()]
    if not found:
        pytest.fail(
            f"PostgreSQL is not installed (no initdb under {BIN_GLOB}): the PostgreSQL store tests need "
            "Debian's `postgresql` package — `apt-get install postgresql` (.ci/run installs it)",
            pytrace=False,
        )
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)


def cluster_owner() -> str | None:
    """Who runs the cluster: `nobody` (made, as a system user, if the machine has none) when we are
    root, since PostgreSQL refuses to run as root; None (ourselves) otherwise."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", UNPRIVILEGED], check=True, timeout=COMMAND_SECS
        )
    return UNPRIVILEGED


def _as_owner(command: list[str]) -> list[str]:
    owner = cluster_owner()
    return command if owner is None else ["runuser", "-u", owner, "--", *command]


def _run(command: list[str], folder: Path) -> None:
    done = subprocess.run(
        _as_owner(command), cwd=folder, capture_output=True, text=True, timeout=COMMAND_SECS, check=False
    )
    if done.returncode != 0:
        log = folder / "server.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(
            f"{' '.join(command)} failed ({done.returncode}): {done.stderr}{done.stdout}{tail}"
        )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(bin_dir: Path, folder: Path, port: int | None = None) -> int:
    """Start the server on `port` (else a free one); the port it listens on."""
    data = folder / "data"
    for attempt in range(START_TRIES):
        chosen = port or _free_port()
        starting = [
            "-w",
            "-o",
            f"-p {chosen} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            "start",
        ]
        try:
            _run(
                [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(data.parent / "server.log"), *starting],
                folder,
            )
        except RuntimeError:
            if attempt == START_TRIES - 1:
                raise
            continue
        _run([str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(chosen), "-t", "60"], folder)
        return chosen
    raise AssertionError("unreachable")


@dataclass
class OwnCluster:
    """A cluster a test owns (`own_pg`): stopped and started again on its port, to see what survives."""

    bin_dir: Path
    folder: Path
    port: int = 0

    @property
    def cluster(self) -> Cluster:
        return Cluster(self.folder, self.port)

    def start(self) -> None:
        """Start the server (on its first port again after a `stop`), returning once it accepts."""
        self.port = _start(self.bin_dir, self.folder, self.port or None)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`immediate`: as a crash would, no shutdown checkpoint)."""
        _run(
            [str(self.bin_dir / "pg_ctl"), "-D", str(self.folder / "data"), "-m", mode, "-w", "stop"],
            self.folder,
        )


@contextmanager
def running_cluster() -> Iterator[OwnCluster]:
    """A new cluster in a temp folder (readable by its owner), running until the block ends."""
    bin_dir = postgres_bin()
    folder = Path(tempfile.mkdtemp(prefix="agentkernel-pg-"))  # in /tmp: `nobody` can reach it
    owner = cluster_owner()
    if owner is not None:
        shutil.chown(folder, owner)
    own = OwnCluster(bin_dir, folder)
    try:
        _run([str(bin_dir / "initdb"), "-D", str(folder / "data"), "-U", SUPERUSER, *INITDB_OPTIONS], folder)
        own.start()
        yield own
    finally:
        if own.port:
            with suppress(RuntimeError):  # already stopped by its test
                own.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A PostgreSQL cluster for the session, in a temp folder, stopped (fast) at the end."""
    with running_cluster() as own:
        yield own.cluster


@pytest.fixture
def own_pg() -> Iterator[OwnCluster]:
    """A cluster of the test's own (its `cluster.url()` the maintenance database), for stopping it."""
    with running_cluster() as own:
        yield own


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--deployment",
        choices=DEPLOYMENTS,
        default=EMBEDDED,
        help="where the kernels under test keep their stores: embedded (the project's SQLite files) or "
        "postgres (a fresh database of the test cluster for each test, as $AGENTKERNEL_STORE_URL)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "embedded_only: a test of the embedded stores' files, deselected under --deployment postgres",
    )
    config.addinivalue_line("markers", "across_deployments: run once on each deployment (embedded, postgres)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "deployment" in metafunc.fixturenames and metafunc.definition.get_closest_marker("across_deployments"):
        only_files = metafunc.definition.get_closest_marker("embedded_only") is not None
        metafunc.parametrize("deployment", (EMBEDDED,) if only_files else DEPLOYMENTS, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--deployment") == EMBEDDED:
        return
    left = [item for item in items if item.get_closest_marker("embedded_only") is not None]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if item.get_closest_marker("embedded_only") is None]


@pytest.fixture(autouse=True)
def deployment(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The deployment the test runs on; under `postgres`, `AGENTKERNEL_STORE_URL` is a fresh database."""
    chosen: str = getattr(request, "param", None) or request.config.getoption("--deployment")
    if chosen == POSTGRES:
        monkeypatch.setenv(STORE_URL_ENV, request.getfixturevalue("pg_url"))
    return chosen


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> Iterator[str]:
    """A fresh, empty database on the session's cluster (its URL), dropped after the test."""
    import psycopg  # only the PostgreSQL tests import it

    name = f"test_{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield pg_cluster.url(name)
    with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


__all__ = [
    "DEPLOYMENTS",
    "Cluster",
    "OwnCluster",
    "cluster_owner",
    "deployment",
    "own_pg",
    "pg_cluster",
    "pg_url",
    "postgres_bin",
    "running_cluster",
]
