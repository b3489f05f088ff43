"""The store database stopped under a real server (S27.2): requests fail clearly, then it goes on by itself.

A real `agentkernel serve` on a project whose `store.url` is a cluster of
the test's own (tests/pg.py `own_pg`), which the test stops and starts
again on the same port: while it is down a request that needs the store is
503 with `Retry-After`, naming the database without its password, never a
traceback; once it is back the same server answers from what was written
before, with no restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from agentkernel.config.server import token_hash
from tests.fakes import FakeLLMServer, Reply
from tests.pg import OwnCluster
from tests.server.conftest import make_project, script_tool
from tests.server.test_many_processes import Served

PASSWORD = "hunter2-not-shown"
AS_ALICE = {"Authorization": "Bearer alice-token"}


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def database(own_pg: OwnCluster) -> str:
    """A database `agents` on the test's cluster, its URL with a password (trusted locally: any works)."""
    import psycopg

    with psycopg.connect(own_pg.cluster.url(), autocommit=True) as admin:
        admin.execute("CREATE DATABASE agents")
    parts = urlsplit(own_pg.cluster.url("agents"))
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{PASSWORD}@{parts.hostname}:{parts.port}"))


def spent(served: Served) -> httpx.Response:
    with served.client(AS_ALICE) as client:
        return client.get("/v1/usage")


def test_a_stopped_database_is_503_and_the_server_goes_on_when_it_is_back(
    tmp_path: Path, own_pg: OwnCluster, llm_server: FakeLLMServer
) -> None:
    url = database(own_pg)
    make_project(
        tmp_path,
        llm_server,
        f"store: {{url: '{url}'}}\nserver:\n  tokens:\n    \"{token_hash('alice-token')}\": alice\n",
    )
    script_tool(
        tmp_path / "config" / "scripts" / "tools", "ask_llm", "function run(args) { return llm(args.q); }"
    )
    served = Served(tmp_path, tmp_path / "serve.log")
    try:
        llm_server.add(Reply(text="an answer", prompt_tokens=7, completion_tokens=3))
        with served.client(AS_ALICE) as client:
            ran = client.post("/v1/tools/ask_llm/run", json={"args": {"q": "hi"}})
        assert ran.status_code == 200 and ran.json()["success"], ran.text
        before = spent(served)
        assert before.status_code == 200, before.text
        assert before.json()["totals"]["tokens"] == 10

        own_pg.stop("immediate")  # as a crash would
        down = spent(served)
        assert down.status_code == 503, down.text
        assert down.headers["Retry-After"].isdigit()
        detail = down.json()["detail"]
        assert "store database" in detail and f":{own_pg.port}/agents" in detail
        assert PASSWORD not in down.text and "Traceback" not in down.text

        own_pg.start()
        back = spent(served)
        assert back.status_code == 200, back.text
        assert back.json()["totals"] == before.json()["totals"]
    finally:
        served.stop()
    assert PASSWORD not in (tmp_path / "serve.log").read_text()


def test_a_server_started_while_the_database_is_down_serves_sessions_once_it_is_back(
    tmp_path: Path, own_pg: OwnCluster, llm_server: FakeLLMServer
) -> None:
    """The sessions in the store database are opened by the first request that needs them, not at start."""
    url = database(own_pg)
    make_project(
        tmp_path,
        llm_server,
        f"store: {{url: '{url}'}}\nserver:\n  tokens:\n    \"{token_hash('alice-token')}\": alice\n",
    )
    own_pg.stop("immediate")
    served = Served(tmp_path, tmp_path / "serve.log")  # it starts all the same
    try:
        with served.client(AS_ALICE) as client:
            down = client.get("/v1/sessions")
            assert down.status_code == 503, down.text
            assert PASSWORD not in down.text and "Traceback" not in down.text
            own_pg.start()
            made = client.post("/v1/sessions", json={"template": "tester"})
            assert made.status_code in (200, 201), made.text
            assert [s["id"] for s in client.get("/v1/sessions").json()] == [made.json()["id"]]
    finally:
        served.stop()
    log = (tmp_path / "serve.log").read_text()
    assert "cron jobs will not fire" not in log  # the scheduler waited for the store, it did not die
    assert "cron: the store database" in log and "trying again" in log
