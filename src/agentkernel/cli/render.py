"""How a terminal shows what the agent loop emits: streamed answers, notices, tools, visual blocks."""

from __future__ import annotations

import json

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agentkernel.agent.loop import LoopEvent
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.short_text import clip
from agentkernel.util.valid_unicode import repair_text, repair_value

BAR_WIDTH = 30
SHOWN_CHARS = 200  # tool arguments and results are cut to this in the chat (the transcript keeps all)


class ChatRenderer:
    """Prints loop events as they come; the LLM's words stream in place."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.streaming = False

    async def __call__(self, event: LoopEvent) -> None:
        self.show(event)

    def show(self, event: LoopEvent) -> None:
        if event.kind == "token":
            self.console.print(Text(repair_text(str(event.data["text"]))), end="")
            self.streaming = True
            return
        self._end_stream()
        handler = getattr(self, f"_{event.kind}", None)
        if handler is not None:
            handler(_printable(event.data))

    def _end_stream(self) -> None:
        if self.streaming:
            self.console.print()
            self.streaming = False

    def _answer(self, data: JSONObject) -> None:
        if not data.get("streamed"):
            self.console.print(Text(str(data["content"]), style="bold"))

    def _notice(self, data: JSONObject) -> None:
        self.console.print(Text(f"ℹ {data['text']}", style="yellow"))

    def _tool_call(self, data: JSONObject) -> None:
        shown = clip(readable_json(str(data["arguments"])), SHOWN_CHARS)
        self.console.print(Text(f"→ {data['name']}({shown})", style="cyan"))

    def _tool_result(self, data: JSONObject) -> None:
        mark, style = ("✓", "green") if data.get("success") else ("✗", "red")
        shown = clip(str(data.get("content", "")), SHOWN_CHARS)
        self.console.print(Text(f"{mark} {data['name']}: {shown}", style=style))

    def _warning(self, data: JSONObject) -> None:
        self.console.print(Text(f"⚠ {data['message']}", style="yellow"))

    def _error(self, data: JSONObject) -> None:
        self.console.print(Text(f"error: {data['message']}", style="bold red"))

    def _end(self, data: JSONObject) -> None:
        if data.get("reason") != "job_done":
            self.console.print(Text(f"(ended: {data['reason']})", style="dim"))

    def _visual(self, data: JSONObject) -> None:
        block = data["block"]
        if not isinstance(block, dict):
            return
        kind = block.get("type")
        if kind == "table":
            self.console.print(table(block))
        elif kind == "chart":
            self.console.print(chart(block))
        elif kind == "text":
            self.console.print(Panel(Text(str(block.get("text", "")))))
        elif kind == "file":
            where = block.get("url") or block.get("path")
            self.console.print(Text(f"📎 {block.get('name')} ({where})", style="magenta"))


def _printable(data: JSONObject) -> JSONObject:
    """The event's data with lone surrogates replaced, so the terminal's UTF-8 can take it.

    Script values are repaired where they enter the kernel; this also covers
    text from elsewhere, such as an LLM server's JSON escape of half a pair.
    Repairing in place is harmless: it only makes shared text valid.
    """
    repair_value(data)
    return data


def readable_json(text: str) -> str:
    """JSON text with its `\\u0430` escapes written out as the letters they stand for; other text as it is."""
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except (ValueError, RecursionError):
        return text


def _cell(value: JSONValue) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def table(block: JSONObject) -> Table:
    """A visual table block as a terminal table; more pages are announced, not fetched."""
    columns = [c for c in block.get("columns", []) if isinstance(c, dict)]  # type: ignore[union-attr]
    view = Table(title=str(block["title"]) if block.get("title") else None)
    for column in columns:
        view.add_column(str(column.get("title") or column.get("key")))
    for row in block.get("rows", []):  # type: ignore[union-attr]
        if isinstance(row, dict):
            view.add_row(*(_cell(row.get(str(c.get("key")))) for c in columns))
    if block.get("continuation"):
        view.caption = "more rows available"
    return view


def chart(block: JSONObject) -> Text:
    """A chart block as horizontal bars, one group per series."""
    labels = [str(label) for label in block.get("labels", [])]  # type: ignore[union-attr]
    out = Text()
    if block.get("title"):
        out.append(f"{block['title']}\n", style="bold")
    for series in block.get("series", []):  # type: ignore[union-attr]
        if not isinstance(series, dict):
            continue
        data = [v if isinstance(v, int | float) else 0 for v in series.get("data", [])]  # type: ignore[union-attr]
        top = max((abs(v) for v in data), default=0) or 1
        if series.get("name"):
            out.append(f"{series['name']}\n", style="dim")
        width = max((len(label) for label in labels), default=0)
        for label, value in zip(labels, data, strict=False):
            bar = "█" * max(1, round(abs(value) / top * BAR_WIDTH)) if value else ""
            out.append(f"{label:<{width}} {bar} {value:g}\n")
    return out


__all__ = ["ChatRenderer", "chart", "readable_json", "table"]
