"""Scarce things shared fairly between users on one server (issue 24 §5, §6): LLM slots, script workers.

Two users with tokens on the real server (uvicorn on 127.0.0.1) and the
scripted LLM, whose answers to alice wait for gates the test opens one by
one. Alice floods; bob's requests must still be served — ahead of alice's
queued LLM calls, and while every one of alice's tool runs is still held.
Everything is waited for on events and counts; the client's timeout is only
the failure guard.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkernel import Kernel
from agentkernel.config import ServerSettings, load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.llm.fair_slots import FairSlots
from agentkernel.testing.parts import kernel_parts
from agentkernel.util.fair_pool import FairPool
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer, RecordedRequest, Reply
from tests.fakes.openai_server import Exchange, Turn
from tests.server.conftest import LiveServer, make_project, script_tool, sse_events, write

ALICE, BOB = {"Authorization": "Bearer alice-token"}, {"Authorization": "Bearer bob-token"}
TOKENS = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}
GUARD_SECS = 60.0  # only a starved request ever waits this long
FLOOD = 36  # more than any machine's default executor (min(32, cores + 4) threads)


@dataclass
class GatedLLM:
    """Answers a question that starts with `alice` only when its gate opens; every other one at once."""

    gates: dict[str, threading.Event] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def gate(self, question: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(question, threading.Event())

    def open_all(self) -> None:
        with self.lock:
            self.gates.setdefault("*", threading.Event()).set()
            for gate in self.gates.values():
                gate.set()

    def __call__(self, request: RecordedRequest) -> Turn:
        question = str(request.body["messages"][-1]["content"])
        if not question.startswith("alice"):
            return Reply(text=f"answer to {question}")
        return _Held(self.gate(question), self.gate("*"), Reply(text=f"answer to {question}"))


@dataclass(frozen=True)
class _Held:
    gate: threading.Event
    everything: threading.Event
    reply: Reply

    def answer(self, exchange: Exchange) -> None:
        while not (self.gate.wait(0.05) or self.everything.is_set()):
            pass
        self.reply.answer(exchange)


def question(request: RecordedRequest) -> str:
    return str(request.body["messages"][-1]["content"])


@pytest.fixture
def gated(llm_server: FakeLLMServer) -> Iterator[GatedLLM]:
    responder = GatedLLM()
    llm_server.respond_with(responder)
    try:
        yield responder
    finally:
        responder.open_all()  # a held answer never outlives its test


def project(root: Path, llm: FakeLLMServer, max_concurrency: int) -> Path:
    """make_project's tools and template, `ask` (asks the LLM `q`), and a template `hooked` with a hook."""
    extra = (
        f"llm:\n  base_url: {llm.base_url}\n  model: fake\n  max_retries: 0\n  timeout_secs: 60\n"
        f"  max_concurrency: {max_concurrency}\nlimits:\n  timeout_secs: 120\n"
    )
    kernel_yaml = make_project(root, None, extra)
    text = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    script_tool(
        root / "config" / "scripts" / "tools", "ask", "function run(a) { return llm(a.q); }", parameters=text
    )
    hooks = root / "config" / "scripts" / "hooks"
    write(hooks / "note.yaml", "kind: script_hook\nname: note\nscript: note.js\n")
    write(hooks / "note.js", "function before_user_message(ctx, msg) { return {notice: 'seen'}; }")
    write(
        root / "config" / "templates" / "hooked.yaml",
        "name: hooked\ninstructions: You are a test agent.\ntools: [upper]\nhooks: [note]\nmax_turns: 2\n",
    )
    return kernel_yaml


def serve(kernel_yaml: Path) -> LiveServer:
    """The server with per-user caps on running work set past the flood: what is tested is the sharing."""
    caps: dict[str, Any] = {
        name: FLOOD + 8
        for name in ("max_running_turns_per_user", "max_running_tool_runs_per_user")
        if name in {f.name for f in dataclasses.fields(ServerSettings)}
    }
    kernel = Kernel(load_kernel_config(kernel_yaml))
    return LiveServer(kernel, ServerSettings(tokens=TOKENS, **caps))


def slots_of(kernel: Kernel) -> FairSlots:
    """The kernel's LLM slots (the provider is built on the first LLM call), to wait on their counts."""
    # the raw provider (not the quota gate and meter around it): a test reads the queue it is about
    provider: Any = kernel_parts(kernel).provider
    slots: FairSlots = provider.inner.slots
    return slots


