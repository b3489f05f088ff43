"""The terminal chat's conversation: lines in, agent runs out, slash commands, Ctrl-C.

Each line is one user message through the agent loop (`ChatSession.send`),
shown as it happens by the `ChatRenderer`; a line starting with `/` is a
command (`/help` lists them) and `//text` sends `/text` as a message;
`/forget` is sent as a message, for the `memory` hook to answer.
Ctrl-C while the agent answers stops that answer: the run ends `terminated`
and is recorded like any other, and the next line is read. A second Ctrl-C
in the same answer stops waiting (for a tool still running) and quits
(`AnswerAbandoned`). Ctrl-C anywhere else (at the prompt, while a command
prints) ends the chat.

The chat runs on one event loop of its own, message by message, and reads
lines between them with the loop idle, so Ctrl-C is a plain
KeyboardInterrupt there, and goes to the chat's handler only while an answer
runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import uuid
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.text import Text

from agentkernel.agent.loop import EndReason, LoopEvent
from agentkernel.agent.session import ChatSession
from agentkernel.cli.chat_approvals import TerminalApprovals
from agentkernel.cli.chat_input import LineReader
from agentkernel.cli.render import ChatRenderer
from agentkernel.kernel import Kernel
from agentkernel.util.short_text import clip

# the runs that count as failed for the exit status of a piped chat
FAILED = frozenset({EndReason.ERROR, EndReason.BUDGET_EXHAUSTED, EndReason.MAX_TURNS})

Command = Callable[[], bool]  # False: quit
RECAP_RECORDS = 200  # how far back `--session` looks for the last message and its answer
MEMORY_HOOK = "memory"  # the built-in hook that answers `/forget` (builtins/hooks/memory.yaml)
FORGET = "/forget"


class AnswerAbandoned(Exception):
    """A second Ctrl-C while an answer was being stopped: the chat gives up on it and ends."""


class TerminalChat:
    """One chat with one template's agent; a `/reset` swaps in a new session."""

    def __init__(
        self,
        kernel: Kernel,
        template: str,
        console: Console,
        loop: asyncio.AbstractEventLoop,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        stream: bool = True,
    ) -> None:
        self.kernel = kernel
        self.template = template
        self.console = console
        self.loop = loop
        self.user_id = user_id
        self.stream = stream
        self.renderer = ChatRenderer(console)
        self.approvals = TerminalApprovals(kernel, console, user_id)
        self._reader: LineReader | None = None  # where a question of a run is answered (`run`'s)
        self.failed = False  # some run ended in FAILED
        # a session named goes on: its conversation read back from the transcript, whoever wrote it
        self.resumed = session_id is not None
        self.session = self._open(session_id or str(uuid.uuid4()), resume=self.resumed)
        self.commands: dict[str, tuple[str, Command]] = {
            "/help": ("this list", self._help),
            "/reset": ("start over: a new session, a new process, an empty conversation", self._reset),
            "/tools": ("the tools this agent may call", self._tools),
            "/session": ("the session id, user, template and pid", self._session),
            "/forget": ("the memory hook forgets what it keeps about you (sent to the agent)", self._forget),
            "/exit": ("quit (so do Ctrl-D and Ctrl-C on an empty line)", lambda: False),
        }

    # -- what the chat is talking to ----------------------------------------------------------------

    def _open(self, session_id: str, *, resume: bool = False) -> ChatSession:
        return self.kernel.chat(
            self.template, user_id=self.user_id, session_id=session_id, stream=self.stream, resume=resume
        )

    @property
    def session_id(self) -> str:
        return self.session.process.session_id or ""

    @property
    def model(self) -> str | None:
        """The model the agent asks for: its template's, else kernel.yaml's `llm.model`."""
        llm = self.kernel.llm_config
        return self.session.settings.model or (llm.model if llm is not None else None)

    def banner(self, out: Console) -> None:
        llm = self.kernel.llm_config
        where = f"model {self.model} · {llm.base_url}" if llm is not None else "no LLM configured"
        out.print(Text(f"template {self.template} · {where}", style="bold"))
        out.print(Text(f"session {self.session_id} · /help for commands, /exit to quit", style="dim"))
        if self.resumed:
            for line in self.recap():
                out.print(Text(line, style="dim"))

    def recap(self) -> list[str]:
        """The session's last message and how it was answered, as the transcript has it now: a run
        that ended while this chat was away (a server that resumed it after a crash, S25.3) shows here."""
        records = self.kernel.transcript(self.session_id, RECAP_RECORDS, user_id=self.user_id)
        asked = max((i for i, r in enumerate(records) if r.kind == "user"), default=None)
        if asked is None:
            return []
        after = records[asked + 1 :]
        answers = [r.content for r in after if r.kind == "agent"]
        end = next((r.content for r in after if r.kind == "end"), None)
        lines = [f"last message: {clip(records[asked].content, 200)}"]
        if answers:
            lines.append(f"its answer: {clip(answers[-1], 2000)}")
        lines.append(
            f"it ended: {end}" if end is not None else "it is being answered still, or was cut short"
        )
        return lines

    def close(self) -> None:
        """The chat is over: its process ends and its tool results are not needed again."""
        self.kernel.end_chat(self.session)

    # -- the conversation ---------------------------------------------------------------------------

    def run(self, reader: LineReader) -> None:
        """Read and answer lines until the input ends or the user quits (Ctrl-C between answers too)."""
        self._reader = reader
        with contextlib.suppress(KeyboardInterrupt):
            while (line := reader.read(self.loop)) is not None:
                text = line.strip()
                if text.startswith("/") and not text.startswith("//"):
                    if not self._command(text):
                        return
                elif text:
                    self._send(line[1:] if text.startswith("//") else line)

    def _send(self, text: str) -> None:
        """One run of the agent loop; Ctrl-C stops it, a second Ctrl-C abandons it."""
        presses = 0

        def interrupt() -> None:
            nonlocal presses
            presses += 1
            if presses == 1:
                self.session.stop()
            else:
                task.cancel()

        with _on_sigint(self.loop, interrupt):
            task = self.loop.create_task(self.session.send(text, self._shown))
            try:
                result = self.loop.run_until_complete(task)
            except asyncio.CancelledError:
                raise AnswerAbandoned from None
        self.failed |= result.reason in FAILED

    async def _shown(self, event: LoopEvent) -> None:
        """An event of the run shown; a call waiting for a person is asked about here (S24.4)."""
        await self.renderer(event)
        if event.kind == "approval_required" and self._reader is not None:
            await self.approvals.ask(self._reader, event.data)

    # -- slash commands ------------------------------------------------------------------------------

    def _command(self, text: str) -> bool:
        name = text.split()[0]
        found = self.commands.get(name)
        if found is None:
            listed = ", ".join(self.commands)
            self.console.print(Text(f"unknown command {name}; the commands are {listed}", style="yellow"))
            return True
        return found[1]()

    def _help(self) -> bool:
        width = max(len(name) for name in self.commands)
        for name, (what, _) in self.commands.items():
            self.console.print(Text(f"{name:<{width}}  {what}"))
        self.console.print(Text(f"{'//text':<{width}}  send /text as a message"))
        return True

    def _reset(self) -> bool:
        self.close()
        self.session = self._open(str(uuid.uuid4()))
        self.console.print(Text(f"new session {self.session_id}", style="dim"))
        return True

    def _forget(self) -> bool:
        """`/forget` goes to the agent as a message: the `memory` hook answers it (in every client alike)."""
        hook = next((h for h in self.session.settings.hooks if h.name == MEMORY_HOOK), None)
        if hook is None:
            self.console.print(Text(f"this agent has no {MEMORY_HOOK} hook; //forget sends /forget as text"))
            return True
        command = hook.raw.get("forget_command", FORGET)
        self._send(command if isinstance(command, str) else FORGET)
        return True

    def _tools(self) -> bool:
        specs = self.kernel.list_tools(self.session.process)
        if not specs:
            self.console.print(Text("this agent may call no tools"))
        width = max((len(spec.name) for spec in specs), default=0)
        for spec in specs:
            self.console.print(Text(f"{spec.name:<{width}}  {spec.description}".rstrip()))
        return True

    def _session(self) -> bool:
        process = self.session.process
        rows = {"session": self.session_id, "user": process.user_id or "(none)"}
        rows |= {"template": process.template_name, "pid": process.pid}
        for label, value in rows.items():
            self.console.print(Text(f"{label:<8}  {value}"))
        return True


@contextlib.contextmanager
def _on_sigint(loop: asyncio.AbstractEventLoop, handler: Callable[[], None]) -> Iterator[None]:
    """`handler` runs on the loop at each SIGINT while the block runs; Ctrl-C raises again after it."""
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):  # no signals here (Windows, a thread)
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


__all__ = ["FAILED", "AnswerAbandoned", "TerminalChat"]
