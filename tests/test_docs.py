"""Executes the examples of the guides in docs/ (GUIDES below), so the guides cannot drift.

The marker scheme
-----------------
An example is a named sequence of steps. Each step is an HTML comment (invisible
when the markdown is rendered) on a line of its own, followed by a fenced block:

    <!-- example: NAME file: PATH -->
        The next fenced block is written to PATH. A bare file name goes to
        config/scripts/tools/; a PATH containing "/" is relative to the
        project folder (e.g. config/kernel.yaml, config/scripts/hooks/x.yaml).
        The block's first line must be a comment naming that project path
        (`# config/scripts/tools/x.yaml`, `// config/scripts/tools/x.js`,
        `// config/scripts/tools/x.rhai`), so the rendered guide, where
        markers are invisible, still says which file is which. Writing a file
        again later replaces it (hot reload). `NAME1,NAME2,...` makes the
        step one of each of those examples (a kernel.yaml several share).
        In config/kernel.yaml, `$LLM_URL` is the scripted LLM's base URL
        (below; an llm step must come first), for `llm.base_url`.

    <!-- example: NAME run[: env.VAR=VALUE ...] -->
        The next fenced block (jsonc) starts with a comment naming the call,
        `// TOOL ARGS [--user U] [--session S]`, where ARGS is a JSON value;
        the rest of the block is the expected `ToolResult.to_json()`. The call
        goes through the real kernel: `Kernel(load_kernel_config(...))
        .run_tool(TOOL, ARGS, kernel.caller(user_id=U, session_id=S))`. The
        block may leave out some of the result's five fields; every value it
        shows must match in full (nested objects with exactly these keys,
        arrays with these items), with the same JSON types (`1` is not `true`).
        `$HTTP_URL` and `$LLM_URL` in the block (the call line and the
        expected result) are replaced by the test servers' base URLs (below);
        so are they in a file step's block (`base_url: $LLM_URL` in a
        kernel.yaml, after the llm step that starts that server).

    <!-- example: NAME cli[: exit=N] [env.VAR=VALUE ...] -->
        The next fenced block (console) starts with `$ agentkernel ...`,
        `$ hook_tool ...` or `$ pytest ...`; the rest of the block is the expected output, stdout
        and stderr merged in the order printed. The command runs as a real
        subprocess in the project folder; the exit status must be N (default 0).
        `$VAR` in the command line is replaced from the environment (e.g.
        `$LLM_URL`, below). A line starting with `› ` is typed, not printed:
        its text goes to the command's stdin (a chat reading from a pipe
        shows no prompt and echoes nothing), so a block reads like the
        terminal session.

    <!-- example: NAME serve -->
        The next fenced block (console) is `$ agentkernel serve ...` (or
        `$ agentkernel dev llm ...`, the scripted LLM server) and the line
        it prints. The server runs as a real subprocess in the project
        folder until the example ends (then SIGTERM, and it must exit 0).
        The guide shows `serve` on http://127.0.0.1:8765, the default, and
        `dev llm` on the port its `--port N` names, which must not be serve's
        (a reader runs the two side by side); the test runs either on a free
        port (`--port 0`), and in this block and in cli commands and their
        output, the guide's URL stands for the real one.

        A cli block may start with a line `$ cd DIR` before its command:
        that command and the later cli and serve steps of the example run in
        DIR, relative to the folder they ran in (a project `agentkernel init
        DIR` made, say); file, run and python steps stay in the project folder.

    <!-- example: NAME cli: set.VAR=FIELD -->
        As a cli step; afterwards `$VAR` is the field FIELD of the JSON the
        command printed (`set.SESSION=id` after creating a session). A cli
        block may also start with `$ curl ...` (curl against the server of a
        serve step).

    <!-- example: NAME llm -->
        The next fenced block (jsonc) scripts the LLM: one JSON object per
        line, each the answer to the next request, in order (lines starting
        with `//` are comments): `{"text": T}` and/or
        `{"tool_calls": [{"name": N, "arguments": A, "id": I}]}` (A an
        object, or a string sent as it is; `id` optional), with an optional
        `"usage": {"prompt_tokens": P, "completion_tokens": C}` (default 10
        and 5); or `{"status": S, "message": M, "retry_after": R}`, an HTTP
        error. The scripted OpenAI-compatible server of
        agentkernel.testing (tests/fakes re-exports it) serves them on 127.0.0.1; its base URL
        is `$LLM_URL` in cli commands and `os.environ["LLM_URL"]` in python
        steps. A request past the script gets HTTP 500, and by the end of
        the example every scripted answer must have been used and no request
        may have found the script empty.

    `$HTTP_URL`
        Not a marker: in a run block or a cli command, the base URL
        (`http://127.0.0.1:PORT`) of a real HTTP server, the one of
        tests/helpers/http_server.py (`/echo` answers with a JSON description
        of the request, `/status/N` with status N, ...). It is started for
        the example the first time one of its steps names it, set as
        `os.environ["HTTP_URL"]`, and stopped when the example ends, so the
        HTTP helpers' examples (docs/scripts.md, section 8.5) talk to a real
        server without a fixed port.

    <!-- example: NAME shipped: PATH -->
        The next fenced block must be the repository's own file PATH, byte
        for byte (e.g. config/scripts/hooks/audit.rhai, as the project ships
        it); it is copied to PATH in the example's project. The guide shows
        the real file and cannot drift from it.

    <!-- example: NAME python -->
        The next fenced block (pycon) is a Python session, `>>> ` and `... `
        prompts followed by the expected output, run by `doctest` in the
        project folder (docs/rhai.md's examples of the Rhai library,
        docs/kernel.md's of the agent runtime). The python steps of one
        example share their variables.

In expected text, `...` stands for any text (paths, pids, line numbers); in a
console block a line holding only `...` stands for any number of lines. (In a
pycon block this is doctest's ELLIPSIS; an output's first line cannot begin
with `... `, which doctest reads as a continuation prompt.)
Trailing spaces at the ends of output lines are ignored.

Steps run in document order; steps of one example share one project folder
(tmp_path) and one Kernel, which starts as `config/kernel.yaml` = `{}` (all
defaults) unless the example writes its own. The examples of docs/tutorial.md
start instead where a newcomer starts, in a copy of the repository's own
`config/` folder (the shipped kernel.yaml, tools, hooks and templates), so
`agentkernel check` and the shipped tools answer there as in a fresh clone. The Kernel carries the helper
services every kernel attaches (HTTP, programs, files, DuckDB, and the state
store when `state.db_path` is set); it is closed when a new
`kernel.yaml` replaces it and when the example ends. Every fenced block in
the guide must belong to a step or be preceded by `<!-- not-run -->`, and
every HTML comment must be one of these markers:
`test_every_example_is_collected` fails otherwise, so a mistyped marker
cannot silently skip an example.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.cli.serve_cmds import DEFAULT_PORT as SERVE_PORT
from agentkernel.config import load_kernel_config
from agentkernel.helpers import default_helper_table
from tests.fakes import FakeLLMServer, FakeToolCall, HttpError, Reply
from tests.helpers.http_server import LocalHTTPServer

DOCS = Path(__file__).resolve().parent.parent / "docs"
GUIDES = {
    "tutorial": DOCS / "tutorial.md",
    "scripts": DOCS / "scripts.md",
    "rhai": DOCS / "rhai.md",
    "kernel": DOCS / "kernel.md",
    "server": DOCS / "server.md",
    "testing": DOCS / "testing.md",
    "builtins": DOCS / "builtins.md",
    "mcp": DOCS / "mcp.md",
}
FROM_SHIPPED_PROJECT = {
    "tutorial",
    "server",
    "testing",
    "mcp",
}  # guides whose examples start in a copy of the shipped config/
REPO = DOCS.parent
TOOLS_DIR = Path("config/scripts/tools")
KERNEL_YAML = Path("config/kernel.yaml")
DEFAULT_KERNEL_YAML = "# written by tests/test_docs.py: every setting at its default\n{}\n"
CLI_MODULES = {
    "agentkernel": "agentkernel.cli.main",
    "hook_tool": "agentkernel.cli.hook_tool",
    "pytest": "pytest",
}
WILDCARD = "..."
MIN_EXAMPLES = {
    "tutorial": 4,
    "scripts": 10,
    "rhai": 8,
    "kernel": 6,
    "server": 2,
    "testing": 4,
    "builtins": 2,
    "mcp": 2,
}
STEP_KINDS = {  # the kinds of step each guide must use, so that none is quietly left out
    "tutorial": {"shipped", "file", "cli", "llm"},
    "scripts": {"file", "run", "cli"},
    "rhai": {"python", "cli"},
    "kernel": {"python", "cli", "llm", "shipped"},
    "server": {"serve", "cli", "llm"},
    "testing": {"file", "cli", "serve"},
    "builtins": {"shipped", "file", "run"},
    "mcp": {"python", "file", "cli", "llm"},
}
DOC_SERVER_URL = "http://127.0.0.1:8765"  # where docs/server.md shows the server; the test's is elsewhere
TYPED = "› "  # a console line the user types (a chat's prompt)
MIN_RHAI_TOOL_EXAMPLES = 6  # examples of docs/scripts.md that write a .rhai script
SERVER_URLS = ("HTTP_URL", "LLM_URL")  # `$NAME` in a run block: a test server's base URL

_COMMENT = re.compile(r"^<!--(?P<body>.*)-->\s*$")
_MARKER = re.compile(
    r"^\s*example:\s*(?P<name>[A-Za-z0-9_-]+(?:,[A-Za-z0-9_-]+)*)\s+(?P<kind>file|run|cli|python|llm|shipped|serve)\b:?\s*(?P<rest>.*?)\s*$"
)
_NOT_RUN = "not-run"
_FENCE = re.compile(r"^```(?P<info>[^`]*)$")
_CALL = re.compile(r"^// (?P<tool>[A-Za-z0-9_-]+) (?P<rest>.+)$")


@dataclass(frozen=True)
class Step:
    """One marker and the fenced block it owns."""

    kind: str  # "file", "run", "cli", "python", "llm" or "shipped"
    rest: str  # what follows `file:`, `run:`, `cli:` or `shipped:` in the marker
    block: str  # the fenced block's text
    line: int  # the marker's line in the guide, for messages


@dataclass
class Example:
    """The steps of one example, in document order."""

    name: str
    steps: list[Step] = field(default_factory=list)
    guide: str = "scripts"  # a key of GUIDES


@dataclass
class Guide:
    """What the parser found in the guide."""

    examples: dict[str, Example]
    markers: int  # steps the marker comments make (a marker naming N examples makes N)
    problems: list[str]  # anything the parser could not place


def parse_guide(text: str, guide: str = "scripts") -> Guide:
    """Read the markers and fenced blocks of a guide; see the module docstring."""
    examples: dict[str, Example] = {}
    problems: list[str] = []
    markers = 0
    pending: tuple[str, str, str, int] | None = None  # name, kind, rest, line
    pending_not_run: int | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        number = i + 1
        fence = _FENCE.match(line)
        comment = _COMMENT.match(line.strip())
        if not fence and line.lstrip().startswith("```"):
            problems.append(f"line {number}: indented fenced blocks are not supported; start it at column 0")
        if fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j] == "```"), None)
            if end is None:
                problems.append(f"line {number}: fenced block never closed")
                break
            block = "\n".join(lines[i + 1 : end]) + "\n"
            if pending is not None:
                names, kind, rest, at = pending
                for name in names.split(","):
                    example = examples.setdefault(name, Example(name, guide=guide))
                    example.steps.append(Step(kind, rest, block, at))
            elif pending_not_run is None:
                problems.append(
                    f"line {number}: fenced block with no `<!-- example: ... -->` or `<!-- not-run -->`"
                )
            pending, pending_not_run = None, None
            i = end + 1
            continue
        if comment:
            body = comment["body"].strip()
            marker = _MARKER.match(body)
            if pending is not None or pending_not_run is not None:
                problems.append(f"line {number}: a marker must be followed by a fenced block")
            if marker:
                markers += len(marker["name"].split(","))  # one step for each example named
                pending = (marker["name"], marker["kind"], marker["rest"], number)
            elif body == _NOT_RUN:
                pending_not_run = number
            else:
                problems.append(f"line {number}: unknown marker comment {line.strip()!r}")
        elif "<!--" in line:
            problems.append(f"line {number}: an HTML comment must stand alone on its line: {line.strip()!r}")
        elif line.strip() and (pending is not None or pending_not_run is not None):
            problems.append(f"line {number}: text between a marker and its fenced block")
            pending, pending_not_run = None, None
        i += 1
    if pending is not None or pending_not_run is not None:
        problems.append("end of file: a marker without its fenced block")
    return Guide(examples, markers, problems)


PARSED = {
    key: parse_guide(path.read_text(encoding="utf-8"), key) if path.is_file() else Guide({}, 0, [])
    for key, path in GUIDES.items()
}
ALL_EXAMPLES = [example for guide in PARSED.values() for example in guide.examples.values()]


# -- matching expected against actual ------------------------------------------------


def _text_pattern(expected: str, *, multiline: bool) -> re.Pattern[str]:
    """`...` matches any text; in console output a line of only `...` matches any lines."""
    if not multiline:
        return re.compile("[\\s\\S]*?".join(re.escape(p) for p in expected.split(WILDCARD)), re.S)
    parts: list[str] = []
    for line in expected.splitlines():
        if line.strip() == WILDCARD:
            parts.append("(?:[^\\n]*\\n)*?")
        else:
            parts.append(".*?".join(re.escape(p) for p in line.rstrip().split(WILDCARD)) + "\\n")
    return re.compile("".join(parts))


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def mismatches(expected: object, actual: object, where: str = "result", *, subset: bool = True) -> list[str]:
    """Where `actual` differs from `expected`.

    The result object itself may be shown in part (`subset`); everything
    inside it must be shown in full, so a key that should be absent (say a
    table's `continuation` on the last page) is checked too.
    """
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        found = [f"{where}.{key}: missing" for key in expected if key not in actual]
        if not subset:
            found += [
                f"{where}.{key}: not expected, got {actual[key]!r}" for key in actual if key not in expected
            ]
        for key, value in expected.items():
            if key in actual:
                found.extend(mismatches(value, actual[key], f"{where}.{key}", subset=False))
        return found
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {expected!r}, got {actual!r}"]
        return [
            problem
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for problem in mismatches(e, a, f"{where}[{i}]", subset=False)
        ]
    if isinstance(expected, str) and isinstance(actual, str):
        if _text_pattern(expected, multiline=False).fullmatch(actual):
            return []
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    if _json_type(expected) != _json_type(actual) or expected != actual:
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    return []


def json_field(value: Any, path: str) -> Any:
    """`visual.0.continuation.id` of a parsed JSON answer: keys, and list indexes as numbers."""
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def output_matches(expected: str, actual: str) -> bool:
    normalised = "".join(line.rstrip() + "\n" for line in actual.rstrip().splitlines())
    return _text_pattern(expected.rstrip() + "\n", multiline=True).fullmatch(normalised) is not None


# -- running the steps ---------------------------------------------------------------


def _parse_flags(tokens: list[str], where: str) -> dict[str, str]:
    """`--user U --session S` after the arguments of a run block's call line."""
    flags: dict[str, str] = {}
    while tokens:
        flag = tokens.pop(0)
        assert flag in ("--user", "--session") and tokens, f"{where}: unexpected {flag!r} in the call line"
        flags[flag[2:]] = tokens.pop(0)
    return flags


def _options(
    tokens: list[str], allowed: set[str], where: str, *, settable: bool = False
) -> tuple[dict[str, str], dict[str, str]]:
    """`key=value` tokens → (options, env) where env holds the `env.VAR=VALUE` ones.

    `settable` also admits `set.VAR=FIELD` options (cli steps).
    """
    options: dict[str, str] = {}
    env: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep:
            raise AssertionError(f"{where}: expected key=value, got {token!r}")
        if key.startswith("env."):
            env[key[4:]] = value
        elif key in allowed or (settable and key.startswith("set.")):
            options[key] = value
        else:
            raise AssertionError(f"{where}: unknown option {key!r}")
    return options, env


def _turn(data: object, where: str) -> Reply | HttpError:
    """One line of an llm block → a scripted answer of the fake server."""
    assert isinstance(data, dict), f"{where}: each answer is a JSON object, got {data!r}"
    if "status" in data:
        assert set(data) <= {"status", "message", "retry_after"}, f"{where}: unknown keys in {data}"
        return HttpError(data["status"], data.get("message", "scripted error"), data.get("retry_after"))
    assert set(data) <= {"text", "tool_calls", "usage"}, f"{where}: unknown keys in {data}"
    calls = []
    for call in data.get("tool_calls", []):
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(FakeToolCall(call["name"], arguments, call.get("id")))
    usage = data.get("usage", {})
    return Reply(
        text=data.get("text"),
        tool_calls=tuple(calls),
        prompt_tokens=usage.get("prompt_tokens", 10),
        completion_tokens=usage.get("completion_tokens", 5),
    )


def _expand(token: str, environment: dict[str, str]) -> str:
    """`$VAR` in a command-line token → the variable's value (left as is when unset)."""
    return re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", lambda m: environment.get(m[1], m[0]), token)


class ExampleRunner:
    """Runs one example's steps in a project folder of its own."""

    def __init__(self, example: Example, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.example = example
        self.root = root
        self.cwd = root  # where cli and serve steps run; `$ cd DIR` moves it
        self.monkeypatch = monkeypatch
        self.kernel: Kernel | None = None
        self.llm: FakeLLMServer | None = None  # started by the first llm step
        self.http: LocalHTTPServer | None = None  # started by the first step naming $HTTP_URL
        self.server: subprocess.Popen[str] | None = None  # started by a serve step
        self.server_url = DOC_SERVER_URL
        self.doc_url = DOC_SERVER_URL  # where the guide shows the server of its serve step
        self.namespace: dict[str, object] = {"__name__": f"docs_{example.name}"}
        monkeypatch.delenv("AGENTKERNEL_CONFIG", raising=False)
        # the venv's programs first on PATH, as after activating it: `agentkernel` and `python` in an
        # example (docs/mcp.md starts both as MCP servers) are the ones this test runs with
        monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        if example.guide in FROM_SHIPPED_PROJECT:
            shutil.copytree(REPO / "config", root / "config", dirs_exist_ok=True)
        else:
            self._write(KERNEL_YAML, DEFAULT_KERNEL_YAML)
        for folder in (TOOLS_DIR, Path("config/scripts/hooks")):
            (root / folder).mkdir(parents=True, exist_ok=True)

    def where(self, step: Step) -> str:
        guide = GUIDES[self.example.guide].name
        return f"docs/{guide}:{step.line} (example {self.example.name!r}, {step.kind})"

    def run_all(self) -> None:
        actions = {
            "file": self.step_file,
            "run": self.step_run,
            "cli": self.step_cli,
            "python": self.step_python,
            "llm": self.step_llm,
            "shipped": self.step_shipped,
            "serve": self.step_serve,
        }
        try:
            for step in self.example.steps:
                actions[step.kind](step)
        finally:
            self._close_kernel()
            for value in self.namespace.values():  # the kernels a python session built and left open
                if isinstance(value, Kernel):
                    value.close()
            if self.http is not None:
                self.http.__exit__(None, None, None)
            self._stop_server()
            if self.llm is not None:
                self.llm.stop()
        if self.llm is not None:
            unused, unexpected = self.llm.remaining, self.llm.unexpected
            assert (unused, unexpected) == (0, 0), (
                f"example {self.example.name!r}: {unused} scripted LLM answers never asked for, "
                f"{unexpected} requests found the script empty"
            )

    def _close_kernel(self) -> None:
        """Close the kernel's helper services (DuckDB files, the state store, HTTP pools)."""
        if self.kernel is not None:
            kernel, self.kernel = self.kernel, None
            kernel.close()

    def _servers(self, text: str) -> dict[str, str]:
        """The test servers' base URLs by variable; the HTTP server starts when `text` first names it."""
        if "$HTTP_URL" in text and self.http is None:
            self.http = LocalHTTPServer().__enter__()
            self.monkeypatch.setenv("HTTP_URL", self.http.base)
        return {name: os.environ[name] for name in SERVER_URLS if name in os.environ}

    def _write(self, relative: Path, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def step_file(self, step: Step) -> None:
        relative = Path(step.rest) if "/" in step.rest else TOOLS_DIR / step.rest
        where = self.where(step)
        assert step.rest and not relative.is_absolute() and ".." not in relative.parts, where
        first = step.block.partition("\n")[0]
        assert first in (f"# {relative.as_posix()}", f"// {relative.as_posix()}"), (
            f"{where}: the block must start with a comment naming {relative.as_posix()}, got {first!r}"
        )
        self._write(relative, _expand(step.block, self._servers(step.block)))
        if relative == KERNEL_YAML:
            self._close_kernel()  # the next run reads the new settings

    def step_shipped(self, step: Step) -> None:
        relative = Path(step.rest)
        where = self.where(step)
        assert step.rest and not relative.is_absolute() and ".." not in relative.parts, where
        shipped = (REPO / relative).read_text(encoding="utf-8")
        assert step.block == shipped, f"{where}: the block is not the shipped {relative} as it is"
        self._write(relative, shipped)

    def step_llm(self, step: Step) -> None:
        where = self.where(step)
        assert not step.rest, f"{where}: an llm marker takes no options"
        lines = [line for line in step.block.splitlines() if line.strip() and not line.startswith("//")]
        if self.llm is None:
            self.llm = FakeLLMServer().start()
            self.monkeypatch.setenv("LLM_URL", self.llm.base_url)
        self.llm.add(*(_turn(json.loads(line), where) for line in lines))

    def step_run(self, step: Step) -> None:
        where = self.where(step)
        _, env = _options(shlex.split(step.rest), set(), where)
        first, _, expected_text = _expand(step.block, self._servers(step.block)).partition("\n")
        call = _CALL.match(first)
        assert call, f"{where}: a run block starts with `// TOOL ARGS [--user U] [--session S]`"
        args, end = json.JSONDecoder().raw_decode(call["rest"])
        flags = _parse_flags(shlex.split(call["rest"][end:]), where)
        for name, value in env.items():
            self.monkeypatch.setenv(name, value)
        if self.kernel is None:
            self.kernel = Kernel(load_kernel_config(self.root / KERNEL_YAML))
        kernel = self.kernel
        caller = kernel.caller(user_id=flags.get("user"), session_id=flags.get("session"))
        actual = kernel.run_tool(call["tool"], args, caller).to_json()
        found = mismatches(json.loads(expected_text), actual)
        shown = json.dumps(actual, ensure_ascii=False, indent=2)
        problems = [str(p) for p in kernel.problems()]
        assert not found, f"{where}:\n  " + "\n  ".join(found) + f"\nactual:\n{shown}\nnot loaded: {problems}"

    def _command(self, first: str, env: dict[str, str], where: str) -> tuple[list[str], dict[str, str]]:
        """A `$ command` line → (argv, environment): `$VAR` expanded, the guide's server URL the real one."""
        assert first.startswith("$ "), f"{where}: a cli block starts with `$ command`"
        self._servers(first)
        environment = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
        environment.update(env, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
        argv = [
            _expand(token, environment).replace(self.doc_url, self.server_url)
            for token in shlex.split(first[2:])
        ]
        if argv[:1] == ["curl"]:
            assert self.server is not None, f"{where}: curl before a serve step"
            return argv, environment
        assert argv and argv[0] in CLI_MODULES, f"{where}: unknown command {argv[:1]}"
        return [sys.executable, "-m", CLI_MODULES[argv[0]], *argv[1:]], environment

    def step_serve(self, step: Step) -> None:
        where = self.where(step)
        assert not step.rest and self.server is None, f"{where}: one serve step, no options"
        first, _, expected = step.block.partition("\n")
        argv, environment = self._command(first, {}, where)
        assert argv[3:4] == ["serve"] or argv[3:5] == ["dev", "llm"], f"{where}: `$ agentkernel serve`"
        argv = self._on_a_free_port(argv, where)
        self.server = subprocess.Popen(argv, cwd=self.cwd, env=environment, stdout=subprocess.PIPE, text=True)
        assert self.server.stdout is not None
        printed = self.server.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+", printed)
        assert found, f"{where}: the server printed {printed!r}"
        self.server_url = found[0]
        shown = printed.replace(self.server_url, self.doc_url)
        assert output_matches(expected, shown), f"{where}: the server printed {printed!r}"

    def _on_a_free_port(self, argv: list[str], where: str) -> list[str]:
        """`argv` on port 0; the guide's URL: the default's for serve, its `--port N`'s for dev llm."""
        if argv[3:4] == ["serve"]:
            assert "--port" not in argv, f"{where}: the default port (the test runs it on a free one)"
            return [*argv, "--port", "0"]
        at = argv.index("--port") + 1 if "--port" in argv else len(argv)
        shown = argv[at] if at < len(argv) else ""
        assert shown.isdigit() and int(shown) not in (0, SERVE_PORT), (
            f"{where}: `dev llm` names its --port, and not serve's {SERVE_PORT}: a reader runs both at once"
        )
        self.doc_url = f"http://127.0.0.1:{shown}"
        return [*argv[:at], "0", *argv[at + 1 :]]

    def _stop_server(self) -> None:
        if self.server is None:
            return
        server, self.server = self.server, None
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=120)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        assert code == 0, f"example {self.example.name!r}: the server exited {code} on SIGTERM"

    def step_cli(self, step: Step) -> None:
        where = self.where(step)
        options, env = _options(shlex.split(step.rest), {"exit"}, where, settable=True)
        first, _, output = step.block.partition("\n")
        if first.startswith("$ cd "):  # then the command, on the next line
            self.cwd = (self.cwd / first.removeprefix("$ cd ").strip()).resolve()
            assert self.cwd.is_dir(), f"{where}: no folder {self.cwd}"
            first, _, output = output.partition("\n")
        command, environment = self._command(first, env, where)
        typed = "".join(line[len(TYPED) :] + "\n" for line in output.splitlines() if line.startswith(TYPED))
        expected = "".join(line + "\n" for line in output.splitlines() if not line.startswith(TYPED))
        done = subprocess.run(
            command,
            cwd=self.cwd,
            env=environment,
            input=typed,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            timeout=120,
            check=False,
        )
        wanted = int(options.get("exit", "0"))
        printed = done.stdout.replace(self.server_url, self.doc_url)
        report = f"{where}: `{first[2:]}` exited {done.returncode}, output:\n{printed}"
        assert done.returncode == wanted, f"expected exit {wanted}; " + report
        assert output_matches(expected, printed), "output differs from the guide; " + report
        for name, field_name in options.items():
            if name.startswith("set."):
                self.monkeypatch.setenv(name[4:], str(json_field(json.loads(printed), field_name)))

    def step_python(self, step: Step) -> None:
        where = self.where(step)
        assert not step.rest, f"{where}: a python marker takes no options"
        self.monkeypatch.chdir(self.root)
        parser = doctest.DocTestParser()
        test = parser.get_doctest(step.block, self.namespace, self.example.name, where, step.line)
        assert test.examples, f"{where}: a python block holds `>>> ` examples"
        report: list[str] = []
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        outcome = runner.run(test, out=report.append, clear_globs=False)
        self.namespace = test.globs  # doctest ran on a copy; the next step goes on from here
        assert outcome.failed == 0, f"{where}: the session differs from the guide:\n" + "".join(report)


# -- the tests -----------------------------------------------------------------------


@pytest.mark.parametrize("key", list(GUIDES))
def test_every_example_is_collected(key: str) -> None:
    """No marker lost: every comment is understood, every block claimed, every example executed."""
    assert GUIDES[key].is_file(), f"{GUIDES[key]} is missing"
    guide = PARSED[key]
    assert guide.problems == []
    steps = [s for e in guide.examples.values() for s in e.steps]
    assert len(steps) == guide.markers
    idle = [e.name for e in guide.examples.values() if not any(s.kind != "file" for s in e.steps)]
    assert idle == [], "examples whose files are never run"
    assert len(guide.examples) >= MIN_EXAMPLES[key]
    assert STEP_KINDS[key] <= {s.kind for s in steps}
    scripts = {Path(s.rest).suffix for s in steps if s.kind == "file"}
    if key in ("scripts", "tutorial"):
        assert {".js", ".rhai", ".yaml"} <= scripts
    if key == "scripts":
        assert {".cjs", ".mjs"} <= scripts
        rhai = [e.name for e in guide.examples.values() if any(s.rest.endswith(".rhai") for s in e.steps)]
        assert len(rhai) >= MIN_RHAI_TOOL_EXAMPLES, rhai


def test_every_helper_has_a_js_and_a_rhai_example() -> None:
    """Each helper of the default table is called by a JavaScript and by a Rhai tool of docs/scripts.md.

    Every example is executed (test_every_example_is_collected), so each
    helper runs from both engines exactly as the guide shows it.
    """
    files = [s for e in PARSED["scripts"].examples.values() for s in e.steps if s.kind == "file"]
    for suffixes in ((".js", ".cjs", ".mjs"), (".rhai",)):
        code = "".join(s.block for s in files if s.rest.endswith(suffixes))
        missing = [
            name for name in default_helper_table().names() if not re.search(rf"\b{re.escape(name)}\(", code)
        ]
        assert missing == [], f"helpers without a {'/'.join(suffixes)} example in docs/scripts.md"


@pytest.mark.parametrize("example", ALL_EXAMPLES, ids=lambda e: f"{e.guide}:{e.name}")
def test_example(example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ExampleRunner(example, tmp_path, monkeypatch).run_all()


def test_matching_rules() -> None:
    """The matcher itself: subset objects, strict types, `...` wildcards."""
    assert mismatches({"a": 1}, {"a": 1, "b": 2}) == []
    assert mismatches({"v": [{"a": 1}]}, {"v": [{"a": 1, "b": 2}]}) != []
    assert mismatches({"a": True}, {"a": 1}) != []
    assert mismatches(["x"], ["x", "y"]) != []
    assert mismatches("Error: ... (at ...)", "Error: boom (at /tmp/x.js:1:2)") == []
    assert mismatches("Слов: 2", "Слов: 3") != []
    assert output_matches("...\nlast\n", "a\nb\nlast\n")
    assert output_matches("...\nlast\n", "last\n")
    assert output_matches("a ... c  \n", "a b c\n")
    assert not output_matches("a\n", "a\nb\n")


def test_python_steps_compare_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A python step shares its variables with the next one and fails on a wrong output."""
    steps = [Step("python", "", ">>> x = 40\n", 1), Step("python", "", ">>> x + 2\n42\n", 2)]
    ExampleRunner(Example("ok", steps, "rhai"), tmp_path, monkeypatch).run_all()
    wrong = Example("wrong", [Step("python", "", ">>> 40 + 2\n43\n", 1)], "rhai")
    with pytest.raises(AssertionError, match="differs from the guide"):
        ExampleRunner(wrong, tmp_path, monkeypatch).run_all()


def test_llm_steps_must_use_their_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scripted answer the example never asks for fails it; typed `› ` lines go to stdin."""
    unused = Example("unused", [Step("llm", "", '{"text": "never asked"}\n', 1)], "kernel")
    with pytest.raises(AssertionError, match="1 scripted LLM answers never asked for"):
        ExampleRunner(unused, tmp_path, monkeypatch).run_all()
    typed = Step("cli", "exit=2", "$ agentkernel rhai run\n› ignored\n...\n", 1)
    ExampleRunner(Example("typed", [typed], "kernel"), tmp_path, monkeypatch).run_all()
    assert _expand("--llm-url=$LLM_URL/x", {"LLM_URL": "http://h"}) == "--llm-url=http://h/x"


def test_http_url_is_a_live_server_for_the_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`$HTTP_URL` in a run block starts the example's HTTP server; it is stopped when the example ends."""
    steps = [
        Step("file", "config/kernel.yaml", "# config/kernel.yaml\nhttp:\n  allow_private: true\n", 1),
        Step(
            "file",
            "ping.yaml",
            "# config/scripts/tools/ping.yaml\nkind: script_tool\nname: ping\nscript: ping.js\n",
            1,
        ),
        Step(
            "file",
            "ping.js",
            "// config/scripts/tools/ping.js\nfunction run(a) { return http_get(a.url).body; }\n",
            2,
        ),
        Step(
            "run",
            "",
            '// ping {"url": "$HTTP_URL/status/418"}\n{"content": "status 418", "success": true}\n',
            3,
        ),
        Step(
            "run", "", '// ping {"url": "$HTTP_URL/echo"}\n{"content": "...\\"method\\": \\"GET\\"..."}\n', 4
        ),
    ]
    runner = ExampleRunner(Example("ping", steps), tmp_path, monkeypatch)
    runner.run_all()
    assert runner.http is not None and runner.http.requests == {"/status/418": 1, "/echo": 1}
    assert runner.http.stopping.is_set(), "the server was stopped"
    assert runner.kernel is None, "the example's kernel was closed"


README = REPO / "README.md"
_README_BLOCK = re.compile(r"^```[a-z]*\n(?P<body>.*?)^```$", re.S | re.M)
_PATH_COMMENT = re.compile(r"^(?:#|//) (?P<path>config/\S+)$")


def readme_blocks() -> list[str]:
    return [m["body"] for m in _README_BLOCK.finditer(README.read_text(encoding="utf-8"))]


def test_readme_shows_the_shipped_files_as_they_are() -> None:
    """A README block whose first line names a project file is that file, after its name line."""
    shown = {}
    for block in readme_blocks():
        first, _, rest = block.partition("\n")
        named = _PATH_COMMENT.match(first)
        if named:
            shown[named["path"]] = rest
    assert set(shown) >= {
        "config/scripts/tools/text_stats.yaml",
        "config/scripts/tools/text_stats.js",
        "config/scripts/tools/text_stats.rhai",
    }
    for path, text in shown.items():
        assert text == (REPO / path).read_text(encoding="utf-8"), f"README.md: {path} is not the shipped file"


_SH_BLOCK = re.compile(r"^```sh\n(?P<body>.*?)^```$", re.S | re.M)


def test_the_tutorial_installs_as_the_readme_does() -> None:
    """docs/tutorial.md's install line and its first `tool run` are the README's install and its `tool run`.

    Installing (a venv and pip) is the one command of the tutorial the docs
    test cannot run in an example's project folder; this keeps it the
    README's own, and the command that follows it there is a cli step of the
    tutorial, so that part is executed.
    """
    readme_lines = [
        line for block in _SH_BLOCK.findall(README.read_text(encoding="utf-8")) for line in block.splitlines()
    ]
    install_and_serve = readme_lines[0]
    tool_run = next(line for line in readme_lines if line.startswith("agentkernel tool run "))
    readme_first = f"{install_and_serve.rsplit(' && ', 1)[0]} && {tool_run}"
    install = _SH_BLOCK.search(GUIDES["tutorial"].read_text(encoding="utf-8"))
    assert install is not None, "docs/tutorial.md has no ```sh block with the install line"
    commands = [
        s.block.partition("\n")[0][2:]
        for e in PARSED["tutorial"].examples.values()
        for s in e.steps
        if s.kind == "cli" and s.block.startswith("$ agentkernel tool run ")
    ]
    assert commands, "docs/tutorial.md runs no tool from the command line"
    assert f"{install['body'].strip()} && {commands[0]}" == readme_first
