"""A new helper and a new service, added exactly as docs/architecture.md ("Where a new thing goes") says.

The guide's steps, done here without editing the package: the port and its
key (ports.py), the service (services/<name>.py), its factory (one entry of
assembly.py's `SERVICES`, set for the test), and a helper that reaches it by
its key, registered in a helper table. Then both engines call it through a
real tool, the service is built on first use and closed with the kernel, and
a kernel without it says the key's "no … attached".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Final, Protocol

import pytest

from agentkernel import assembly
from agentkernel.assembly import KernelParts
from agentkernel.bundle import ServiceKey
from agentkernel.config import load_kernel_config
from agentkernel.config.store import STORE_URL_ENV
from agentkernel.errors import HelperError
from agentkernel.helpers import default_helper_table
from agentkernel.helpers.table import ScriptCall
from agentkernel.identity import Caller
from agentkernel.kernel import Kernel
from agentkernel.services.approval_values import PendingApproval
from agentkernel.services.approvals_pg import PostgresApprovals
from agentkernel.services.memory_pg import PostgresMessageStore
from agentkernel.services.postgres import StoreUnavailable
from agentkernel.services.tool_results_pg import PostgresToolResults
from agentkernel.services.turn_leases_pg import PostgresTurnLeases
from agentkernel.services.usage_pg import PostgresUsageLedger
from agentkernel.testing.parts import kernel_parts
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory, write_kernel_yaml

# -- step 1, ports.py: the port (what helpers need of the service) and its key ---------------------


class Greeter(Protocol):
    def greet(self, name: str) -> str: ...


GREETER: Final = ServiceKey[Greeter]("greeter", "no greeter attached to this kernel")


# -- step 2, services/greeter.py: the service, built from the kernel's config -----------------------


class GreeterService:
    def __init__(self, root: Path) -> None:
        self.project = root.name
        self.closed = False

    def greet(self, name: str) -> str:
        return f"Привет, {name}, from {self.project}"

    def close(self) -> None:
        self.closed = True


# -- step 3, assembly.py: its factory, one entry of SERVICES ---------------------------------------


def greeter_factory(parts: KernelParts) -> object:
    return GreeterService(parts.config.root)


# -- step 4, helpers/<area>.py: the helper, reaching the service by its key ---------------------------


def greet(call: ScriptCall, name: JSONValue) -> JSONValue:
    if not isinstance(name, str):
        raise HelperError(f"greet: name must be a string, got {name!r}")
    return call.caller.services.require(GREETER, "greet").greet(name)


@pytest.fixture
def greeter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(assembly.SERVICES, GREETER, greeter_factory)


@pytest.mark.usefixtures("greeter")
def test_a_new_service_and_its_helper_reach_both_engines(project: Path, make_tool: ToolFactory) -> None:
    make_tool("hello_js", "function run(args) { return greet(args.name); }")
    make_tool("hello_rhai", "fn run(args) { greet(args.name) }", ext=".rhai")
    helpers = default_helper_table()
    helpers.register("greet", greet)
    config = load_kernel_config(project / "config" / "kernel.yaml")
    with Kernel(config, helpers=helpers) as kernel:
        services = kernel_parts(kernel).services
        assert services.built() == []  # built on first use, not with the kernel
        assert kernel.run_tool("hello_js", {"name": "Анна"}).content == f"Привет, Анна, from {project.name}"
        assert (
            kernel.run_tool("hello_rhai", {"name": "Борис"}).content == f"Привет, Борис, from {project.name}"
        )
        [built] = services.built()
        assert isinstance(built, GreeterService) and not built.closed
    assert built.closed  # closed with the kernel's own services


@pytest.mark.usefixtures("greeter")
def test_without_the_service_the_helper_says_the_keys_text(project: Path, make_tool: ToolFactory) -> None:
    make_tool("hello_js", "function run(args) { return greet(args.name); }")
    helpers = default_helper_table()
    helpers.register("greet", greet)
    config = load_kernel_config(project / "config" / "kernel.yaml")
    with Kernel(config, helpers=helpers, extra_services={"greeter": None}) as kernel:
        content = kernel.run_tool("hello_js", {"name": "Анна"}).content
    assert content.startswith("Error: greet: no greeter attached to this kernel"), content


def test_an_unknown_service_handed_in_is_refused_by_name(project: Path) -> None:
    config = load_kernel_config(project / "config" / "kernel.yaml")
    with pytest.raises(
        ValueError, match=r"extra_services: no local service 'greeter' \(the kernel's own: duckdb"
    ):
        Kernel(config, extra_services={"greeter": None})


# -- the stores' place (S27.2): kernel.yaml `store.url` puts the usage ledger in PostgreSQL -------------

STORE_PROBE = """
import sys
from agentkernel import Kernel
from agentkernel.config import load_kernel_config
with Kernel(load_kernel_config(None)) as kernel:
    ledger = kernel.usage()
    ledger.record(user="ann", template=None, model="m", provider=None, input_tokens=1, output_tokens=0)
    print(type(ledger).__name__, sorted({m.split(".")[0] for m in sys.modules if "psycopg" in m}))
