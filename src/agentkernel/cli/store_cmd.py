"""`agentkernel store`: the store database (S27.2) — its schemas, and copying a project's files into it.

`store status` says where the stores live (kernel.yaml `store.url` or
$AGENTKERNEL_STORE_URL, the password masked) and each PostgreSQL store's
schema version there. `store migrate --from sqlite` moves an embedded
project onto PostgreSQL: it brings every store's tables up to date, then
copies each store's rows from the project's SQLite files (opened
read-only) in ONE transaction, so a failure leaves the database as it was
and a second run is refused table by table rather than doubling rows. The
servers should be stopped while it runs: what they write to the files
meanwhile would not be copied.

Building the parser imports nothing beyond argparse; psycopg is imported
only when the command runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from agentkernel.cli.common import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, load_project_config

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms at start-up)

if TYPE_CHECKING:
    from types import ModuleType

    from agentkernel.config import KernelConfig

PG_STORES = (
    "agentkernel.services.usage_pg",
    "agentkernel.services.turn_leases_pg",
    "agentkernel.services.memory_pg",
    "agentkernel.services.approvals_pg",
    "agentkernel.services.tool_results_pg",
    "agentkernel.services.state_pg",
    "agentkernel.server.sessions_pg",
    "agentkernel.server.sealed_ids_pg",
)
"""The modules of the PostgreSQL stores, each with `SCHEMAS` (its PgSchema values) and
`copy_from_sqlite(config, connection) -> {table: rows}`; migrated and copied in this order."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    store = commands.add_parser("store", help="the store database (store.url): status, migrate")
    actions = store.add_subparsers(dest="action", required=True, metavar="{status,migrate}")
    actions.add_parser("status", help="where the stores live and each one's schema version")
    migrate = actions.add_parser(
        "migrate", help="bring the store database's tables up to date, and copy the project's files into it"
    )
    migrate.add_argument(
        "--from",
        dest="source",
        choices=("sqlite",),
        help="also copy the project's SQLite stores' rows into the (empty) PostgreSQL tables",
    )


def run_command(options: argparse.Namespace) -> int:
    command = f"agentkernel store {options.action}"
    config = load_project_config(command, options.config)
    if config.store.url is None:
        print(
            f"{command}: no store database: set `store: {{url: postgresql://…}}` in "
            f"{config.path or 'kernel.yaml'} or $AGENTKERNEL_STORE_URL (the stores are the project's "
            "SQLite files)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from agentkernel.errors import AgentKernelError

    try:
        if options.action == "status":
            return _status(config)
        return _migrate(config, copy=options.source == "sqlite")
    except AgentKernelError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND


def _stores() -> list[ModuleType]:
    return [importlib.import_module(name) for name in PG_STORES]


def _status(config: KernelConfig) -> int:
    from agentkernel.services.postgres import PgPool, read_version

    print(f"store database: {config.store.shown}")
    with PgPool(str(config.store.url)) as pool, pool.connection() as conn:
        for module in _stores():
            for schema in module.SCHEMAS:
                found = read_version(conn, schema.store)
                state = (
                    "up to date" if found == schema.version else f"this agentkernel knows {schema.version}"
                )
                print(f"  {schema.what}: version {found or 'none'} ({state})")
    return EXIT_OK


def _migrate(config: KernelConfig, *, copy: bool) -> int:
    from agentkernel.services.postgres import PgPool, migrate

    with PgPool(str(config.store.url)) as pool:
        modules = _stores()
        for module in modules:
            for schema in module.SCHEMAS:
                migrate(pool, schema)
        print(f"store database {config.store.shown}: every store's tables are up to date")
        if not copy:
            return EXIT_OK
        copied: dict[str, int] = {}
        with pool.connection() as conn, conn.transaction():  # all or nothing
            for module in modules:
                copied.update(module.copy_from_sqlite(config, conn))
    for table, rows in copied.items():
        print(f"  {table}: {rows:,} rows copied")
    print(f"{sum(copied.values()):,} rows copied from the project's SQLite files")
    return EXIT_OK


__all__ = ["PG_STORES", "add_parser", "run_command"]
