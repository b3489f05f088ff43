"""The DuckDB service (S12): a pool of database files, locked down, one writer per file.

Decisions, and why:

- **One connection per file, a cursor per call.** DuckDB lets a process open
  a file read-write once (a second `connect` with other settings fails), and
  a connection is not thread-safe; `cursor()` gives each call a connection of
  its own to the same database. The pool keeps at most `max_open_files`
  files open and closes the least recently used idle one to make room.
- **One writer per file** (S12.2). DuckDB's MVCC would let two writers race
  and fail with "Conflict on update"; a lock per file (process-wide, keyed
  by the file's real path) makes writers queue instead. Calls whose
  statements are all SELECT/EXPLAIN take no lock: they read a consistent
  snapshot while a writer works, in a READ ONLY transaction, so one that
  writes after all (`SELECT nextval(…)`, `EXPLAIN ANALYZE INSERT …`) fails
  there having changed nothing and runs again as a writer, lock and quota
  check included.
- **Locked down.** Scripts are untrusted and SQL can reach the machine, so
  each database opens with `enable_external_access = false` (no
  `read_csv('/etc/passwd')`, no `COPY … TO`, no ATTACH of files),
  extensions never install or load on their own, and `lock_configuration`
  so no `SET` can undo that. Statement kinds that manage databases or
  extensions (ATTACH, DETACH, LOAD/INSTALL, COPY, EXPORT) are refused before
  they run: `DETACH` of the pooled database would break it for every caller.
- **Nothing hangs.** Waiting for the writer lock and running the SQL share
  one budget: `query_timeout_secs`, or less when the script's own wall-clock
  budget ends sooner; a timer interrupts the query when it is spent.
- **Files stay inside the DuckDB folder** (`paths.data_dir` / `duckdb.dir`):
  relative paths only, no `..`, no symlink out, names ending `.duckdb` or
  `.db`. The folder may not hold the sessions' scratch folders, which
  scripts can write.
- **A quota per file** (`duckdb.max_file_bytes`), checked before each
  statement that may write (services/duck_quota.py).
- **No server paths in errors.** DuckDB's messages name files by their
  absolute path; a script sees them relative to the DuckDB folder, as it
  named them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from agentkernel.config import KernelConfig
from agentkernel.config.sections import DuckSettings
from agentkernel.errors import AgentKernelError
from agentkernel.services.duck_quota import SECTION, QuotaExceeded, check_room, frees_only
from agentkernel.services.duck_values import convert_rows, unique_names
from agentkernel.services.file_turns import FileTurn, Turn, TurnOf
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.short_text import shown_value

SUFFIXES = (".duckdb", ".db")
WATCH_SECS = 0.02  # how often an idle open file is checked for another process waiting for it
MAX_PATH_CHARS = 1024
_MAX_NAME_BYTES = 255

_DATA_STATEMENTS = ("SELECT", "INSERT", "UPDATE", "DELETE", "MERGE_INTO")
_SCHEMA_STATEMENTS = ("CREATE", "CREATE_FUNC", "DROP", "ALTER")
_SESSION_STATEMENTS = ("TRANSACTION", "EXPLAIN", "PRAGMA", "CALL", "SET", "VARIABLE_SET", "ANALYZE", "VACUUM")
_PREPARED_STATEMENTS = ("PREPARE", "EXECUTE")
# everything else (ATTACH, DETACH, LOAD/INSTALL, COPY, EXPORT, …) is refused before it runs
_ALLOWED_STATEMENTS = frozenset(
    getattr(duckdb.StatementType, name)
    for name in (*_DATA_STATEMENTS, *_SCHEMA_STATEMENTS, *_SESSION_STATEMENTS, *_PREPARED_STATEMENTS)
    if hasattr(duckdb.StatementType, name)
)
_READ_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
_COUNTED_STATEMENTS = frozenset(
    getattr(duckdb.StatementType, name)
    for name in ("INSERT", "UPDATE", "DELETE", "MERGE_INTO")
    if hasattr(duckdb.StatementType, name)
)


Params = list[JSONValue] | dict[str, JSONValue] | None  # `?`/`$1` values, or `$name` ones


@dataclass(frozen=True)
class Statement:
    """One statement of a script's SQL: its kind (SELECT, INSERT, …) and its text."""

    kind: duckdb.StatementType
    query: str


