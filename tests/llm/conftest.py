"""The scripted LLM server, one per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes import FakeLLMServer


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server
