"""Fixtures shared by the helper tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.http_kernels import Kernels
from tests.helpers.http_server import LocalHTTPServer
from tests.helpers.probes import ENGINES


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Each helper test runs once from a JS tool and once from a Rhai tool."""
    return str(request.param)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalHTTPServer]:
    with LocalHTTPServer() as running:
        yield running


@pytest.fixture
def kernels(project: Path) -> Iterator[Kernels]:
    made = Kernels(project)
    yield made
    for service in made.services:
        service.close()
