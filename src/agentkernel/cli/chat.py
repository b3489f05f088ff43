"""`agentkernel chat --template NAME`: the command line of the terminal chat.

Every `agentkernel` command builds the whole parser, so this module imports
nothing beyond argparse: the chat itself (the kernel, the LLM check,
prompt_toolkit, rich) is in `chat_app`, loaded only when a chat runs.
"""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = commands.add_parser("chat", help="chat with an agent in the terminal")
    chat.add_argument("--template", required=True, help="the agent's template, e.g. hello-agent")
    chat.add_argument("--user", help="your user id")
    chat.add_argument("--session", help="a session id (default: a new one)")
    chat.add_argument("--llm-url", help="override llm.base_url, e.g. http://127.0.0.1:8000/v1")
    chat.add_argument("--model", help="override llm.model")
    chat.add_argument("--no-stream", action="store_true", help="wait for whole answers")
    chat.add_argument(
        "--no-check", action="store_true", help="start without first checking that the LLM server answers"
    )


def run_command(options: argparse.Namespace) -> int:
    from agentkernel.cli import chat_app

    return chat_app.run(options)
