"""`agentkernel chat --template NAME`: talk to an agent in the terminal (issue: the kernel, item 8).

Each line you type is one user message through the whole agent loop:
hooks, the LLM (streamed), tool calls, visual blocks drawn as tables and
bar charts. `/exit` or end of input quits.
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when the chat starts; `agentkernel --help` builds this parser too
    from rich.console import Console

    from agentkernel.kernel import Kernel


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = commands.add_parser("chat", help="chat with an agent in the terminal")
    chat.add_argument("--template", required=True, help="the agent's template, e.g. hello-agent")
    chat.add_argument("--config", help="kernel.yaml (default: ./config/kernel.yaml)")
    chat.add_argument("--user", help="your user id")
    chat.add_argument("--session", help="a session id (default: a new one)")
    chat.add_argument("--llm-url", help="override llm.base_url, e.g. http://127.0.0.1:8000/v1")
    chat.add_argument("--model", help="override llm.model")
    chat.add_argument("--no-stream", action="store_true", help="wait for whole answers")


def _kernel(options: argparse.Namespace) -> Kernel:
    from dataclasses import replace

    from agentkernel.config import find_kernel_config, load_kernel_config
    from agentkernel.kernel import Kernel

    config = load_kernel_config(find_kernel_config(Path(options.config) if options.config else None))
    if options.llm_url or options.model:
        llm = dict(config.llm or {})
        if options.llm_url:
            llm["base_url"] = options.llm_url
        if options.model:
            llm["model"] = options.model
        config = replace(config, llm=llm)
    return Kernel(config)


async def _chat(kernel: Kernel, options: argparse.Namespace, console: Console) -> int:
    import asyncio

    session = kernel.open_chat(
        options.template,
        user_id=options.user,
        session_id=options.session or str(uuid.uuid4()),
        stream=not options.no_stream,
    )
    from agentkernel.cli.render import ChatRenderer

    renderer = ChatRenderer(console)
    interactive = sys.stdin.isatty()
    if interactive:
        console.print(f"[dim]{options.template} (pid {session.process.pid}); /exit to quit[/dim]")
    try:
        while True:
            line = await asyncio.to_thread(_read_line, "› " if interactive else "")
            if line is None or line.strip() == "/exit":
                return 0
            if line.strip():
                await session.send(line.rstrip("\n"), renderer)
    finally:
        kernel.processes.terminate(session.process.pid)
        await kernel.aclose()


def _read_line(prompt: str) -> str | None:
    try:
        return input(prompt)
    except EOFError:
        return None


def run_command(options: argparse.Namespace) -> int:
    import asyncio

    from rich.console import Console

    from agentkernel.errors import ConfigError

    console = Console(highlight=False, soft_wrap=True)
    # the loop's errors are shown as events in the chat; its log lines would repeat them
    logging.getLogger("agentkernel.loop").setLevel(logging.ERROR)
    try:
        kernel = _kernel(options)
        return asyncio.run(_chat(kernel, options, console))
    except ConfigError as exc:
        print(f"agentkernel chat: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
