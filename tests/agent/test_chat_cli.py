"""`agentkernel chat` as a person uses it: a real subprocess, stdin, the scripted LLM over loopback.

Issue 8, item 7: the banner, slash commands, readable tool arguments, the
start-up check of the LLM, exit statuses with piped input, Ctrl-C; and the
terminal prompt itself, driven in-process through prompt_toolkit's pipe input.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import pty
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from agentkernel.cli.chat_input import PromptLines
from tests.conftest import ctrl_c_default
from tests.deployed import message_store
from tests.fakes import FakeLLMServer, FakeToolCall, HttpError, Reply
from tests.fakes.openai_server import CHAT_PATH, MODELS_PATH

BIN = Path(sys.executable).parent
WAIT_SECS = 30  # a bound for a broken chat, never a measure of a working one
KEY_VAR = "AK_TEST_KEY"


def chat_argv(project: Path, *extra: str) -> list[str]:
    return [str(BIN / "agentkernel"), "chat", "--template", "tester", "--config",
            str(project / "config" / "kernel.yaml"), *extra]  # fmt: skip


def chat(
    project: Path, stdin: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != KEY_VAR} | (env or {})
    return subprocess.run(
        chat_argv(project, *extra), input=stdin, capture_output=True, text=True, timeout=60, cwd=project,
        env=environment,
    )  # fmt: skip


def transcript(project: Path, session: str) -> list[tuple[str, str, str]]:
    """The session's records as (role, kind, content)."""
    store = message_store(project / "data" / "messages.db")
    try:
        return [(r.role, r.kind, r.content) for r in store.history(session, 1000)]
    finally:
        store.close()


def ends(project: Path, session: str) -> list[str]:
    """The end reason of each run of the session, as the message store recorded them."""
    return [content for _, kind, content in transcript(project, session) if kind == "end"]


def chat_requests(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path == CHAT_PATH]


# -- a conversation ----------------------------------------------------------------------------------


