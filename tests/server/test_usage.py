"""`GET /v1/usage` (S26.3) on a real `agentkernel serve` process, and the OpenAI endpoint's `usage`.

One server subprocess for the module, on a project with tokens for six users
(carol an operator, each test with users of its own), wired to the scripted LLM in this process. Usage is
made by real requests (a tool run's `llm()`, chat completions through the
`openai` SDK); what the endpoint reports is read back from the ledger the
server wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from agentkernel.config.server import token_hash
from agentkernel.services.usage import UsageLedger
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import make_project, script_tool
from tests.server.test_many_processes import Served

TOKENS = {f"{user}-token": user for user in ("alice", "bob", "carol", "dave", "erin", "frank")}
AS = {user: {"Authorization": f"Bearer {token}"} for token, user in TOKENS.items()}


@pytest.fixture(scope="module")
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(max_requests=2000) as server:
        yield server


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, llm_server: FakeLLMServer) -> Path:
    """One project (and one server, below) for the module: each test's usage is its own users'."""
    tokens = "".join(f'    "{token_hash(token)}": {user}\n' for token, user in TOKENS.items())
    root = tmp_path_factory.mktemp("usage") / "project"
    root.mkdir()
    make_project(root, llm_server, f"server:\n  operators: [carol]\n  tokens:\n{tokens}")
    script_tool(
        root / "config" / "scripts" / "tools", "ask_llm", "function run(args) { return llm(args.q); }"
    )
    return root


@pytest.fixture(scope="module")
def served(project: Path) -> Iterator[Served]:
    server = Served(project, project.parent / "serve.log")
    try:
        yield server
    finally:
        server.stop()


def ask(served: Served, llm: FakeLLMServer, user: str, tokens: tuple[int, int]) -> None:
    """One tool run of `user` whose script asks the LLM once (answered with `tokens` in and out)."""
    llm.add(Reply(text="an answer", prompt_tokens=tokens[0], completion_tokens=tokens[1]))
    with served.client(AS[user]) as client:
        ran = client.post("/v1/tools/ask_llm/run", json={"args": {"q": "hi"}})
    assert ran.status_code == 200 and ran.json()["success"], ran.text


def usage(served: Served, caller: str, /, **query: Any) -> httpx.Response:
    with served.client(AS[caller]) as client:
        return client.get("/v1/usage", params=query)


def test_each_user_reads_their_own_usage_and_an_operator_anyones(
    served: Served, llm_server: FakeLLMServer
) -> None:
    ask(served, llm_server, "alice", (10, 1))
    ask(served, llm_server, "bob", (200, 20))
    today = datetime.now(UTC).date().isoformat()
    mine = usage(served, "alice")
    assert mine.status_code == 200, mine.text
    body = mine.json()
    assert (body["user"], body["until"], body["since"]) == ("alice", today, today[:8] + "01")
    [row] = body["rows"]
    assert row == {
        "day": today,
        "user": "alice",
        "template": None,
        "model": "fake-model",
        "provider": "fake",  # kernel.yaml's one provider, named by its model
        "calls": 1,
        "input_tokens": 10,
        "output_tokens": 1,
        "tokens": 11,
        "estimated_calls": 0,
    }
    assert body["totals"] == {
        "calls": 1,
        "input_tokens": 10,
        "output_tokens": 1,
        "tokens": 11,
        "estimated_calls": 0,
    }
    for query in ({"user": "bob"}, {"all": "true"}):
        refused = usage(served, "alice", **query)
        assert refused.status_code == 403
        assert "server.operators" in refused.json()["detail"] and "'alice'" in refused.json()["detail"]
    assert usage(served, "alice", user="alice").status_code == 200  # oneself, named
    assert usage(served, "carol", user="bob").json()["totals"]["tokens"] == 220
    everyone = usage(served, "carol", all="true").json()
    ours = {"alice", "bob"}  # the module's other tests have users of their own
    assert everyone["user"] is None and [r["user"] for r in everyone["rows"] if r["user"] in ours] == [
        "alice",
        "bob",
    ]
    by_model = usage(served, "carol", all="true", group="model", model="fake-model").json()["rows"]
    assert [(r["user"], r["model"], r["tokens"]) for r in by_model if r["user"] in ours] == [
        ("alice", "fake-model", 11),
        ("bob", "fake-model", 220),
    ]
    assert usage(served, "carol", all="true", model="other").json()["rows"] == []
    by_day = usage(served, "bob", group="day").json()["rows"]
    assert by_day == [
        {
            "day": today,
            "calls": 1,
            "input_tokens": 200,
            "output_tokens": 20,
            "tokens": 220,
            "estimated_calls": 0,
        }
    ]


@pytest.mark.parametrize(
    ("query", "field", "says"),
    [
        ({"since": "2026-13-01"}, "query.since", ""),
        ({"until": "yesterday"}, "query.until", ""),
        ({"until": "0"}, "query.until", ""),  # a number is no day (pydantic would read a timestamp)
        ({"since": "2026-02-30"}, "query.since", ""),
        ({"since": "2026-03-02", "until": "2026-03-01"}, "query.since", "is after until"),
        ({"since": "2025-01-01", "until": "2026-01-02"}, "query.since", "at most 366 days"),
        ({"group": "user"}, "query.group", ""),
        ({"user": "bob", "all": "true"}, "query.all", "not both"),
    ],
)
def test_bad_queries_are_422_naming_the_parameter(
    served: Served, query: dict[str, str], field: str, says: str
) -> None:
    answer = usage(served, "carol", **query)
    assert answer.status_code == 422, answer.text
    assert field in answer.text and says in answer.json()["detail"]


def test_a_year_is_one_request_and_a_day_range_is_inclusive(
    served: Served, llm_server: FakeLLMServer
) -> None:
    ask(served, llm_server, "dave", (3, 3))
    today = datetime.now(UTC).date()
    year = usage(served, "dave", since=(today - timedelta(days=365)).isoformat(), until=today.isoformat())
    assert year.status_code == 200 and year.json()["totals"]["calls"] == 1
    before = usage(served, "dave", since="2020-01-01", until="2020-01-31")
    assert before.json()["rows"] == [] and before.json()["totals"]["calls"] == 0


@pytest.mark.parametrize("stream", [False, True])
def test_the_openai_endpoints_usage_is_what_the_ledger_counted_for_the_request(
    served: Served, project: Path, llm_server: FakeLLMServer, stream: bool
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "a"}'),), prompt_tokens=31, completion_tokens=7),
        Reply(text="A", prompt_tokens=45, completion_tokens=2),
    )
    user = "frank" if stream else "erin"
    with openai.OpenAI(base_url=f"{served.url}/v1", api_key=f"{user}-token", max_retries=0) as sdk:
        messages: Any = [{"role": "user", "content": "upper-case a"}]
        if stream:
            chunks = list(
                sdk.chat.completions.create(
                    model="tester", messages=messages, stream=True, stream_options={"include_usage": True}
                )
            )
            reported = chunks[-1].usage
        else:
            reported = sdk.chat.completions.create(model="tester", messages=messages).usage
    assert reported is not None
    with UsageLedger(project / "data" / "messages.db") as ledger:
        [row] = ledger.rows(user=user, template="tester")
    assert (
        (reported.prompt_tokens, reported.completion_tokens)
        == (row.input_tokens, row.output_tokens)
        == (76, 9)
    )
    assert row.calls == 2 and reported.total_tokens == row.tokens
