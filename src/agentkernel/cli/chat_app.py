"""`agentkernel chat`, once it runs: the kernel, the LLM check, the banner, the conversation, the exit status.

Each line you type is one user message through the whole agent loop:
hooks, the LLM (streamed), tool calls, visual blocks drawn as tables and
bar charts. Before the first message the chat checks that the LLM server
answers (`--no-check` skips that), and prints a banner (template, model,
server, session) on stderr. `/exit`, Ctrl-D, Ctrl-C on an empty line or the
end of the input quits.

Exit status: 0; 1 when kernel.yaml, the template or the LLM check fails, and,
when the input is piped, when any message ended in a failure (`error`,
`budget_exhausted`, `max_turns`), so a script can tell; 130 when Ctrl-C
interrupts the start, or a second Ctrl-C abandons an answer.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from agentkernel.cli.chat_input import LineReader, PipedLines, PromptLines
from agentkernel.cli.chat_repl import AnswerAbandoned, TerminalChat
from agentkernel.cli.common import with_llm
from agentkernel.config import find_kernel_config, load_kernel_config
from agentkernel.errors import ConfigError
from agentkernel.kernel import Kernel
from agentkernel.llm.probe import LLMCheckFailed, LLMServer, check_llm
from agentkernel.telemetry import tracing

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
HISTORY_FILE = "chat_history"  # in the data folder (paths.data_dir)


def _kernel(options: argparse.Namespace) -> Kernel:
    config = load_kernel_config(find_kernel_config(Path(options.config) if options.config else None))
    return Kernel(with_llm(config, options.llm_url, options.model))


def _check(kernel: Kernel, loop: asyncio.AbstractEventLoop) -> LLMServer:
    """The LLM server as it answered the check; LLMCheckFailed says why it cannot be used."""
    if kernel.llm_config is None:
        raise LLMCheckFailed(
            "no LLM is configured",
            "add an `llm:` section (base_url, model) to kernel.yaml, or give --llm-url and --model",
        )
    return loop.run_until_complete(check_llm(kernel.llm_config))


def _reader(kernel: Kernel, chat: TerminalChat) -> LineReader:
    """An editable prompt on a terminal; plain lines (no history file) from anything else."""
    if sys.stdin.isatty():
        return PromptLines(kernel.config.data_dir / HISTORY_FILE, list(chat.commands))
    return PipedLines(sys.stdin)


def _chat(kernel: Kernel, options: argparse.Namespace, loop: asyncio.AbstractEventLoop) -> int:
    console = Console(highlight=False, soft_wrap=True)
    notes = Console(stderr=True, highlight=False, soft_wrap=True)
    chat = TerminalChat(
        kernel,
        options.template,
        console,
        loop,
        user_id=options.user,
        session_id=options.session,
        stream=not options.no_stream,
    )
    try:
        server = None if options.no_check else _check(kernel, loop)
    except LLMCheckFailed as failed:
        print(f"agentkernel chat: LLM check failed: {failed.problem}", file=sys.stderr)
        print(f"  {failed.hint}\n  (--no-check starts the chat without this check)", file=sys.stderr)
        chat.close()
        return EXIT_FAILED
    try:
        chat.banner(notes)
        missing = server.missing_model(chat.model) if server is not None and chat.model else None
        if missing is not None:
            notes.print(Text(f"⚠ {missing}", style="yellow"))
        chat.run(_reader(kernel, chat))
    except KeyboardInterrupt:
        pass  # Ctrl-C before the first line: the user is done
    finally:
        chat.close()
    return EXIT_FAILED if chat.failed and not sys.stdin.isatty() else EXIT_OK


def run(options: argparse.Namespace) -> int:
    """Run the chat the parsed command line describes; the exit status."""
    # the loop's errors are shown as events in the chat; its log lines would repeat them
    logging.getLogger("agentkernel.loop").setLevel(logging.ERROR)
    try:
        kernel = _kernel(options)
    except ConfigError as exc:
        print(f"agentkernel chat: {exc}", file=sys.stderr)
        return EXIT_FAILED
    loop = asyncio.new_event_loop()
    tracing.start(kernel.config.telemetry)  # the chat's runs are traces too, when traces are on (S26.1)
    try:
        return _chat(kernel, options, loop)
    except ConfigError as exc:
        print(f"agentkernel chat: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (KeyboardInterrupt, AnswerAbandoned):
        return EXIT_INTERRUPTED
    finally:
        _close(loop, kernel)


def _close(loop: asyncio.AbstractEventLoop, kernel: Kernel) -> None:
    """What `asyncio.run` does at the end: work cut off is cancelled, streams closed, threads joined."""
    try:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.run_until_complete(kernel.aclose())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()
        tracing.close()  # the spans still queued are sent