def test_chat_streams_answers_notices_tools_and_tables(
    agent_project: Path,
    llm_server: FakeLLMServer,
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "мир"}'),)),
        Reply(text="Готово: МИР"),
        Reply(text="Пока!"),
    )
    done = chat(agent_project, "громче мир\nping\nпока\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "ℹ gate saw громче мир" in out
    assert '→ upper({"text": "мир"})' in out and "✓ upper: МИР" in out
    assert "done: мир" in out  # the visual text block
    assert "Готово: МИР" in out and "pong" in out and "Пока!" in out
    assert out.index("Готово: МИР") < out.index("pong") < out.index("Пока!")


def test_tool_arguments_are_shown_as_text_not_escapes(agent_project: Path, llm_server: FakeLLMServer) -> None:
    """Servers that send `\\u0430` escapes (vLLM, Ollama) are shown as the letters they mean."""
    escaped = '{"text":"\\u043c\\u0438\\u0440"}'
    llm_server.add(Reply(tool_calls=(FakeToolCall("upper", escaped),)), Reply(text="ok"))
    done = chat(agent_project, "громче\n")
    assert done.returncode == 0, done.stderr
    assert '→ upper({"text": "мир"})' in done.stdout
    assert "\\u043c" not in done.stdout


def test_banner_names_template_model_server_and_session(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    done = chat(agent_project, "", "--session", "s-banner")
    assert done.returncode == 0, done.stderr
    banner = done.stderr.splitlines()
    assert banner[0] == f"template tester · model fake · {llm_server.base_url}"
    assert banner[1].startswith("session s-banner · /help")
    assert done.stdout == ""  # the banner keeps out of the conversation's output
    assert [(r.method, r.path) for r in llm_server.requests] == [("GET", MODELS_PATH)]
    assert not (agent_project / "data" / "chat_history").exists()  # piped input keeps no history


def test_a_session_named_goes_on_and_shows_how_its_last_message_was_answered(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    """`--session` reads the conversation back (the LLM gets it whole) and shows the last answer, however
    it came to be recorded: a server that resumed the run while this chat was away (S25.3) included."""
    llm_server.add(Reply(text="Первый ответ"), Reply(text="Второй ответ"))
    assert chat(agent_project, "первый\n", "--session", "s-back").returncode == 0
    done = chat(agent_project, "второй\n", "--session", "s-back")
    assert done.returncode == 0, done.stderr
    assert "last message: первый" in done.stderr and "its answer: Первый ответ" in done.stderr
    assert "it ended: job_done" in done.stderr
    sent = chat_requests(llm_server)[1]["messages"]
    said = [m["content"] for m in sent if m["role"] in ("user", "assistant")]
    assert said == ["первый", "Первый ответ", "второй"]


# -- slash commands ----------------------------------------------------------------------------------


def test_help_tools_session_and_unknown_commands(agent_project: Path, llm_server: FakeLLMServer) -> None:
    done = chat(agent_project, "/help\n/tools\n/session\n/nope\n", "--session", "s-cmd", "--user", "anna")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for command in ("/help", "/reset", "/tools", "/session", "/forget", "/exit"):
        assert re.search(rf"^{command} +\S", out, re.M), command
    assert "upper  Upper-case a text." in out  # the template's tool, with its description
    assert "secret" not in out  # loaded, but not this agent's
    assert re.search(r"^session +s-cmd$", out, re.M) and re.search(r"^user +anna$", out, re.M)
    assert re.search(r"^template +tester$", out, re.M) and re.search(r"^pid +[0-9a-f-]{36}$", out, re.M)
    assert "unknown command /nope; the commands are /help, /reset, /tools, /session, /forget, /exit" in out
    assert transcript(agent_project, "s-cmd") == []  # commands never reach the agent
    assert chat_requests(llm_server) == []


def test_reset_starts_a_new_session_and_exit_stops_reading(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(text="первый"), Reply(text="второй"))
    stdin = "раз\n/session\n/reset\n/session\n//два\n/exit\nтри\n"  # "три" is never sent
    done = chat(agent_project, stdin, "--session", "s-old")
    assert done.returncode == 0, done.stderr
    pids = re.findall(r"^pid +(\S+)$", done.stdout, re.M)
    new = re.search(r"^new session (\S+)$", done.stdout, re.M)
    assert new is not None and new[1] != "s-old"
    assert len(set(pids)) == 2, "a fresh process"
    assert re.findall(r"^session +(\S+)$", done.stdout, re.M) == ["s-old", new[1]]
    assert [c for _, k, c in transcript(agent_project, "s-old") if k == "user"] == ["раз"]
    assert [c for _, k, c in transcript(agent_project, new[1]) if k == "user"] == ["/два"]  # `//` escapes
    second = chat_requests(llm_server)[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user"], "the new session starts a new conversation"
    assert llm_server.unexpected == 0


# -- exit status with piped input --------------------------------------------------------------------


def test_piped_chat_exits_1_when_a_message_ended_in_error(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    llm_server.add(HttpError(400, "bad request"), Reply(text="ok"))
    done = chat(agent_project, "первый\nвторой\n", "--session", "s-err")
    assert done.returncode == 1, done.stdout + done.stderr  # the later success does not undo it
    assert "error: the LLM refused the request" in done.stdout and "ok" in done.stdout
    assert ends(agent_project, "s-err") == ["error", "job_done"]


def test_a_blocked_message_is_not_a_failure(agent_project: Path, llm_server: FakeLLMServer) -> None:
    done = chat(agent_project, "stop\n", "--session", "s-block")
    assert done.returncode == 0, done.stdout
    assert ends(agent_project, "s-block") == ["blocked"]


# -- the start-up check ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_nothing_listening_asks_whether_the_server_runs(agent_project: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    done = chat(agent_project, "hello\n", "--llm-url", url)
    assert done.returncode == 1
    assert f"nothing answers at {url}" in done.stderr
    assert f"is Ollama (or your LLM server) running at {url}?" in done.stderr
    assert "--no-check" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_404_asks_whether_the_url_ends_in_v1(agent_project: Path, llm_server: FakeLLMServer) -> None:
    without_v1 = llm_server.base_url.removesuffix("/v1")
    done = chat(agent_project, "hello\n", "--llm-url", without_v1)
    assert done.returncode == 1
    assert "HTTP 404" in done.stderr and "does the URL end in /v1?" in done.stderr
    assert chat_requests(llm_server) == []


def keyed_project(project: Path) -> None:
    """The project's kernel.yaml names the variable that holds the API key."""
    config = project / "config" / "kernel.yaml"
    config.write_text(config.read_text(encoding="utf-8") + f"  api_key_env: {KEY_VAR}\n", encoding="utf-8")


@pytest.fixture
def keyed_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(api_key="sk-right") as server:
        yield server


@pytest.mark.parametrize(
    ("key", "said", "hint"),
    [
        (None, "You didn't provide an API key.", f"variable {KEY_VAR} (llm.api_key_env) is not set"),
        ("sk-wrong", "Incorrect API key provided: ***", f"refused the key in {KEY_VAR} (llm.api_key_env)"),
    ],
)
def test_a_401_names_the_key_variable(
    agent_project: Path, keyed_server: FakeLLMServer, key: str | None, said: str, hint: str
) -> None:
    keyed_project(agent_project)
    env = {KEY_VAR: key} if key else {}
    done = chat(agent_project, "hello\n", "--llm-url", keyed_server.base_url, env=env)
    assert done.returncode == 1, done.stderr
    assert f"HTTP 401: {said}" in done.stderr and hint in done.stderr
    assert "sk-wrong" not in done.stderr  # the server echoed the key; the chat does not


def test_the_right_key_passes_the_check(agent_project: Path, keyed_server: FakeLLMServer) -> None:
    keyed_project(agent_project)
    keyed_server.add(Reply(text="добро пожаловать"))
    done = chat(agent_project, "hello\n", "--llm-url", keyed_server.base_url, env={KEY_VAR: "sk-right"})
    assert done.returncode == 0, done.stderr
    assert "добро пожаловать" in done.stdout


def test_a_model_the_server_does_not_list_is_a_warning(agent_project: Path) -> None:
    with FakeLLMServer(models=("llama3.1:latest", "qwen2.5:latest")) as server:
        server.add(Reply(text="ok"))
        done = chat(agent_project, "hi\n", "--llm-url", server.base_url)
    assert done.returncode == 0, done.stderr
    assert "⚠ model 'fake' is not among the models" in done.stderr
    assert "(llama3.1:latest, qwen2.5:latest)" in done.stderr and "ollama pull fake" in done.stderr
    assert "ok" in done.stdout


def test_no_llm_configured_fails_the_check(agent_project: Path) -> None:
    config = agent_project / "config" / "kernel.yaml"
    config.write_text(config.read_text(encoding="utf-8").split("llm:")[0], encoding="utf-8")
    done = chat(agent_project, "hello\n")
    assert done.returncode == 1
    assert "no LLM is configured" in done.stderr and "--llm-url and --model" in done.stderr


def test_no_check_starts_anyway_and_the_message_fails(agent_project: Path) -> None:
    done = chat(agent_project, "hello\n", "--llm-url", f"http://127.0.0.1:{free_port()}/v1", "--no-check")
    assert done.returncode == 1
    assert "error: the LLM is unavailable" in done.stdout
    assert "(ended: error)" in done.stdout


def test_chat_unknown_template(agent_project: Path) -> None:
    done = subprocess.run(
        [str(BIN / "agentkernel"), "chat", "--template", "nope", "--config",
         str(agent_project / "config" / "kernel.yaml")],
        input="", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and "unknown template 'nope'" in done.stderr


# -- Ctrl-C ------------------------------------------------------------------------------------------


class Output:
    """What a child process writes to one file descriptor, collected as it comes, to wait on."""

    def __init__(self, fd: int) -> None:
        self.text = ""
        self._ended = False
        self._seen = threading.Condition()
        threading.Thread(target=self._pump, args=(fd,), daemon=True).start()

    def _pump(self, fd: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # a terminal whose other side has closed
                chunk = b""
            with self._seen:
                self.text += decoder.decode(chunk, final=not chunk)
                self._ended = not chunk
                self._seen.notify_all()
            if not chunk:
                return

    def wait_ended(self) -> None:
        """Until the child has closed its side (what it wrote last is in `text`)."""
        with self._seen:
            self._seen.wait_for(lambda: self._ended, timeout=WAIT_SECS)

    def wait_for(self, piece: str, start: int = 0) -> int:
        """Where `piece` ends, once it has been written at or after `start`."""
        with self._seen:
            found = self._seen.wait_for(lambda: piece in self.text[start:], timeout=WAIT_SECS)
            assert found, f"never saw {piece!r} after {self.text[:start]!r}; then: {self.text[start:]!r}"
            return self.text.index(piece, start) + len(piece)


class Watched:
    """A chat subprocess read as it writes: on pipes, or on a terminal (a pseudo-terminal)."""

    def __init__(self, argv: list[str], cwd: Path, *, terminal: bool = False) -> None:
        # PYTHONFAULTHANDLER: a chat that hangs shows its threads' stacks when `exit_status` aborts it
        env = {
            **os.environ,
            "TERM": "xterm-256color",
            "PROMPT_TOOLKIT_NO_CPR": "1",
            "PYTHONFAULTHANDLER": "1",
        }
        if terminal:
            self.keys, child = pty.openpty()
            self.process = subprocess.Popen(
                argv, cwd=cwd, stdin=child, stdout=child, stderr=child, env=env, preexec_fn=ctrl_c_default
            )
            os.close(child)
            self.out = self.err = Output(self.keys)
        else:
            self.process = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                preexec_fn=ctrl_c_default,
            )
            assert self.process.stdout is not None and self.process.stderr is not None
            self.out, self.err = Output(self.process.stdout.fileno()), Output(self.process.stderr.fileno())

    def type(self, text: str) -> None:
        """Send text to the chat's input: a line to a pipe, keys to a terminal."""
        if self.process.stdin is None:
            os.write(self.keys, text.encode())
        else:
            self.process.stdin.write(text.encode())
            self.process.stdin.flush()

    def interrupt(self) -> None:
        self.process.send_signal(signal.SIGINT)

    def finish(self) -> int:
        if self.process.stdin is not None:
            self.process.stdin.close()
        return self.exit_status()

    def exit_status(self) -> int:
        """The chat's exit status; one that has not ended within WAIT_SECS is aborted (SIGABRT:
        its threads' stacks go to its stderr) and the test fails showing what it wrote."""
        try:
            return self.process.wait(timeout=WAIT_SECS)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(timeout=WAIT_SECS)
            self.err.wait_ended()
            raise AssertionError(f"the chat did not end; its stacks and output:\n{self.err.text}") from None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process.stdin is None:
            os.close(self.keys)


@pytest.fixture
def watch(agent_project: Path) -> Iterator[list[Watched]]:
    started: list[Watched] = []
    yield started
    for chat_process in started:
        chat_process.kill()


def test_ctrl_c_while_streaming_stops_that_answer_and_the_chat_goes_on(
    agent_project: Path, llm_server: FakeLLMServer, watch: list[Watched]
) -> None:
    # the model says "Раз ", then hangs: only Ctrl-C can end this answer in time
    llm_server.add(Reply(text="Раз два три четыре", chunk_chars=4, stall_after_chunks=2), Reply(text="Ладно"))
    chat_process = Watched(chat_argv(agent_project, "--session", "s-int"), agent_project)
    watch.append(chat_process)
    chat_process.type("считай\n")
    chat_process.out.wait_for("Раз")
    chat_process.interrupt()
    chat_process.out.wait_for("(ended: terminated)")
    chat_process.type("ещё раз\n")
    chat_process.out.wait_for("Ладно")
    assert chat_process.finish() == 0
    assert "Traceback" not in chat_process.err.text
    assert "два" not in chat_process.out.text
    assert ends(agent_project, "s-int") == ["terminated", "job_done"]
    records = transcript(agent_project, "s-int")
    assert ("assistant", "agent", "Раз ") in records  # what was shown is kept
    second = chat_requests(llm_server)[1]["messages"]
    assert [(m["role"], m["content"]) for m in second][1:] == [
        ("user", "считай"),
        ("assistant", "Раз "),
        ("user", "ещё раз"),
    ]


def test_ctrl_c_while_waiting_for_piped_input_exits_0(
    agent_project: Path, llm_server: FakeLLMServer, watch: list[Watched]
) -> None:
    chat_process = Watched(chat_argv(agent_project), agent_project)
    watch.append(chat_process)
    chat_process.err.wait_for("/help for commands")
    chat_process.interrupt()
    assert chat_process.exit_status() == 0
    assert "Traceback" not in chat_process.err.text


@pytest.mark.parametrize("key", ["\x03", "\x04"], ids=["ctrl-c", "ctrl-d"])
def test_in_a_terminal(
    agent_project: Path, llm_server: FakeLLMServer, watch: list[Watched], key: str
) -> None:
    """The whole chat on a terminal: the prompt, Ctrl-C in an answer, the history file, Ctrl-C/D to quit."""
    llm_server.add(Reply(text="Раз два три", chunk_chars=4, stall_after_chunks=2))
    chat_process = Watched(chat_argv(agent_project, "--session", "s-tty"), agent_project, terminal=True)
    watch.append(chat_process)
    seen = chat_process.out.wait_for("›")
    chat_process.type("считай\r")
    seen = chat_process.out.wait_for("Раз", seen)
    chat_process.interrupt()  # what the terminal sends for Ctrl-C while the chat is not reading keys
    seen = chat_process.out.wait_for("(ended: terminated)", seen)
    chat_process.out.wait_for("›", seen)
    chat_process.type(key)  # on an empty prompt: quit
    assert chat_process.exit_status() == 0
    assert "Traceback" not in chat_process.out.text
    assert ends(agent_project, "s-tty") == ["terminated"]
    assert "+считай" in (agent_project / "data" / "chat_history").read_text(encoding="utf-8")


# -- the terminal prompt (prompt_toolkit, in-process) --------------------------------------------------

LEFT, UP, CTRL_C, CTRL_D, ENTER = "\x1b[D", "\x1b[A", "\x03", "\x04", "\r"


@pytest.fixture
def event_loop_for_prompt() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_prompt_edits_lines_and_keeps_a_history_file(
    tmp_path: Path, event_loop_for_prompt: asyncio.AbstractEventLoop
) -> None:
    history = tmp_path / "data" / "chat_history"
    loop = event_loop_for_prompt
    with create_pipe_input() as keys:
        reader = PromptLines(history, ["/help", "/exit"], input=keys, output=DummyOutput())
        keys.send_text(f"привет wrld{LEFT * 3}o{ENTER}")  # arrows move the cursor; text goes in there
        assert reader.read(loop) == "привет world"
        keys.send_text(f"черновик{CTRL_C}другое{ENTER}")  # Ctrl-C drops the draft, the prompt stays
        assert reader.read(loop) == "другое"
        keys.send_text(f"{UP}{UP}{ENTER}")  # ↑ walks back through the lines sent
        assert reader.read(loop) == "привет world"
    completer = reader.session.completer
    assert completer is not None
    offered = [c.text for c in completer.get_completions(Document("/e"), CompleteEvent())]
    assert offered == ["/exit"]  # Tab completes the slash commands, and nothing else
    assert list(completer.get_completions(Document("привет /e"), CompleteEvent())) == []
    assert list(completer.get_completions(Document(""), CompleteEvent())) == []  # no menu on an empty line
    assert "привет world" in history.read_text(encoding="utf-8")
    with create_pipe_input() as keys:
        again = PromptLines(history, [], input=keys, output=DummyOutput())
        keys.send_text(f"{UP}{UP}{ENTER}")  # a new chat finds the old lines
        assert again.read(loop) == "другое"


@pytest.mark.parametrize("key", [CTRL_C, CTRL_D], ids=["ctrl-c", "ctrl-d"])
def test_ctrl_c_or_ctrl_d_on_an_empty_prompt_quits(
    tmp_path: Path, event_loop_for_prompt: asyncio.AbstractEventLoop, key: str
) -> None:
    with create_pipe_input() as keys:
        reader = PromptLines(tmp_path / "history", [], input=keys, output=DummyOutput())
        keys.send_text(key)
        assert reader.read(event_loop_for_prompt) is None


def test_the_command_line_alone_loads_no_chat_machinery() -> None:
    """Every `agentkernel` command builds the chat's parser; prompt_toolkit and the check wait for a chat."""
    watched = ["prompt_toolkit", "agentkernel.llm.probe", "agentkernel.cli.chat_app"]
    probe = f"import sys, agentkernel.cli.chat; print([m for m in {watched!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr
