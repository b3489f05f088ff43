"""A call that waits for a person, asked in the terminal (S24.4): approve, deny or edit, y / n / e.

`agentkernel chat` shows each `approval_required` of its run with the
call's arguments and asks; the answer is a decision in the store, as the
API's would be (so a decision made meanwhile elsewhere — the page, a
link — wins, and the terminal says so). An edit's arguments are checked
against the tool's `parameters` before they are sent; an input that ends
(Ctrl-D, the end of a pipe) denies the call.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.text import Text

from agentkernel.cli.chat_input import LineReader
from agentkernel.cli.render import readable_json
from agentkernel.kernel import Kernel
from agentkernel.services.approval_values import (
    APPROVE,
    DENY,
    EDIT,
    ApprovalClosed,
    ApprovalNotFound,
    BadDecision,
)
from agentkernel.types import JSONObject
from agentkernel.util.short_text import clip

SHOWN_CHARS = 2000
CHOICES = "approve? [y]es / [n]o / [e]dit: "


class TerminalApprovals:
    """Asks the terminal's user about each call their run waits on; see the module docstring."""

    def __init__(self, kernel: Kernel, console: Console, user_id: str | None) -> None:
        self.kernel = kernel
        self.console = console
        self.user_id = user_id or ""  # a local chat's calls are asked of the local user (its session's)

    async def ask(self, reader: LineReader, data: JSONObject) -> None:
        """Show the call `data` (an `approval_required` event's) and decide it as the user answers."""
        call = data.get("call")
        if not isinstance(call, dict):
            return
        args = json.dumps(call.get("args"), ensure_ascii=False)
        self.console.print(Text(f"? {data.get('question')}", style="bold magenta"))
        self.console.print(
            Text(f"  {call.get('tool')}({clip(readable_json(args), SHOWN_CHARS)})", style="cyan")
        )
        while True:
            answer = await reader.ask(CHOICES)
            choice = (answer or "").strip().lower()[:1]
            if answer is None:
                self._decide(data, DENY, "the terminal's input ended before an answer")
                return
            if choice == "y":
                self._decide(data, APPROVE)
                return
            if choice == "n":
                reason = await reader.ask("  why (optional, the agent reads it): ")
                self._decide(data, DENY, (reason or "").strip() or None)
                return
            if choice == "e" and await self._edit(reader, data, str(call.get("tool"))):
                return

    async def _edit(self, reader: LineReader, data: JSONObject, tool: str) -> bool:
        """New arguments as JSON, checked against the tool's `parameters`; False to ask again."""
        text = await reader.ask("  new arguments (JSON): ")
        try:
            args = json.loads(text or "")
        except ValueError as exc:
            self.console.print(Text(f"  not JSON: {exc}", style="red"))
            return False
        problem = (
            "expected a JSON object" if not isinstance(args, dict) else self.kernel.edit_problem(tool, args)
        )
        if problem is not None:
            self.console.print(Text(f"  {problem}", style="red"))
            return False
        self._decide(data, EDIT, args=args)
        return True

    def _decide(
        self, data: JSONObject, decision: str, reason: str | None = None, args: JSONObject | None = None
    ) -> None:
        call = data.get("call")
        call_id = str(call.get("id")) if isinstance(call, dict) else ""
        try:
            self.kernel.approvals().decide(
                str(data.get("run_id")), call_id, self.user_id, decision, reason, args
            )
        except ApprovalClosed as exc:
            self.console.print(Text(f"  {exc}", style="yellow"))
        except (ApprovalNotFound, BadDecision) as exc:
            self.console.print(Text(f"  {exc}", style="red"))


__all__ = ["TerminalApprovals"]
