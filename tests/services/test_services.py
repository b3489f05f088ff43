"""The `Services` bundle: services by typed key, built on first use, one text for a missing one (rule 4)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agentkernel.bundle import MissingService, ServiceKey, Services
from agentkernel.ports import DUCKDB, FILES, HTTP, SHELL, STATE, Files
from agentkernel.services.files import FilesService
from agentkernel.util.environment import Environment
from agentkernel.util.later import Later


def test_a_missing_service_raises_the_contracts_text() -> None:
    services = Services()
    with pytest.raises(MissingService) as caught:
        services.require(STATE, "state_get")
    # S11.3 and docs/scripts.md give this text whole
    assert str(caught.value) == (
        "state_get: the state store is off: kernel.yaml sets no state.db_path"
        " (set it, e.g. data/state.db, to turn it on)"
    )
    with pytest.raises(MissingService, match=r"^http_get: no http service attached to this kernel$"):
        services.require(HTTP, "http_get")  # S8.2, docs/scripts.md "no HTTP service"
    for key in (DUCKDB, FILES, SHELL):  # one wording for the services the manual does not spell
        assert key.missing == f"no {key.name} service attached to this kernel"


def test_a_later_service_is_built_once_on_first_read(tmp_path: Path) -> None:
    made: list[FilesService] = []
    go = threading.Barrier(8)

    def build() -> FilesService:
        made.append(FilesService(root=tmp_path))
        return made[-1]

    services = Services({FILES: Later(build)})
    assert services.built() == [] and made == []  # nothing is built to be closed unless it was used

    seen: list[Files | None] = []

    def read() -> None:
        go.wait()
        seen.append(services.get(FILES))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and seen == made * 8
    assert services.require(FILES, "fs_read") is made[0]
    assert services.built() == made


def test_a_factory_that_fails_is_asked_again() -> None:
    calls: list[int] = []

    def build() -> FilesService | None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("not yet")
        return None

    later: Later[FilesService] = Later(build)
    with pytest.raises(OSError, match="not yet"):
        later.get()
    assert later.get() is None and later.get() is None and len(calls) == 2


def test_none_detaches_and_a_built_service_is_kept(tmp_path: Path) -> None:
    files = FilesService(root=tmp_path)
    services = Services({FILES: files, SHELL: None})
    assert services.get(FILES) is files and services.get(SHELL) is None
    assert services.built() == [files]


def test_without_an_environment_env_var_reads_the_processes_own() -> None:
    """What a bare Caller has; the kernel gives its own, its secrets denied."""
    assert Services().environment.deny == ()
    given = Environment(deny=("*",))
    assert Services(environment=given).environment is given


def test_a_service_is_typed_by_its_key() -> None:
    """A new service: a key naming its port and its text; `require` gives the port's type back."""

    class Greeter:
        def greet(self, name: str) -> str:
            return f"hello, {name}"

    greeter = ServiceKey[Greeter]("greeter", "no greeter attached to this kernel")
    assert Services({greeter: Greeter()}).require(greeter, "greet").greet("Вера") == "hello, Вера"
    with pytest.raises(MissingService, match=r"^greet: no greeter attached to this kernel$"):
        Services().require(greeter, "greet")


def test_your_own_service_is_found_by_name_and_type() -> None:
    """The seam for helpers the kernel does not ship (docs/kernel.md 10.1)."""

    class Counter:
        pass

    counter = Counter()
    services = Services(extensions={"counter": counter})
    assert services.extension("counter", Counter) is counter
    assert services.extension("missing", Counter) is None
    with pytest.raises(TypeError, match="service 'counter' is a Counter, not a str"):
        services.extension("counter", str)
