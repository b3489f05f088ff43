"""Continuations through the real server (S6.3, issue 11 §2): a table pages lazily behind opaque ids.

The `paged` tool's continuation args carry a marker (ARGS_SECRET); it must
never appear in anything the server sends, whichever way the table left it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkernel import Kernel
from agentkernel.config import ServerSettings, load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.server.app import create_app
from agentkernel.server.routes.continuations import NOT_FOUND
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import LiveServer, make_project, script_tool, sse_events, write

pytestmark = pytest.mark.across_deployments  # S27.3: on the project's files and on PostgreSQL

ARGS_SECRET = "cursor-only-the-server-knows"
PAGES = 3
PAGED_JS = f"""
function run(args) {{
  var page = args.page || 1;
  var rows = [];
  for (var i = 0; i < 2; i++) rows.push({{n: (page - 1) * 2 + i, page: page}});
  var table = {{type: 'table', title: 'Numbers', columns: [{{key: 'n', title: 'N'}}, {{key: 'page'}}],
                rows: rows}};
  if (page < {PAGES}) table.continuation = {{args: {{page: page + 1, cursor: '{ARGS_SECRET}-' + page}}}};
  return {{content: 'page ' + page, visual: table}};
}}
"""
TOKENS = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}


def paged_project(root: Path, llm: FakeLLMServer | None) -> Path:
    """make_project's, plus the `paged` tool in template `tester`, and tokens for alice and bob."""
    extra = "server:\n  tokens:\n" + "".join(f'    "{h}": {user}\n' for h, user in TOKENS.items())
    kernel_yaml = make_project(root, llm, extra)
    script_tool(
        root / "config" / "scripts" / "tools",
        "paged",
        PAGED_JS,
        description="Numbers, two per page.",
        parameters={"type": "object", "properties": {"page": {"type": "integer"}}},
    )
    write(
        root / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: You are a test agent.\ntools: [upper, table, paged]\nmax_turns: 4\n",
    )
    return kernel_yaml


class Seen:
    """Every response body the test received, to check that no continuation args ever left the server."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def __call__(self, response: httpx.Response) -> None:
        response.read()
        self.bodies.append(response.text)

    def check(self) -> None:
        assert self.bodies
        assert not any(ARGS_SECRET in body or "args" in _continuations(body) for body in self.bodies)


def _continuations(body: str) -> str:
    """The text of every `continuation` object in a JSON (or SSE) body."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("continuation"), dict):
                found.append(json.dumps(value["continuation"]))
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for line in body.splitlines():
        text = line.removeprefix("data: ")
        try:
            walk(json.loads(text))
        except ValueError:
            continue
    return " ".join(found)


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def live_paged(tmp_path: Path, llm_server: FakeLLMServer) -> Iterator[LiveServer]:
    with LiveServer(Kernel(load_kernel_config(paged_project(tmp_path, llm_server)))) as server:
        yield server


def user_client(live: LiveServer, token: str, seen: Seen) -> httpx.Client:
    return httpx.Client(
        base_url=live.url,
        timeout=60,
        headers={"Authorization": f"Bearer {token}"},
        event_hooks={"response": [seen]},
    )


def next_page(client: httpx.Client, continuation_id: str) -> dict[str, Any]:
    answer = client.post("/v1/continuations", json={"id": continuation_id})
    assert answer.status_code == 200, answer.text
    page: dict[str, Any] = answer.json()
    assert set(page) == {"visual", "success", "error", "warnings"}
    return page


def numbers(table: dict[str, Any]) -> list[int]:
    return [row["n"] for row in table["rows"]]