"""


def probe_store(project: Path, store_url: str | None) -> str:
    """What a kernel in `project` records usage in, and the psycopg packages that imported (a new process)."""
    env = {k: v for k, v in os.environ.items() if k != STORE_URL_ENV}
    if store_url is not None:
        env[STORE_URL_ENV] = store_url
    done = subprocess.run(
        [sys.executable, "-c", STORE_PROBE], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_with_a_store_url_the_usage_ledger_is_in_postgresql_and_the_pool_closes_with_the_kernel(
    tmp_path: Path, pg_url: str
) -> None:
    config = load_kernel_config(write_kernel_yaml(tmp_path, f"store: {{url: '{pg_url}'}}\n"))
    kernel = Kernel(config)
    with kernel:
        kernel.usage().record(
            user="ann", template="t", model="m", provider=None, input_tokens=2, output_tokens=1
        )
        parts = kernel_parts(kernel)
        assert isinstance(parts.usage, PostgresUsageLedger)
    with PostgresUsageLedger(pg_url) as ledger:
        [row] = ledger.rows(user="ann")
        assert (row.template, row.calls, row.tokens) == ("t", 1, 3)
    assert not config.messages_db.exists()  # nothing went to the SQLite file
    with pytest.raises(StoreUnavailable, match="closed"), parts.store_pool.connection():
        pass


def test_with_a_store_url_the_transcript_runs_and_leases_are_in_postgresql(
    tmp_path: Path, pg_url: str
) -> None:
    config = load_kernel_config(write_kernel_yaml(tmp_path, f"store: {{url: '{pg_url}'}}\n"))
    with Kernel(config) as kernel:
        parts = kernel_parts(kernel)
        leases = kernel.turn_leases()
        assert isinstance(leases, PostgresTurnLeases)
        lease = leases.take("s1", "ann", 600.0)
        parts.store.append("s1", "user", "user", "hello", user_id="ann", lease=lease.token)
        assert isinstance(parts.store.store, PostgresMessageStore)
    with PostgresMessageStore(pg_url) as store, PostgresTurnLeases(pg_url) as again:
        assert [r.content for r in store.history("s1", 5)] == ["hello"]
        assert again.running("ann") == 1
    assert not config.messages_db.exists()  # nothing went to the SQLite file


def test_the_variable_puts_it_there_too_and_without_either_psycopg_is_never_imported(
    tmp_path: Path, pg_url: str
) -> None:
    write_kernel_yaml(tmp_path)
    assert probe_store(tmp_path, None) == "UsageLedger []"
    assert (
        probe_store(tmp_path, pg_url) == "PostgresUsageLedger ['psycopg', 'psycopg_binary', 'psycopg_pool']"
    )
    with PostgresUsageLedger(pg_url) as ledger:
        assert [row.user for row in ledger.rows(every_user=True)] == ["ann"]


def test_with_a_store_url_the_approvals_and_the_tool_results_are_in_postgresql_too(
    tmp_path: Path, pg_url: str, make_tool: ToolFactory
) -> None:
    config = load_kernel_config(write_kernel_yaml(tmp_path, f"store: {{url: '{pg_url}'}}\n"))
    make_tool("echo", "function run(args) { return 'got ' + args.word; }")
    with Kernel(config) as kernel:
        asked = kernel.approvals().ask(
            PendingApproval("r1", "c1", "s1", "ann", "t", "echo", {"word": "x"}, "echo it?", "llm")
        )
        assert kernel.run_tool("echo", {"word": "hi"}, Caller(user_id="ann", session_id="s1")).success
        found = kernel_parts(kernel).history.get(Caller(user_id="ann", session_id="s1"), "echo")
        assert found is not None and found.content == "got hi"
        assert isinstance(kernel_parts(kernel).approvals, PostgresApprovals)
    with (
        PostgresApprovals(pg_url) as approvals,
        PostgresToolResults(pg_url, per_tool=1, sessions=1) as results,
    ):
        assert approvals.get("r1", "c1") == asked
        assert results.session_count() == 1
    assert not config.messages_db.exists()
    assert not config.messages_db.with_name("tool_results.db").exists()  # nothing went to the SQLite files
