"""Fixtures shared by the helper tests."""

from __future__ import annotations

import pytest

from tests.helpers.probes import ENGINES


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Each helper test runs once from a JS tool and once from a Rhai tool."""
    return str(request.param)
