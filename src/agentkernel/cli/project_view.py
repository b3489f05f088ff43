"""What `agentkernel check` and the `… list` commands print: the project's contents and problems.

`check` loads kernel.yaml and every tool, hook and template (a template's
tools and hooks must exist, a tool's `tests:` block must be well formed),
prints each problem as `file:line: field: what is wrong` and exits 1 when
there is any, 0 otherwise, so it can guard a commit or a deployment. The
lists print a table (or `--json`) on stdout and each file that did not load
on stderr, and exit 0 either way. Tools and hooks share one catalog, so
`tool list` and `hook list` both report every tool or hook file that did
not load. The command line is in project_cmds.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkernel.cli.common import load_kernel
from agentkernel.cli.problems import config_problem, problem_json, problem_text, shown_path

if TYPE_CHECKING:
    from agentkernel.config import ToolSpec
    from agentkernel.errors import LoadProblem
    from agentkernel.identity import Caller
    from agentkernel.kernel import Kernel

EXIT_OK, EXIT_PROBLEMS = 0, 1


# -- listings --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    """What a `… list` command shows: JSON items, table rows, and the files that did not load."""

    noun: str
    items: list[dict[str, Any]]
    rows: Sequence[tuple[str, ...]]
    problems: list[LoadProblem]
    folders: Sequence[Path]

    def print(self, as_json: bool) -> None:
        if as_json:
            document = {self.noun: self.items, "problems": [problem_json(p) for p in self.problems]}
            print(json.dumps(document, ensure_ascii=False, indent=2))
            return
        widths = [max(map(len, column)) for column in zip(*self.rows, strict=True)]
        for row in self.rows:
            cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=False)]
            print("  ".join([*cells, row[-1]]).rstrip())
        if not self.rows:
            print(f"no {self.noun} found in " + ", ".join(str(d) for d in self.folders))
        for problem in self.problems:
            print(f"not loaded: {problem_text(problem)}", file=sys.stderr)


def _tool_listing(kernel: Kernel, template: str | None = None) -> Listing:
    """Every tool; with `template`, the tools its agents may call, its MCP servers' (`srv__tool`) too."""
    specs = kernel.list_tools() if template is None else kernel.list_tools(_template_caller(kernel, template))
    items = [
        {
            "name": s.name,
            "origin": s.origin,
            "description": s.description,
            "script": str(s.script),
            "parameters": s.parameters,
            **({"mcp_server": s.raw["mcp_server"]} if "mcp_server" in s.raw else {}),
        }
        for s in specs
    ]
    rows = [(s.name, s.origin, _source(s), s.description) for s in specs]
    return Listing("tools", items, rows, kernel.problems(templates=False), kernel.config.tool_dirs)


def _template_caller(kernel: Kernel, template: str) -> Caller:
    """A caller of `template`'s agents; its MCP servers start when their tools are listed."""
    spec = kernel.template(template)  # ConfigError naming the loaded templates
    return kernel.caller(template=template, allowed_tools=spec.allowed_tools())


def _source(spec: ToolSpec) -> str:
    """Where a tool comes from: its script's file, or `server NAME` for an outside MCP server's tool."""
    server = spec.raw.get("mcp_server")
    return f"server {server}" if isinstance(server, str) else spec.script.name


def _hook_listing(kernel: Kernel) -> Listing:
    specs = kernel.list_hooks()
    items = [
        {
            "name": s.name,
            "origin": s.origin,
            "script": str(s.script),
            "events": s.events,
            "priority": s.priority,
        }
        for s in specs
    ]
    rows = [(s.name, s.origin, s.script.name, f"priority {s.priority}", _events(s.events)) for s in specs]
    return Listing("hooks", items, rows, kernel.problems(templates=False), kernel.config.hook_dirs)


def _events(events: tuple[str, ...] | None) -> str:
    return ", ".join(events) if events is not None else "every hook function it defines"


def _template_listing(kernel: Kernel) -> Listing:
    specs = kernel.list_templates()
    items = [
        {
            "name": t.name,
            "description": t.description,
            "path": str(t.yaml_path),
            "tools": list(t.tools),
            "hooks": list(t.hooks),
        }
        for t in specs
    ]
    rows = [(t.name, t.yaml_path.name if t.yaml_path else "", t.description) for t in specs]
    return Listing("templates", items, rows, kernel.problems(scripts=False), [kernel.config.templates_dir])


_LISTINGS: dict[str, Callable[[Kernel], Listing]] = {
    "tool": _tool_listing,
    "hook": _hook_listing,
    "template": _template_listing,
}


# -- check -----------------------------------------------------------------------------------


def _load_project(config: Path | str | None) -> tuple[Kernel | None, list[LoadProblem]]:
    from agentkernel.errors import ConfigError
    from agentkernel.kernel import Kernel

    try:
        return Kernel.from_config_file(Path(config) if config is not None else None, live=False), []
    except ConfigError as exc:
        return None, [config_problem(exc)]


def list_command(noun: str, config: Path | str | None, as_json: bool, template: str | None = None) -> int:
    """`tool list [--template T]`, `hook list`, `template list`: exit 0 with the listing, 1 without
    a project or with a template that does not load."""
    from agentkernel.errors import ConfigError

    with load_kernel("agentkernel", config) as kernel:  # exits 1, saying why, without a project
        try:
            listing = _tool_listing(kernel, template) if template is not None else _LISTINGS[noun](kernel)
        except ConfigError as exc:
            print(f"agentkernel {noun} list: {exc.reason}", file=sys.stderr)
            return EXIT_PROBLEMS
    listing.print(as_json)
    return EXIT_OK


def check(config: Path | str | None, as_json: bool) -> int:
    """Load everything, print every problem; 1 when there is any, 0 otherwise."""
    kernel, problems = _load_project(config)
    counts = {"tools": 0, "hooks": 0, "templates": 0}
    builtin = {"tools": 0, "hooks": 0}
    mcp: dict[str, int] = {}  # each MCP server that started: the tools it offers
    if kernel is not None:
        from agentkernel.testing.blocks import tests_problems

        with kernel:
            tools, hooks = kernel.list_tools(), kernel.list_hooks()
            mcp_problems, mcp = kernel.check_mcp_servers()
            problems = kernel.problems() + tests_problems([*tools, *hooks]) + mcp_problems
            counts = {
                "tools": sum(s.origin == "project" for s in tools),
                "hooks": sum(s.origin == "project" for s in hooks),
                "templates": len(kernel.list_templates()),
            }
            builtin = {"tools": len(tools) - counts["tools"], "hooks": len(hooks) - counts["hooks"]}
    if as_json:
        document = {
            "ok": not problems,
            "problems": [problem_json(p) for p in problems],
            **counts,
            "builtin": builtin,
            "mcp_servers": mcp,
        }
        print(json.dumps(document, ensure_ascii=False, indent=2))
    else:
        for problem in problems:
            print(problem_text(problem))
        summary = _counted(counts)
        if any(builtin.values()):
            summary += f"; built-in: {_counted(builtin)}"
        if mcp:
            servers = ", ".join(f"{name} ({_counted({'tools': n})})" for name, n in mcp.items())
            summary += f"; MCP servers: {servers}"
        noun = "problem" if len(problems) == 1 else "problems"
        print(f"found {len(problems)} {noun} ({summary} loaded)" if problems else f"ok: {summary}")
    return EXIT_PROBLEMS if problems else EXIT_OK


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {noun[:-1] if n == 1 else noun}" for noun, n in counts.items())


__all__ = ["check", "config_problem", "list_command", "problem_text", "shown_path"]