def pool_of(kernel: Kernel) -> FairPool:
    return kernel_parts(kernel).script_pool  # read only, as slots_of


def test_a_freed_llm_slot_goes_to_the_user_with_none_ahead_of_the_flooders_queue(
    tmp_path: Path, llm_server: FakeLLMServer, gated: GatedLLM
) -> None:
    """Alice keeps both LLM slots busy and two more calls waiting; bob's completion gets the next slot."""
    with serve(project(tmp_path, llm_server, max_concurrency=2)) as live, live.client() as client:
        client.timeout = httpx.Timeout(GUARD_SECS)
        with ThreadPoolExecutor(8) as senders:
            alice = [
                senders.submit(
                    client.post, "/v1/tools/ask/run", json={"args": {"q": f"alice-{n}"}}, headers=ALICE
                )
                for n in range(4)
            ]
            wait_until(lambda: len(llm_server.requests) == 2, "alice's first two calls to reach the LLM")
            slots = slots_of(live.kernel)
            wait_until(lambda: slots.waiting("alice") == 2, "alice's other two calls to wait for a slot")
            body = {"model": "tester", "messages": [{"role": "user", "content": "bob asks"}]}
            bob = senders.submit(client.post, "/v1/chat/completions", json=body, headers=BOB)
            wait_until(lambda: slots.waiting("bob") == 1, "bob's call to wait for a slot")
            first = question(llm_server.requests[0])
            gated.gate(first).set()  # one of alice's calls ends: its slot is bob's, though alice asked first
            answer = bob.result(GUARD_SECS)
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == "answer to bob asks"
            assert [question(r) for r in llm_server.requests][2] == "bob asks"
            released = int(first.removeprefix("alice-"))
            assert not any(f.done() for n, f in enumerate(alice) if n != released)
            gated.open_all()
            ran = [f.result(GUARD_SECS) for f in alice]
        assert all(r.status_code == 200 and r.json()["success"] for r in ran), [r.text for r in ran]
        assert slots.held("alice") == slots.held("bob") == 0


def test_a_flood_of_slow_tool_runs_leaves_another_users_tool_run_and_turn_answering(
    tmp_path: Path, llm_server: FakeLLMServer, gated: GatedLLM
) -> None:
    """Alice's 36 tool runs wait on the LLM; bob's tool run and turn (a hook, a listing) still answer."""
    with serve(project(tmp_path, llm_server, max_concurrency=64)) as live, live.client() as client:
        client.timeout = httpx.Timeout(GUARD_SECS)
        workers = pool_of(live.kernel)
        limits = httpx.Limits(max_connections=FLOOD + 8, max_keepalive_connections=FLOOD + 8)
        with (
            httpx.Client(base_url=live.url, timeout=GUARD_SECS, limits=limits) as flooder,
            ThreadPoolExecutor(FLOOD + 4) as senders,
        ):
            alice = [
                senders.submit(
                    flooder.post, "/v1/tools/ask/run", json={"args": {"q": f"alice-{n}"}}, headers=ALICE
                )
                for n in range(FLOOD)
            ]
            per_user = live.kernel.config.script_workers_per_user
            wait_until(
                lambda: len(llm_server.requests) == per_user, "alice's running tool runs to reach the LLM"
            )
            wait_until(
                lambda: workers.waiting("alice") == FLOOD - per_user, "the rest of alice's runs to queue"
            )
            ran = client.post("/v1/tools/upper/run", json={"args": {"text": "bob"}}, headers=BOB)
            assert ran.status_code == 200, ran.text
            assert ran.json()["content"] == "BOB"
            session = client.post("/v1/sessions", json={"template": "hooked"}, headers=BOB).json()["id"]
            turn = client.post(f"/v1/sessions/{session}/messages", json={"content": "bob asks"}, headers=BOB)
            assert turn.status_code == 200, turn.text
            events = dict(sse_events(turn.text))
            assert events["reply"]["content"] == "answer to bob asks"
            assert events["notice"] == {"text": "seen"}  # the hook ran too
            assert not any(f.done() for f in alice)  # every one of alice's runs is still held
            assert workers.running("alice") == per_user
            gated.open_all()
            results = [f.result(GUARD_SECS) for f in alice]
        assert all(r.status_code == 200 and r.json()["success"] for r in results), [r.text for r in results][
            :3
        ]