class DuckError(AgentKernelError):
    """A DuckDB call that failed; the helper puts its own name in front of the text."""


# -- the writer lock of each file, shared by every pool of the process ------------------------

_WRITE_LOCKS: dict[Path, threading.Lock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _write_lock(path: Path) -> threading.Lock:
    with _WRITE_LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(path, threading.Lock())


# -- the pool -------------------------------------------------------------------------------


class _Database:
    """One open file: its root connection, its turn between processes, its writer lock, its calls."""

    def __init__(self, path: Path, turn: Turn) -> None:
        self.path = path
        self.connection: duckdb.DuckDBPyConnection | None = None  # None while it opens
        self.turn = turn
        self.write_lock = _write_lock(path)
        self.users = 0
        self.handing_over = False  # another process waits: no new call joins, the last one closes it
        self.last_used = time.monotonic()


class DuckPool:
    """Open database files by real path; a cursor per call; a file given up when another process needs it.

    A file is open in one process at a time (services/file_turns.py): the
    pool keeps it open across calls while no other process asks for it; when
    one does, calls already running finish, new ones wait, and the file is
    closed for the other process (a thread notices an idle file is wanted).
    The wait for the file counts in the call's budget.
    """

    def __init__(self, settings: DuckSettings, root: Path | None = None, turn_of: TurnOf = FileTurn) -> None:
        self.max_open = settings.max_open_files
        self.root = root
        self._turn_of = turn_of
        self._config: dict[str, str | bool | int | float | list[str]] = {
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "memory_limit": f"{settings.memory_limit_mb}MB",
            "threads": settings.threads,
            "max_temp_directory_size": f"{settings.max_file_bytes}B",  # spills of big sorts and joins
            "enable_optimistic_write": False,  # an uncommitted write stays out of the file (duck_quota.py)
            "lock_configuration": True,  # last: nothing a script runs can change the above
        }
        self._open: dict[Path, _Database] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a file opened or closed
        self._watching = False

    @property
    def open_files(self) -> tuple[Path, ...]:
        with self._lock:
            return tuple(p for p, db in self._open.items() if db.connection is not None)

    @contextmanager
    def cursor(
        self, path: Path, budget: Budget | None = None
    ) -> Iterator[tuple[duckdb.DuckDBPyConnection, threading.Lock]]:
        """A fresh connection to the file for one call, and the file's writer lock.

        Waiting for the file (another thread opening it, another process
        using it) ends at the budget's deadline with a DuckError.
        """
        database = self._checkout(path, budget or Budget.start(DuckSettings().query_timeout_secs, None))
        try:
            with self._lock:
                assert database.connection is not None
                cursor = database.connection.cursor()
            try:
                yield cursor, database.write_lock
            finally:
                with self._lock:
                    cursor.close()  # rolls back a transaction the call left open
        finally:
            self._checkin(database)

    def _checkout(self, path: Path, budget: Budget) -> _Database:
        with self._changed:
            while True:
                database = self._open.get(path)
                if database is None:
                    self._make_room()
                    database = self._open[path] = _Database(path, self._turn_of(path))
                    break  # this thread opens it, below
                if database.connection is not None and not database.handing_over:
                    if not database.turn.wanted():
                        database.users += 1
                        return database
                    database.handing_over = True  # another process asked: it goes first
                    if database.users == 0:
                        self._give_up(database)
                        continue
                if not self._changed.wait(max(budget.remaining(), 0.0)):
                    raise _gave_up(budget)
        try:
            self._open_file(database, budget)
        except BaseException:
            with self._changed:
                if self._open.get(path) is database:
                    del self._open[path]
                self._changed.notify_all()
            raise
        with self._changed:
            database.users += 1
            self._changed.notify_all()
            self._watch()
        return database

    def _open_file(self, database: _Database, budget: Budget) -> None:
        """Take the file's turn (waiting for another process within the budget), then connect."""
        if not database.turn.acquire(budget.deadline):
            raise _gave_up(budget)
        try:
            connection = self._connect(database.path)
        except BaseException:
            database.turn.release()
            raise
        with self._lock:
            database.connection = connection

    def _checkin(self, database: _Database) -> None:
        with self._changed:
            database.users -= 1
            database.last_used = time.monotonic()
            if database.users == 0 and (database.handing_over or database.turn.wanted()):
                self._give_up(database)

    def _give_up(self, database: _Database) -> None:
        """Close a file and give its turn to whoever waits (the pool's lock held); once is enough."""
        if self._open.get(database.path) is database:
            del self._open[database.path]
        if database.connection is not None:
            database.connection.close()
            database.connection = None
        database.turn.release()
        self._changed.notify_all()

    def _watch(self) -> None:
        """Start the thread that gives up idle files other processes want (the pool's lock held)."""
        if self._watching:
            return
        self._watching = True
        threading.Thread(target=self._watch_loop, name="duckdb-handover", daemon=True).start()

    def _watch_loop(self) -> None:
        """Until no file is open (the last one given up, or the pool closed)."""
        while True:
            time.sleep(WATCH_SECS)
            with self._changed:
                for database in list(self._open.values()):
                    idle = database.users == 0 and database.connection is not None
                    if idle and database.turn.wanted():
                        self._give_up(database)
                if not self._open:
                    self._watching = False
                    return

    def _connect(self, path: Path) -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(str(path), config=self._config)
        except duckdb.Error as exc:
            raise DuckError(f"cannot open the database: {without_root(str(exc), self.root)}") from exc

    def _make_room(self) -> None:
        if len(self._open) < self.max_open:
            return
        idle = [db for db in self._open.values() if db.users == 0 and db.connection is not None]
        if not idle:
            raise DuckError(
                f"too many databases in use at once ({SECTION}.max_open_files = {self.max_open}); try again"
            )
        self._give_up(min(idle, key=lambda db: db.last_used))

    def close(self) -> None:
        """Close every file and give up its turn (the kernel is shutting down), in use or not."""
        with self._changed:
            for database in list(self._open.values()):
                self._give_up(database)


def _gave_up(budget: Budget) -> DuckError:
    return DuckError(
        f"gave up waiting for this database, in use by another server process: {budget.source} ran out"
    )


# -- one call's clock -----------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """When a call must end, and which setting said so (for the error text)."""

    deadline: float
    seconds: float
    source: str

    @classmethod
    def start(cls, query_timeout: float, script_remaining: float | None) -> Budget:
        if script_remaining is not None and script_remaining < query_timeout:
            seconds, source = script_remaining, "the tool's time budget"
        else:
            seconds, source = query_timeout, f"{SECTION}.query_timeout_secs"
        if seconds <= 0:
            raise DuckError(f"no time left ({source} is spent)")
        return cls(time.monotonic() + seconds, seconds, source)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def interrupted(self) -> DuckError:
        seconds = f"{self.seconds:.2f}".rstrip("0").rstrip(".")
        return DuckError(f"query interrupted: {self.source} of {seconds} s ran out")


class _Watchdog:
    """Interrupts a cursor's query when the budget runs out; never touches a later query."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, budget: Budget) -> None:
        self.fired = False
        self._cursor = cursor
        self._done = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(budget.remaining(), 0.0), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()

    def _fire(self) -> None:
        with self._lock:
            if not self._done:
                self.fired = True
                self._cursor.interrupt()


# -- the service ----------------------------------------------------------------------------


class DuckService:
    """`db_execute`, `db_query` and `db_schema` on files under one folder (S12)."""

    def __init__(self, root: Path, settings: DuckSettings | None = None, turn_of: TurnOf = FileTurn) -> None:
        self.settings = settings or DuckSettings()
        self.root = root.resolve()
        self.pool = DuckPool(self.settings, self.root, turn_of)

    @classmethod
    def from_config(cls, config: KernelConfig) -> DuckService:
        """The service for kernel.yaml's `duckdb:` section; its folder is under `paths.data_dir`.

        With `store.url` (S27.2), a file's turn is an advisory lock of the store database, so
        processes on several machines sharing the folder take turns too (file_turns_pg.py)."""
        if config.store.url is None:
            return cls(config.duckdb_dir, config.duckdb)
        from agentkernel.services.file_turns_pg import PgFileTurns  # psycopg: only with a store.url

        root = config.duckdb_dir.resolve()
        return cls(root, config.duckdb, PgFileTurns(config.store.url, root))

    def close(self) -> None:
        self.pool.close()

    # -- files --------------------------------------------------------------------------------

    def locate(self, relative: str, *, create: bool) -> Path:
        """The database file for a relative path, confined to the folder; made on demand if `create`."""
        target = self.root.joinpath(*_check_relative(relative))
        self._check_inside(self._deepest_existing(target))
        if not target.exists():
            if not create:
                raise DuckError("no such database (db_execute creates one)")
            try:
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise DuckError(f"cannot make its folder: {exc.strerror}") from exc
        real = target.resolve()
        self._check_inside(real)
        if real.exists() and not real.is_file():
            raise DuckError("not a database file")
        return real

    def _deepest_existing(self, path: Path) -> Path:
        """The nearest ancestor that exists (or is a symlink, even a dangling one), up to the folder."""
        while path != self.root and not (path.is_symlink() or path.exists()):
            path = path.parent
        return path

    def _check_inside(self, path: Path) -> None:
        if not path.resolve().is_relative_to(self.root):
            raise DuckError("leads outside the DuckDB folder (through a symlink)")

    # -- the three operations -----------------------------------------------------------------

    def execute(
        self, relative: str, sql: str, params: Params = None, *, remaining: float | None = None
    ) -> int:
        """Run the statements with the file's writer lock; rows inserted, updated or deleted."""
        budget = Budget.start(self.settings.query_timeout_secs, remaining)
        statements = self._statements(sql, params)
        file = self.locate(relative, create=True)
        with self.pool.cursor(file, budget) as (cursor, lock), _holding(lock, budget):
            return self._run(cursor, file, statements, params, budget)

    def query(
        self,
        relative: str,
        sql: str,
        limit: int,
        params: Params = None,
        *,
        remaining: float | None = None,
        read_only: bool = False,
    ) -> JSONObject:
        """`{columns, rows, count, has_more}`: at most `limit` rows (capped by `max_rows`).

        SELECT and EXPLAIN statements run beside the file's writer, in a READ
        ONLY transaction: one that writes all the same (`SELECT nextval(…)`,
        `EXPLAIN ANALYZE INSERT …`) fails there having changed nothing, and
        runs again as a writer, with the lock and the quota check. Other
        statements run as a writer at once. `read_only` refuses, before
        anything runs, every statement that is not a SELECT or an EXPLAIN,
        and turns a write found in the transaction into an error.
        """
        budget = Budget.start(self.settings.query_timeout_secs, remaining)
        limit = min(limit, self.settings.max_rows)
        statements = self._statements(sql, params)
        if read_only:
            _refuse_writes(statements)
        file = self.locate(relative, create=False)
        if read_only or all(s.kind in _READ_STATEMENTS for s in statements):
            try:
                return self._query_in(file, statements, params, limit, budget, writer=False)
            except _WroteWhileReading as exc:
                if read_only:
                    raise DuckError(f"read-only: the SQL tried to write ({exc})") from exc
        return self._query_in(file, statements, params, limit, budget, writer=True)

    def _query_in(
        self,
        file: Path,
        statements: Sequence[Statement],
        params: Params,
        limit: int,
        budget: Budget,
        *,
        writer: bool,
    ) -> JSONObject:
        """One run of a query: as the file's writer, or as a reader in a READ ONLY transaction."""
        with self.pool.cursor(file, budget) as (cursor, lock), _holding(lock if writer else None, budget):
            if not writer:
                cursor.execute("BEGIN TRANSACTION READ ONLY")  # closing the cursor rolls it back
            return self._fetch(cursor, file, statements, params, limit, budget, writer=writer)

    def schema(self, relative: str, table: str | None = None, *, remaining: float | None = None) -> str:
        """Tables and views with their columns, as text for people and LLMs."""
        budget = Budget.start(self.settings.query_timeout_secs, remaining)
        file = self.locate(relative, create=False)
        with (
            self.pool.cursor(file, budget) as (cursor, _),
            _Watchdog(cursor, budget) as watchdog,
            _duck_errors(budget, watchdog, self.root),
        ):
            rows = cursor.execute(_SCHEMA_SQL).fetchall()
        return _schema_text(rows, table)

    # -- running SQL --------------------------------------------------------------------------

    def _statements(self, sql: str, params: Params) -> list[Statement]:
        """The statements of `sql`, refusing the kinds scripts may not run."""
        statements = _parse(sql)
        if not statements:
            raise DuckError("no SQL statement")
        if params is not None and len(statements) != 1:
            raise DuckError(f"params need exactly one SQL statement, got {len(statements)}")
        for statement in statements:
            if statement.kind not in _ALLOWED_STATEMENTS:
                kind = statement.kind.name.replace("_", " ")
                raise DuckError(f"{kind} statements are not allowed: {shown_value(statement.query.strip())}")
        return statements

    def _execute(
        self,
        cursor: duckdb.DuckDBPyConnection,
        file: Path,
        statement: Statement,
        params: Params,
        *,
        quota: bool = True,
    ) -> None:
        """Run one statement; one that may grow the file first needs room under its quota.

        `quota=False` is for a READ ONLY transaction, which cannot grow the file.
        """
        if quota and not frees_only([statement.kind]):
            check_room(cursor, file, self.settings.max_file_bytes)
        cursor.execute(statement.query, params)

    def _run(
        self,
        cursor: duckdb.DuckDBPyConnection,
        file: Path,
        statements: Sequence[Statement],
        params: Params,
        budget: Budget,
    ) -> int:
        affected = 0
        with _Watchdog(cursor, budget) as watchdog, _duck_errors(budget, watchdog, self.root):
            for statement in statements:
                self._execute(cursor, file, statement, params)
                if statement.kind in _COUNTED_STATEMENTS:
                    affected += _changed_rows(cursor)
        return affected

    def _fetch(
        self,
        cursor: duckdb.DuckDBPyConnection,
        file: Path,
        statements: Sequence[Statement],
        params: Params,
        limit: int,
        budget: Budget,
        *,
        writer: bool = True,
    ) -> JSONObject:
        with (
            _Watchdog(cursor, budget) as watchdog,
            _duck_errors(budget, watchdog, self.root, reader=not writer),
        ):
            for statement in statements:
                self._execute(cursor, file, statement, params, quota=writer)
            description = cursor.description or []
            raw = cursor.fetchmany(limit + 1) if description else []
        names = unique_names([str(column[0]) for column in description])
        rows = convert_rows(names, [str(column[1]) for column in description], raw[:limit])
        rows, cut = self._within_size(rows)
        return {
            "columns": list[JSONValue](names),
            "rows": list[JSONValue](rows),
            "count": len(rows),
            "has_more": len(raw) > limit or cut,
        }

    def _within_size(self, rows: list[JSONObject]) -> tuple[list[JSONObject], bool]:
        """The leading rows whose JSON text fits `max_result_bytes`, and whether any were cut."""
        cap = self.settings.max_result_bytes
        if len(_json_bytes(rows)) <= cap:
            return rows, False
        total = 2  # the brackets of the list
        for count, row in enumerate(rows):
            total += len(_json_bytes(row)) + 1
            if total > cap:
                if count == 0:
                    raise DuckError(f"row 1 alone is larger than {SECTION}.max_result_bytes ({cap} bytes)")
                return rows[:count], True
        return rows, False


_PARSER: list[duckdb.DuckDBPyConnection] = []  # one in-memory connection, made on first use
_PARSER_LOCK = threading.Lock()


def _parse(sql: str) -> list[Statement]:
    """Split and classify SQL before any file is opened (a connection is not thread-safe)."""
    with _PARSER_LOCK:
        if not _PARSER:
            _PARSER.append(duckdb.connect(":memory:", config={"enable_external_access": False}))
        try:
            return [Statement(s.type, s.query) for s in _PARSER[0].extract_statements(sql)]
        except duckdb.Error as exc:
            raise DuckError(str(exc)) from exc
        except ValueError as exc:  # e.g. UPDATE EXTENSIONS: a kind this client cannot name
            raise DuckError(f"statements of this kind are not allowed ({exc})") from exc


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _changed_rows(cursor: duckdb.DuckDBPyConnection) -> int:
    """The count DuckDB reports, or the number of rows a RETURNING clause gave back."""
    description = cursor.description or []
    if [column[0] for column in description] == ["Count"]:
        row = cursor.fetchone()
        return int(row[0]) if row else 0
    counted = 0
    while batch := cursor.fetchmany(10_000):
        counted += len(batch)
    return counted


@contextmanager
def _holding(lock: threading.Lock | None, budget: Budget) -> Iterator[None]:
    """The file's writer lock, waited for no longer than the budget allows."""
    if lock is None:
        yield
        return
    if not lock.acquire(timeout=max(budget.remaining(), 0.0)):
        raise DuckError(f"gave up waiting for another writer of this database: {budget.source} ran out")
    try:
        yield
    finally:
        lock.release()


def _refuse_writes(statements: Sequence[Statement]) -> None:
    """A read-only call runs SELECT and EXPLAIN statements only; the first other one is named."""
    for statement in statements:
        if statement.kind not in _READ_STATEMENTS:
            kind = statement.kind.name.replace("_", " ")
            raise DuckError(
                f"read-only: {kind} statements are not allowed, only SELECT (with WITH, FROM, VALUES, "
                f"DESCRIBE, SHOW, SUMMARIZE) and EXPLAIN: {shown_value(statement.query.strip())}"
            )


class _WroteWhileReading(DuckError):
    """A statement run in a READ ONLY transaction tried to write; it changed nothing."""


@contextmanager
def _duck_errors(budget: Budget, watchdog: _Watchdog, root: Path, *, reader: bool = False) -> Iterator[None]:
    """DuckDB's exceptions as DuckError with DuckDB's own message, minus the server's paths."""
    try:
        yield
    except duckdb.Error as exc:
        if watchdog.fired:
            raise budget.interrupted() from exc
        if reader and isinstance(exc, duckdb.TransactionException) and "read-only mode" in str(exc):
            raise _WroteWhileReading(without_root(str(exc), root)) from exc
        if "max_temp_directory_size" in str(exc):  # DuckDB's text suggests a PRAGMA the lock forbids
            raise DuckError(
                "the statement needs more temporary space than a database may use; its temporary "
                f"files are capped like the file itself ({SECTION}.max_file_bytes)"
            ) from exc
        raise DuckError(without_root(str(exc), root)) from exc
    except QuotaExceeded as exc:
        raise DuckError(str(exc)) from exc


def without_root(text: str, root: Path | None) -> str:
    """`text` with the DuckDB folder's absolute path taken out: files appear as the script named them."""
    if root is None:
        return text
    folder = str(root)
    return text.replace(folder + "/", "").replace(folder, ".")


def _check_relative(relative: str) -> list[str]:
    """The parts of a path a script may name: relative, no `..`, a database suffix."""
    if not relative or len(relative) > MAX_PATH_CHARS:
        raise DuckError(f"must be 1 to {MAX_PATH_CHARS} characters")
    if "\x00" in relative or "\\" in relative:
        raise DuckError("may not contain NUL or backslash characters")
    if relative.startswith("/") or (len(relative) > 1 and relative[1] == ":"):
        raise DuckError("must be relative to the DuckDB folder, not absolute")
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise DuckError("may not contain '..'")
    if not parts or not parts[-1].endswith(SUFFIXES):
        raise DuckError(f"must name a file ending in {' or '.join(SUFFIXES)}")
    if any(len(part.encode("utf-8", "surrogatepass")) > _MAX_NAME_BYTES for part in parts):
        raise DuckError(f"has a name longer than {_MAX_NAME_BYTES} bytes")
    return parts


# -- db_schema ------------------------------------------------------------------------------

_SCHEMA_SQL = """
SELECT c.schema_name, c.table_name,
       CASE WHEN v.view_name IS NULL THEN 'table' ELSE 'view' END,
       c.column_name, c.data_type, c.is_nullable
FROM duckdb_columns() c
LEFT JOIN duckdb_views() v
  ON v.database_name = c.database_name AND v.schema_name = c.schema_name AND v.view_name = c.table_name
WHERE c.database_name = current_database() AND NOT c.internal
ORDER BY c.schema_name, c.table_name, c.column_index
"""


def _schema_text(rows: Sequence[tuple[Any, ...]], table: str | None) -> str:
    """`table NAME` / `view NAME` lines, each followed by `  column TYPE [NOT NULL]` lines."""
    lines: list[str] = []
    current: tuple[str, str] | None = None
    for schema, name, kind, column, data_type, nullable in rows:
        qualified = name if schema == "main" else f"{schema}.{name}"
        if table is not None and table.lower() not in (name.lower(), f"{schema}.{name}".lower()):
            continue
        if current != (schema, name):
            current = (schema, name)
            lines.append(f"{kind} {qualified}")
        lines.append(f"  {column} {data_type}{'' if nullable else ' NOT NULL'}")
    if not lines:
        if table is not None:
            raise DuckError(f"no table or view named {table!r}")
        return "no tables"
    return "\n".join(lines)


__all__ = ["DuckError", "DuckPool", "DuckService", "DuckSettings", "without_root"]
