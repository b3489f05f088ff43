"""A schema pattern cannot freeze the server (issue 24, 4): another user's /healthz answers meanwhile.

Tool arguments were validated with Python's `re`, which backtracks without
end holding the GIL: a `pattern` of a tool's own YAML `parameters`
(`^([a-z]+)*$`) or of a consumed MCP server's inputSchema (`^(a|a)*$`)
with thirty-one letters and a `!` stopped the whole `agentkernel serve`
for minutes. Now every schema pattern is matched by the `regex` module,
without the GIL and only until the call's deadline (schemas/bounds.py).

Real processes: `agentkernel serve` with two token users, the outside MCP
server (tests/fakes/mcp_server.py) over stdio. Alice attacks;
Bob's /healthz is timed while her run goes on. Unfixed, his request waits
the whole backtracking (minutes), far past HEALTHZ_BOUND_SECS.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agentkernel.config.server import token_hash
from tests.fakes import FakeLLMServer, Reply
from tests.server.conftest import make_project, script_tool, write
from tests.server.test_serve_cli import serving
from tests.tools.sources.mcp.conftest import stdio_server

ALICE, BOB = {"Authorization": "Bearer alice-token"}, {"Authorization": "Bearer bob-token"}
HEALTHZ_BOUND_SECS = 5.0  # generous on a busy machine; unfixed, the attacks below stall it for minutes
POLL_SECS = 0.05
LETTERS = 31  # each one more doubles Python's `re`: 26 took 4.4 s


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLMServer) -> Iterator[str]:
    """`agentkernel serve` for alice and bob: tools `pick_word` and `delegate`, template `agent` using the
    outside server."""
    root = tmp_path_factory.mktemp("freezes")
    tokens = (
        f"server:\n  tokens:\n    {token_hash('alice-token')}: alice\n    {token_hash('bob-token')}: bob\n"
    )
    make_project(root, llm, tokens)
    word = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^([a-z]+)*$"}}}
    script_tool(
        root / "config" / "scripts" / "tools",
        "pick_word",
        "function run(args) { return args.q; }",
        parameters=word,
        timeout_secs=3,
    )
    script_tool(
        root / "config" / "scripts" / "tools",
        "delegate",
        "function run(args) { return run_subagent(args).answer; }",
        timeout_secs=3,
    )
    server = stdio_server(extra="tools: [pick, echo]\ntimeout_secs: 3")
    write(
        root / "config" / "templates" / "agent.yaml", f"name: agent\ninstructions: x\nmcp_servers:\n{server}"
    )
    with serving(root) as (_, address):
        yield address


def healthz_during(url: str, attack: Callable[[], httpx.Response]) -> tuple[httpx.Response | None, float]:
    """Alice's `attack` on a thread, Bob's /healthz meanwhile until it ends: her answer, his longest wait."""
    answer: list[httpx.Response] = []
    done = threading.Event()

    def attacker() -> None:
        try:
            answer.append(attack())
        except httpx.HTTPError:  # the server was killed under a frozen run (the test already failed)
            pass
        finally:
            done.set()

    threading.Thread(target=attacker, daemon=True).start()
    longest = 0.0
    with httpx.Client(base_url=url, headers=BOB, timeout=HEALTHZ_BOUND_SECS) as bob:
        while True:
            finished = done.is_set()
            started = time.monotonic()
            try:
                assert bob.get("/healthz").status_code == 200
            except httpx.TimeoutException:
                return None, HEALTHZ_BOUND_SECS
            longest = max(longest, time.monotonic() - started)
            if finished:
                return (answer[0] if answer else None), longest
            done.wait(POLL_SECS)


def run(url: str, name: str, args: dict[str, Any], session: str | None = None) -> httpx.Response:
    body = {"args": args, "session": session}
    return httpx.post(f"{url}/v1/tools/{name}/run", json=body, headers=ALICE, timeout=120)


def test_a_tool_yaml_pattern_cannot_freeze_the_server(url: str) -> None:
    assert run(url, "pick_word", {"q": "fine"}).json()["content"] == "fine"
    answer, longest = healthz_during(url, lambda: run(url, "pick_word", {"q": "a" * LETTERS + "!"}))
    assert longest < HEALTHZ_BOUND_SECS, f"bob's /healthz waited {longest:.1f} s while alice's run went on"
    assert answer is not None and answer.json()["success"] is False
    assert "does not match '^([a-z]+)*$'" in answer.json()["content"]


def test_an_outside_servers_pattern_cannot_freeze_the_server(url: str) -> None:
    made = httpx.post(f"{url}/v1/sessions", json={"template": "agent"}, headers=ALICE, timeout=60)
    session = made.json()["id"]
    warm = run(url, "outside__pick", {"text": "aaa"}, session)  # starts the outside server
    assert warm.json()["content"] == "aaa", warm.text
    answer, longest = healthz_during(
        url, lambda: run(url, "outside__pick", {"text": "a" * LETTERS + "!"}, session)
    )
    assert longest < HEALTHZ_BOUND_SECS, f"bob's /healthz waited {longest:.1f} s while alice's run went on"
    assert answer is not None
    assert answer.json()["content"] == (
        "tool 'outside__pick' not run: its arguments could not be validated: the pattern '^(a|a)*$' was "
        "still matching when the time ran out"
    )


def test_a_sub_agents_output_schema_is_validated_off_the_event_loop_and_ends_with_the_script(
    url: str, llm: FakeLLMServer
) -> None:
    """Two branches a level, recursing into the answer: 2^40 applications for a list 40 deep, under the
    complexity bound. They ran on the server's event loop, which serves everyone; now on the sub-agent's
    worker, until the script's deadline."""
    node = {"anyOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "array", "items": {"$ref": "#"}}]}
    llm.add(Reply(text="[" * 40 + "5" + "]" * 40))
    options = {"task": "nest", "instructions": "Answer in JSON.", "output_schema": node}
    answer, longest = healthz_during(url, lambda: run(url, "delegate", options))
    assert longest < HEALTHZ_BOUND_SECS, f"bob's /healthz waited {longest:.1f} s while alice's run went on"
    assert answer is not None and answer.json()["success"] is False
    content = answer.json()["content"]
    # The validation ends with the script: told as the validation's end, or as the sub-agent stopped at the
    # script's deadline when a loaded machine spends the script's time before the validation began.
    ended = ("validating was still going on when the time ran out", "3 s", "stopped at the script's deadline")
    assert any(words in content for words in ended), content
