"""Everywhere the kernel runs scripts, the live services are attached (issue 12 §6, S18, S22).

The same tool runs in the agent loop (against the scripted LLM server), from
`agentkernel tool run --session --user` and from `hook_tool --live`, and sees
the same transcript; `hook_tool` without `--live` gets the manual's "no …
attached" errors. The commands run as a user runs them: real subprocesses.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.config import load_kernel_config
from tests.agent.conftest import write
from tests.fakes import FakeLLMServer, FakeToolCall, Reply

BIN = Path(sys.executable).parent


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def add_recall(project: Path) -> None:
    """A tool that searches the caller's transcript, and a hook that counts it; the template uses both."""
    tools = project / "config" / "scripts" / "tools"
    write(tools / "recall.yaml", """
        kind: script_tool
        name: recall
        description: Find earlier messages of this conversation.
        script: recall.js
        parameters: {type: object, properties: {query: {type: string}}, required: [query]}
        """)  # fmt: skip
    write(
        tools / "recall.js",
        """
        function run(args) {
          const hits = memory_search(args.query, 3).map(h => h.kind + ': ' + h.content);
          return [memory_count() + ' records', ...hits].join('\\n');
        }
        """,
    )
    hooks = project / "config" / "scripts" / "hooks"
    write(hooks / "counter.yaml", "kind: script_hook\nname: counter\nscript: counter.rhai\n")
    write(
        hooks / "counter.rhai",
        """
        fn before_user_message(ctx, msg) {
            #{ notice: `records so far: ${memory_count()}` }
        }
        """,
    )
    write(
        project / "config" / "templates" / "recaller.yaml",
        "name: recaller\ninstructions: Remember.\ntools: [recall]\nhooks: [counter]\nmax_turns: 3\n",
    )


def test_the_agent_loop_gives_a_tool_and_a_hook_their_own_transcript(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    add_recall(agent_project)
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("recall", '{"query": "поступление"}', id="c1"),)),
        Reply(text="Нашёл."),
    )
    events: list[LoopEvent] = []

    async def collect(event: LoopEvent) -> None:
        events.append(event)

    with Kernel(load_kernel_config(agent_project / "config" / "kernel.yaml")) as kernel:
        chat = kernel.chat("recaller", user_id="alice", session_id="s1")
        asyncio.run(chat.send("Пришло ли поступление от Ромашки?", collect))
        notices = [e.data["text"] for e in events if e.kind == "notice"]
        # the user's message is recorded before the hooks see it
        assert notices == ["records so far: 1"]
        (result,) = [e.data for e in events if e.kind == "tool_result"]
        # user message, hook verdict, notice, tool call: what the tool could see when it ran; the call
        # itself is recorded before the tool runs, so it finds its own arguments too
        assert str(result["content"]).splitlines() == [
            "4 records",
            'tool_call: {"query": "поступление"}',
            "user: Пришло ли поступление от Ромашки?",
        ]
        # the records carry the user: bob, naming alice's session, finds none of them
        bob = kernel.run_tool(
            "recall", {"query": "поступление"}, kernel.caller(user_id="bob", session_id="s1")
        )
        assert bob.content == "0 records"


def test_tool_run_attaches_the_transcript_of_the_given_user_and_session(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    add_recall(agent_project)
    llm_server.add(Reply(text="ok"))
    with Kernel(load_kernel_config(agent_project / "config" / "kernel.yaml")) as kernel:
        asyncio.run(
            kernel.chat("recaller", user_id="alice", session_id="s1").send("поступление 5 ₽", _ignore)
        )
    args = '{"query": "поступление"}'
    alice = run(
        "agentkernel", "tool", "run", "recall", args, "--session", "s1", "--user", "alice", cwd=agent_project
    )
    assert alice.returncode == 0, alice.stderr
    shown = json.loads(alice.stdout)
    assert shown["content"].splitlines()[1:] == ["user: поступление 5 ₽"]
    bob = run(
        "agentkernel", "tool", "run", "recall", args, "--session", "s1", "--user", "bob", cwd=agent_project
    )
    assert json.loads(bob.stdout)["content"] == "0 records"
    alone = run("agentkernel", "tool", "run", "recall", args, cwd=agent_project)
    assert "Error: memory: no session id (memory_search reads" in json.loads(alone.stdout)["error"]


def test_hook_tool_attaches_the_transcript_only_with_live(agent_project: Path) -> None:
    add_recall(agent_project)
    hook = str(agent_project / "config" / "scripts" / "hooks" / "counter.yaml")
    dead = run("hook_tool", hook, "user", "привет", "--session", "s1", cwd=agent_project)
    assert dead.returncode == 1, dead.stderr  # the call failed: no store without --live
    (line,) = [json.loads(text) for text in dead.stdout.splitlines()]
    assert line["event"] == "before_user_message"
    assert (
        "memory: no message store attached to this kernel (hook_tool attaches it with --live)"
        in line["error"]
    )
    for expected in (0, 1):  # each live run records its verdict in the session; the next one counts it
        live = run(
            "hook_tool", hook, "user", "привет", "--live", "--session", "s1", "--user", "u", cwd=agent_project
        )
        assert live.returncode == 0, live.stderr
        (line,) = [json.loads(text) for text in live.stdout.splitlines()]
        assert line["result"] == {"notice": f"records so far: {expected}"}


async def _ignore(event: LoopEvent) -> None:
    del event


def test_resuming_another_users_session_id_replays_nothing_of_theirs(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    """`chat(resume=True)` replays the records of the process's user only (kernel.md 9)."""
    llm_server.add(Reply(text="noted"), Reply(text="bob's answer"), Reply(text="alice again"))
    with Kernel(load_kernel_config(agent_project / "config" / "kernel.yaml")) as kernel:
        asyncio.run(kernel.chat("tester", user_id="alice", session_id="s1").send("my PIN is 1234", _ignore))
        asyncio.run(kernel.chat("tester", user_id="bob", session_id="s1", resume=True).send("PIN?", _ignore))
        asyncio.run(
            kernel.chat("tester", user_id="alice", session_id="s1", resume=True).send("and?", _ignore)
        )
        assert len(kernel.transcript("s1", 100, user_id="bob")) < len(kernel.transcript("s1", 100))
    bob_saw, alice_saw = (json.dumps(body["messages"], ensure_ascii=False) for body in llm_server.bodies[1:])
    assert "1234" not in bob_saw and "noted" not in bob_saw
    assert "my PIN is 1234" in alice_saw and "noted" in alice_saw and "bob" not in alice_saw