def test_a_streamed_table_pages_one_two_three(
    live_paged: LiveServer, llm_server: FakeLLMServer, seen: Seen
) -> None:
    llm_server.add(Reply(tool_calls=(FakeToolCall("paged", "{}", id="c1"),)), Reply(text="see the table"))
    with user_client(live_paged, "alice-token", seen) as alice:
        session = alice.post("/v1/sessions", json={"template": "tester"}).json()["id"]
        stream = alice.post(f"/v1/sessions/{session}/messages", json={"content": "numbers please"})
        (table,) = dict(sse_events(stream.text))["tool_result"]["visual"]
        assert numbers(table) == [0, 1] and set(table["continuation"]) == {"id"}
        first_id = table["continuation"]["id"]

        page2 = next_page(alice, first_id)
        assert page2["success"] is True and page2["error"] is None and page2["warnings"] == []
        (table2,) = page2["visual"]
        assert numbers(table2) == [2, 3] and table2["continuation"]["id"] != first_id

        (table3,) = next_page(alice, table2["continuation"]["id"])["visual"]
        assert numbers(table3) == [4, 5] and "continuation" not in table3

        # the same id asks for the same page again (ids are capabilities, not one-shot)
        assert numbers(next_page(alice, first_id)["visual"][0]) == [2, 3]
        # the transcript keeps the table for a reader who opens the session again, sealed afresh
        transcript = alice.get(f"/v1/sessions/{session}/messages")
        assert transcript.status_code == 200
        (result,) = [r for r in transcript.json() if r["kind"] == "tool_result"]
        (recorded,) = result["meta"]["visual"]
        assert numbers(recorded) == [0, 1] and set(recorded["continuation"]) == {"id"}
        assert numbers(next_page(alice, recorded["continuation"]["id"])["visual"][0]) == [2, 3]
    # the LLM saw neither the rows' pages nor the args (S6)
    assert ARGS_SECRET not in json.dumps(llm_server.bodies)
    seen.check()


def test_a_tool_run_pages_and_ids_are_the_owners_alone(live_paged: LiveServer, seen: Seen) -> None:
    with (
        user_client(live_paged, "alice-token", seen) as alice,
        user_client(live_paged, "bob-token", seen) as bob,
    ):
        ran = alice.post("/v1/tools/paged/run", json={"args": {}})
        assert ran.status_code == 200, ran.text
        (table,) = ran.json()["visual"]
        alices = table["continuation"]["id"]
        assert numbers(next_page(alice, alices)["visual"][0]) == [2, 3]

        answers = [
            bob.post("/v1/continuations", json={"id": alices}),  # another user's
            alice.post("/v1/continuations", json={"id": "x" * 43}),  # unknown
            alice.post("/v1/continuations", json={"id": alices[:-1]}),  # almost hers
        ]
        assert [a.status_code for a in answers] == [404, 404, 404]
        assert {a.json()["detail"] for a in answers} == {NOT_FOUND}
        assert bob.post("/v1/continuations", json={}).status_code == 422
    anonymous = httpx.post(f"{live_paged.url}/v1/continuations", json={"id": alices}, timeout=60)
    assert anonymous.status_code == 401
    seen.check()


def test_ids_survive_a_restart(tmp_path: Path, seen: Seen) -> None:
    kernel_yaml = paged_project(tmp_path, None)
    with (
        LiveServer(Kernel(load_kernel_config(kernel_yaml))) as first,
        user_client(first, "alice-token", seen) as c,
    ):
        (table,) = c.post("/v1/tools/paged/run", json={"args": {}}).json()["visual"]
    with (
        LiveServer(Kernel(load_kernel_config(kernel_yaml))) as again,
        user_client(again, "alice-token", seen) as c,
    ):
        assert numbers(next_page(c, table["continuation"]["id"])["visual"][0]) == [2, 3]
    seen.check()


def test_the_ttl_comes_from_the_server_section(tmp_path: Path) -> None:
    kernel_yaml = paged_project(tmp_path, None)
    with Kernel(load_kernel_config(kernel_yaml)) as kernel:
        assert kernel.config.server.continuation_ttl_secs == 24 * 3600
        app = create_app(kernel, ServerSettings(continuation_ttl_secs=5))
        assert app.state.sealing.continuations.store().ttl_secs == 5
        assert app.state.sealing.downloads.store().ttl_secs == 5  # a download id lives as long
        app.state.sealing.close()
    write(kernel_yaml, kernel_yaml.read_text() + "  continuation_ttl_secs: 60\n")
    assert load_kernel_config(kernel_yaml).server.continuation_ttl_secs == 60.0


def test_a_ttl_that_is_not_positive_names_the_field(tmp_path: Path) -> None:
    from agentkernel.errors import ConfigError
    from tests.conftest import write_kernel_yaml

    with pytest.raises(ConfigError, match=r"server\.continuation_ttl_secs: expected a number of seconds > 0"):
        load_kernel_config(write_kernel_yaml(tmp_path, "server:\n  continuation_ttl_secs: 0\n"))
