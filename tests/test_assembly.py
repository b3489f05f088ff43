"""A new helper and a new service, added exactly as docs/architecture.md ("Where a new thing goes") says.

The guide's steps, done here without editing the package: the port and its
key (ports.py), the service (services/<name>.py), its factory (one entry of
assembly.py's `SERVICES`, set for the test), and a helper that reaches it by
its key, registered in a helper table. Then both engines call it through a
real tool, the service is built on first use and closed with the kernel, and
a kernel without it says the key's "no … attached".
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Protocol

import pytest

from agentkernel import assembly
from agentkernel.assembly import KernelParts
from agentkernel.bundle import ServiceKey
from agentkernel.config import load_kernel_config
from agentkernel.errors import HelperError
from agentkernel.helpers import default_helper_table
from agentkernel.helpers.table import ScriptCall
from agentkernel.kernel import Kernel
from agentkernel.testing.parts import kernel_parts
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory

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
