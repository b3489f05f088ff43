"""A turn with one tool call, in process: agentkernel's CPU beside a bare httpx loop and its peers (issue 31).

    .venv/bin/python benchmarks/peers.py [--rounds 5] [--turns 200] [--warmup 20] [--only NAME,...]
        [--before SRC] [--smoke]

Every contestant plays the same turn against the same scripted OpenAI-compatible
LLM (tests/fakes, in a process of its own on 127.0.0.1, TCP_NODELAY, keep-alive):
the user's message, an LLM call that asks for the tool `upper` (its arguments
streamed in pieces), the tool's call, a second LLM call whose answer comes in 8
streamed pieces. Each turn is a new conversation. The figure is the CPU time of
the client's process (user + system, every thread: `time.process_time`) per turn,
after a warm-up; wall time is printed beside it, never compared (the machine is
shared).

Contestants, each in a fresh process of its own (one process a contestant and
round, so no one's imports, threads or garbage meet another's):

- `agentkernel`: `Kernel.chat(...)` then `send`, streamed, the turn a run as the
  server starts it (its lease taken with the run, so the transcript and the run
  journal are written) and the chat ended; the tool a one-line JavaScript script
  tool. `agentkernel-nostream`: the same, the LLM calls not streamed.
- `httpx` (the floor): a hand-written loop on one `httpx.AsyncClient` (the
  same two streamed calls, the SSE parsed, the tool a Python function);
  `httpx-nostream` the same not streamed.
- the peers, when installed (`pip install -e '.[bench]'`; a peer that is not is
  skipped, saying so): the OpenAI Agents SDK (`Runner.run_streamed`, tracing off),
  LangChain (`create_agent`, `astream` of messages), LangGraph (`create_react_agent`),
  Pydantic AI (`Agent.run_stream_events`); their tool a Python function.

Rounds are interleaved (each round runs every contestant, in a rotated order); a
contestant's figure is the median over rounds with the spread (max / min), and
the ratios (to the floor, to each peer) are the median of each round's ratio,
with their min and max. `--smoke` runs every installed contestant at a tiny size.
`--before SRC` plays agentkernel's streamed turn a second time, importing
it from SRC (the `src` folder of another checkout, as `git archive COMMIT src`
unpacks it), and prints our ratio to it: before and after in one run.
Run from the project folder (it imports tests.fakes).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes import FakeLLMServer, FakeToolCall, RecordedRequest, Reply  # noqa: E402

ANSWER = "Done: the tool answered."
INSTRUCTIONS = "Answer briefly."
UPPER_JS = "function run(args) { return args.text.toUpperCase(); }"
UPPER_YAML = (
    "kind: script_tool\nname: upper\nscript: upper.js\ndescription: Upper-case a text.\n"
    "parameters:\n  type: object\n  properties:\n    text: {type: string}\n  required: [text]\n"
)
Turn = Callable[[str], Awaitable[None]]


# -- the scripted LLM, in a process of its own ------------------------------------------------


def llm_turn(request: RecordedRequest) -> Reply:
    """The tool `upper` on the user's message, then (its result in the conversation) the answer."""
    messages = request.body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(text=ANSWER, prompt_tokens=40, completion_tokens=5)
    asked = messages[-1]["content"]
    text = asked if isinstance(asked, str) else "".join(part.get("text", "") for part in asked)
    return Reply(tool_calls=(FakeToolCall("upper", json.dumps({"text": text})),))


def serve_llm() -> None:
    """`--llm`: the scripted server until stdin closes; its base URL is the first line printed."""
    with FakeLLMServer(max_requests=10**9) as server:
        server.respond_with(llm_turn)
        print(server.base_url, flush=True)
        sys.stdin.read()


