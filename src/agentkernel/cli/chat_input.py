"""Where the terminal chat's lines come from: an editable prompt on a terminal, plain lines from a pipe.

On a terminal, prompt_toolkit gives line editing, a history kept across
chats (a file under the project's data folder) and completion of the slash
commands. Ctrl-C clears a line being typed and, on an empty line, quits, as
Ctrl-D does. Piped input (a script, a test, `< questions.txt`) is read line
by line with no prompt, no echo and no history file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, WordCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output

from agentkernel.cli.stdin_lines import StdinLines

PROMPT = "› "


class LineReader(Protocol):
    """The chat's source of lines."""

    def read(self, loop: asyncio.AbstractEventLoop) -> str | None:
        """The next line without its line break; None when the input ends or the user quits."""
        ...

    async def ask(self, prompt: str) -> str | None:
        """A line read while an answer runs (a question the agent's run asks), None when none comes."""
        ...


class PipedLines:
    """Lines of a pipe or a file, as they come (stdin_lines.py: Ctrl-C always ends the wait)."""

    def __init__(self, stream: TextIO) -> None:
        self.lines = StdinLines(stream)

    def read(self, loop: asyncio.AbstractEventLoop) -> str | None:
        return self.lines.line()  # Ctrl-C here is a KeyboardInterrupt: the chat ends

    async def ask(self, prompt: str) -> str | None:
        return await asyncio.to_thread(self.lines.line)


class PromptLines:
    """An editable prompt with a history file; `input`/`output` replace the terminal (tests)."""

    def __init__(
        self,
        history: Path,
        commands: Sequence[str],
        *,
        input: Input | None = None,
        output: Output | None = None,
    ) -> None:
        history.parent.mkdir(parents=True, exist_ok=True)
        self.session: PromptSession[str] = PromptSession(
            history=FileHistory(history),
            completer=_SlashCommands(commands),
            key_bindings=_keys(),
            input=input,
            output=output,
        )

    def read(self, loop: asyncio.AbstractEventLoop) -> str | None:
        try:
            return loop.run_until_complete(self.session.prompt_async(PROMPT))
        except (EOFError, KeyboardInterrupt):
            return None

    async def ask(self, prompt: str) -> str | None:
        try:
            return await self.session.prompt_async(prompt)
        except (EOFError, KeyboardInterrupt):
            return None


class _SlashCommands(Completer):
    """Completes a line that starts with `/` to a command; any other line is a message, left alone."""

    def __init__(self, commands: Sequence[str]) -> None:
        self.words = WordCompleter(list(commands), sentence=True)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        if document.text_before_cursor.startswith("/"):
            yield from self.words.get_completions(document, complete_event)


def _keys() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("c-c")
    def _clear_or_quit(event: KeyPressEvent) -> None:
        """Ctrl-C drops the line being typed, as a shell does; on an empty line it quits."""
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=EOFError)

    return keys


__all__ = ["PROMPT", "LineReader", "PipedLines", "PromptLines"]