@contextmanager
def llm_process() -> Iterator[str]:
    """The scripted LLM started in a process of its own; its base URL."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--llm"],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        yield child.stdout.readline().strip()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def make_project(root: Path, llm_url: str) -> Path:
    """A project with the script tool `upper` and the template `bench` using it; its kernel.yaml."""
    config = root / "config"
    tools = config / "scripts" / "tools"
    tools.mkdir(parents=True)
    (config / "scripts" / "hooks").mkdir(parents=True)
    (tools / "upper.js").write_text(UPPER_JS)
    (tools / "upper.yaml").write_text(UPPER_YAML)
    (config / "templates").mkdir()
    (config / "templates" / "bench.yaml").write_text(
        f"name: bench\ninstructions: {INSTRUCTIONS}\ntools: [upper]\nmax_turns: 4\n"
    )
    (config / "kernel.yaml").write_text(
        "scripts:\n  tools: [config/scripts/tools]\n  hooks: [config/scripts/hooks]\n"
        f"llm:\n  base_url: {llm_url}\n  model: fake\n  max_retries: 0\n  timeout_secs: 60\n"
    )
    return config / "kernel.yaml"


# -- the contestants: each builds its turn inside the running event loop ------------------------


@dataclass
class Tally:
    """What the turns did, checked at the end: a contestant that skipped the tool or lost the answer
    would be cheap for the wrong reason."""

    tool_calls: int = 0
    answers: int = 0

    def upper(self, text: str) -> str:
        self.tool_calls += 1
        return text.upper()

    def answered(self, text: str) -> None:
        if text != ANSWER:
            raise SystemExit(f"a turn ended with {text!r}, not {ANSWER!r}")
        self.answers += 1


async def agentkernel_turn(url: str, project: Path, tally: Tally, stream: bool) -> Turn:
    from agentkernel import Kernel
    from agentkernel.agent.steps import LoopEvent
    from agentkernel.config import load_kernel_config
    from agentkernel.services.turn_leases import NewRun

    kernel = Kernel(load_kernel_config(project))
    leases = kernel.turn_leases()

    async def turn(text: str) -> None:
        chat = kernel.chat("bench", user_id="bench", stream=stream)
        session = chat.process.session_id
        assert session is not None
        run = NewRun(str(uuid.uuid4()), text, template="bench")
        lease = leases.take(session, "bench", 60.0, run=run)
        pieces: list[str] = []

        async def emit(event: LoopEvent) -> None:
            if event.kind == "token":
                pieces.append(str(event.data.get("text", "")))
            elif event.kind == "tool_result":
                tally.tool_calls += 1

        result = await chat.send(text, emit, lease=lease.token, run_id=run.id)
        if not chat.gave_back(lease.token):  # as the server: the run's end took the lease along
            leases.release(lease)
        kernel.end_chat(chat)
        if stream and "".join(pieces) != result.answer:
            raise SystemExit(f"streamed {''.join(pieces)!r}, answered {result.answer!r}")
        tally.answered(result.answer or "")

    return turn


UPPER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "upper",
        "description": "Upper-case a text.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}


async def httpx_turn(url: str, project: Path, tally: Tally, stream: bool) -> Turn:
    """The floor: what any agent must do for this turn, written by hand on one pooled client."""
    import httpx

    client = httpx.AsyncClient(base_url=url, timeout=60)

    async def call(messages: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": "fake", "messages": messages, "tools": [UPPER_TOOL]}
        if not stream:
            response = await client.post("/chat/completions", json=body)
            message: dict[str, Any] = response.json()["choices"][0]["message"]
            return message
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        async with client.stream("POST", "/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[5:])["choices"]:
                    delta = choice["delta"]
                    text.append(delta.get("content") or "")
                    for part in delta.get("tool_calls") or []:
                        slot = calls.setdefault(part["index"], {"id": "", "name": "", "arguments": ""})
                        slot["id"] = part.get("id") or slot["id"]
                        function = part.get("function") or {}
                        slot["name"] = function.get("name") or slot["name"]
                        slot["arguments"] += function.get("arguments") or ""
        tool_calls = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ]
        return {"role": "assistant", "content": "".join(text) or None, "tool_calls": tool_calls or None}

    async def turn(text: str) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": text},
        ]
        for _ in range(4):
            message = await call(messages)
            messages.append(message)
            if not message.get("tool_calls"):
                tally.answered(message.get("content") or "")
                return
            for tool_call in message["tool_calls"]:
                args = json.loads(tool_call["function"]["arguments"])
                result = await asyncio.to_thread(tally.upper, args["text"])  # as a framework runs a sync tool
                messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": result})
        raise SystemExit("the floor's turn did not end")

    return turn


async def openai_agents_turn(url: str, project: Path, tally: Tally, stream: bool) -> Turn:
    agents: Any = importlib.import_module("agents")
    openai: Any = importlib.import_module("openai")
    agents.set_tracing_disabled(True)
    model = agents.OpenAIChatCompletionsModel(
        model="fake", openai_client=openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
    )

    def upper(text: str) -> str:
        """Upper-case a text."""
        return tally.upper(text)

    agent = agents.Agent(
        name="bench", instructions=INSTRUCTIONS, model=model, tools=[agents.function_tool(upper)]
    )

    async def turn(text: str) -> None:
        if not stream:
            result = await agents.Runner.run(agent, text)
            tally.answered(str(result.final_output))
            return
        streamed = agents.Runner.run_streamed(agent, text)
        pieces = []
        async for event in streamed.stream_events():
            if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
                pieces.append(event.data.delta)
        tally.answered("".join(pieces))

    return turn


def langchain_model(url: str, stream: bool) -> Any:
    chat_openai: Any = importlib.import_module("langchain_openai").ChatOpenAI
    return chat_openai(model="fake", base_url=url, api_key="x", max_retries=0, streaming=stream)


def langchain_tool(tally: Tally) -> Any:
    tool: Any = importlib.import_module("langchain_core.tools").tool

    @tool  # type: ignore[untyped-decorator]  # imported through importlib: Any
    def upper(text: str) -> str:
        """Upper-case a text."""
        return tally.upper(text)

    return upper


async def graph_turn(graph: Any, tally: Tally, stream: bool) -> Turn:
    async def turn(text: str) -> None:
        given = {"messages": [{"role": "user", "content": text}]}
        if not stream:
            state = await graph.ainvoke(given)
            tally.answered(str(state["messages"][-1].content))
            return
        pieces = []
        async for message, meta in graph.astream(given, stream_mode="messages"):
            from_model = meta.get("langgraph_node") in ("model", "agent")
            if from_model and type(message).__name__ == "AIMessageChunk" and isinstance(message.content, str):
                pieces.append(message.content)
        tally.answered("".join(pieces))

    return turn


async def langchain_turn(url: str, project: Path, tally: Tally, stream: bool) -> Turn:
    agents: Any = importlib.import_module("langchain.agents")
    graph = agents.create_agent(
        langchain_model(url, stream), tools=[langchain_tool(tally)], system_prompt=INSTRUCTIONS
    )
    return await graph_turn(graph, tally, stream)


async def langgraph_turn(url: str, project: Path, tally: Tally, stream: bool) -> Turn:
    prebuilt: Any = importlib.import_module("langgraph.prebuilt")
    import warnings

    with warnings.catch_warnings():  # create_react_agent is deprecated for langchain's create_agent
        warnings.simplefilter("ignore")
        graph = prebuilt.create_react_agent(
            langchain_model(url, stream), tools=[langchain_tool(tally)], prompt=INSTRUCTIONS
        )
    return await graph_turn(graph, tally, stream)


async def pydantic_ai_turn(url: str, project: Path, tally: Tally, stream: bool) -> Turn:
    pydantic_ai: Any = importlib.import_module("pydantic_ai")
    models: Any = importlib.import_module("pydantic_ai.models.openai")
    providers: Any = importlib.import_module("pydantic_ai.providers.openai")
    openai: Any = importlib.import_module("openai")
    client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
    model = models.OpenAIChatModel("fake", provider=providers.OpenAIProvider(openai_client=client))
    agent = pydantic_ai.Agent(model, instructions=INSTRUCTIONS)

    @agent.tool_plain  # type: ignore[untyped-decorator]
    def upper(text: str) -> str:
        """Upper-case a text."""
        return tally.upper(text)

    async def turn(text: str) -> None:
        if not stream:
            result = await agent.run(text)
            tally.answered(str(result.output))
            return
        pieces = []
        async with agent.run_stream_events(text) as events:
            async for event in events:
                delta: Any = getattr(event, "delta", None)
                if getattr(delta, "part_delta_kind", None) == "text":
                    pieces.append(delta.content_delta)
                elif (
                    type(event).__name__ == "PartStartEvent"
                    and getattr(event.part, "part_kind", "") == "text"
                ):
                    pieces.append(event.part.content)
        tally.answered("".join(pieces))

    return turn


@dataclass(frozen=True)
class Contestant:
    name: str
    label: str
    build: Callable[[str, Path, Tally, bool], Awaitable[Turn]]
    stream: bool
    needs: tuple[str, ...] = ()  # modules that must be importable (a peer's package)
    peer: bool = True


CONTESTANTS = [
    Contestant("agentkernel", "agentkernel, streamed", agentkernel_turn, True, peer=False),
    Contestant("agentkernel-nostream", "agentkernel, not streamed", agentkernel_turn, False, peer=False),
    Contestant("httpx", "httpx loop (the floor), streamed", httpx_turn, True, peer=False),
    Contestant("httpx-nostream", "httpx loop, not streamed", httpx_turn, False, peer=False),
    Contestant("openai-agents", "OpenAI Agents SDK, streamed", openai_agents_turn, True, ("agents",)),
    Contestant("langchain", "LangChain create_agent, streamed", langchain_turn, True, ("langchain.agents",)),
    Contestant("langgraph", "LangGraph create_react_agent, streamed", langgraph_turn, True, ("langgraph",)),
    Contestant("pydantic-ai", "Pydantic AI, streamed", pydantic_ai_turn, True, ("pydantic_ai",)),
]
BEFORE = "agentkernel-before"  # agentkernel, streamed, from another source folder (`--before`)
BY_NAME = {c.name: c for c in CONTESTANTS} | {
    BEFORE: Contestant(BEFORE, "agentkernel, streamed, --before's source", agentkernel_turn, True, peer=False)
}


def installed(contestant: Contestant) -> bool:
    needs = (
        (*contestant.needs, "langchain_openai") if contestant.name.startswith("lang") else contestant.needs
    )
    try:
        return all(importlib.util.find_spec(module) is not None for module in needs)
    except ModuleNotFoundError:  # a parent package missing
        return False


# -- one contestant's run, in its own process --------------------------------------------------


async def play(contestant: Contestant, url: str, project: Path, turns: int, warmup: int) -> dict[str, float]:
    """`warmup` turns, then `turns` timed ones: CPU and wall milliseconds per turn."""
    tally = Tally()
    turn = await contestant.build(url, project, tally, contestant.stream)
    for number in range(warmup):
        await turn(f"warm-up {number}")
    cpu, wall = time.process_time(), time.perf_counter()
    for number in range(turns):
        await turn(f"message {number}")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if tally.answers != warmup + turns or tally.tool_calls != warmup + turns:
        raise SystemExit(f"{contestant.name}: {tally} after {warmup + turns} turns")
    return {"cpu_ms": cpu * 1000 / turns, "wall_ms": wall * 1000 / turns}


def run_one(
    contestant: Contestant, url: str, project: Path, turns: int, warmup: int, before: Path | None = None
) -> dict[str, float]:
    """`contestant`'s figures from a fresh process (`--run`); `agentkernel-before` imports agentkernel from
    the source folder `before` (`--before`)."""
    env = dict(os.environ)
    if contestant.name == BEFORE:
        assert before is not None
        env["PYTHONPATH"] = os.pathsep.join([str(before), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--run",
            "agentkernel" if contestant.name == BEFORE else contestant.name,
            "--url",
            url,
            "--project",
            str(project),
            "--turns",
            str(turns),
            "--warmup",
            str(warmup),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"{contestant.name} failed (status {done.returncode}):\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


# -- the figures -------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}, spread {max(values) / min(values):.2f}x"


def print_figures(rounds: list[dict[str, dict[str, float]]], played: list[Contestant]) -> None:
    print(f"\nCPU per turn of the client's process, ms (median of {len(rounds)} round(s); min-max):")
    for c in played:
        cpu = [r[c.name]["cpu_ms"] for r in rounds]
        wall = statistics.median(r[c.name]["wall_ms"] for r in rounds)
        print(f"  {c.label:<42} {statistics.median(cpu):7.2f} ms  ({spread(cpu)})  wall {wall:.2f} ms")
    print("\nratios, each round's own (median; min-max):")
    for mine in ("agentkernel", "agentkernel-nostream", BEFORE):
        floor = "httpx-nostream" if mine == "agentkernel-nostream" else "httpx"
        if mine not in rounds[0] or floor not in rounds[0]:
            continue
        peers = [c for c in played if c.peer] if mine == "agentkernel" else []  # the peers are streamed
        before = [BY_NAME[BEFORE]] if mine == "agentkernel" and BEFORE in rounds[0] else []
        for other in [BY_NAME[floor], *peers, *before]:
            ratios = [r[mine]["cpu_ms"] / r[other.name]["cpu_ms"] for r in rounds]
            line = f"{mine} / {other.name}: {statistics.median(ratios):.2f}x ({spread(ratios)})"
            if other.name == "httpx" and mine == "agentkernel":
                line += f"  target <= 2x: {'PASS' if statistics.median(ratios) <= 2 else 'MISS'}"
            elif other.peer:
                line += f"  target < 1x: {'PASS' if statistics.median(ratios) < 1 else 'MISS'}"
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--only", type=lambda s: s.split(","), default=None, help="contestants, by name")
    parser.add_argument("--smoke", action="store_true", help="every installed contestant, tiny counts")
    parser.add_argument(
        "--before",
        type=Path,
        help="a `src` folder of another checkout of agentkernel: its streamed turn is played too",
    )
    parser.add_argument("--llm", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--project", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.llm:
        return serve_llm()
    if options.run:
        figures = asyncio.run(
            play(BY_NAME[options.run], options.url, options.project, options.turns, options.warmup)
        )
        print(json.dumps(figures))
        return None
    if options.smoke:
        options.rounds, options.turns, options.warmup = 1, 3, 1
    chosen = [BY_NAME[name] for name in options.only] if options.only else CONTESTANTS
    played = []
    if options.before is not None:
        chosen = [*chosen, BY_NAME[BEFORE]]
    for contestant in chosen:
        if installed(contestant):
            played.append(contestant)
        else:
            print(f"{contestant.name}: skipped, not installed (pip install -e '.[bench]')")
    rounds: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as tmp, llm_process() as url:
        # a project (and so a message store file) a contestant: `--before`'s kernel may not read another
        # schema version's file, and no contestant's turns write into another's store
        projects = {c.name: make_project(Path(tmp) / c.name, url) for c in played}
        print(
            f"scripted LLM {url}; {options.rounds} round(s) of {options.turns} turns "
            f"(+{options.warmup} warm-up)"
        )
        for number in range(options.rounds):
            order = played[number % len(played) :] + played[: number % len(played)]
            rounds.append(
                {
                    c.name: run_one(c, url, projects[c.name], options.turns, options.warmup, options.before)
                    for c in order
                }
            )
            shown = ", ".join(f"{c.name} {rounds[-1][c.name]['cpu_ms']:.2f}" for c in played)
            print(f"round {number + 1}: CPU ms a turn: {shown}", flush=True)
    print_figures(rounds, played)


if __name__ == "__main__":
    main()
