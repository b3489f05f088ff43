"""The command line as people expect it (issue 8, points 1, 2 and 6).

Project discovery like git's, global flags on either side of the subcommand,
arguments from stdin or a file, a quiet end when the reader of a pipe goes
away, `--pretty`, `--version`, and which modules each command imports (never
how long it takes: the suite asserts no wall time).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentkernel.config import find_kernel_config
from agentkernel.errors import ConfigError
from agentkernel.helpers import AREAS
from tests.cli.conftest import BIN, cli
from tests.conftest import REPO, write_kernel_yaml


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """A copy of the shipped project, so runs never write into the repository."""
    shutil.copytree(REPO / "config", tmp_path / "config")
    return tmp_path


# -- finding the project (point 2) ---------------------------------------------------


def test_run_by_name_from_a_subfolder_finds_the_project(shipped: Path) -> None:
    done = cli(
        "agentkernel", "tool", "run", "text_stats", '{"text": "a b"}', cwd=shipped / "config/scripts/tools"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["success"] is True


def test_run_by_path_uses_the_files_project_and_writes_nothing_beside_it(
    shipped: Path, tmp_path: Path
) -> None:
    tools = shipped / "config" / "scripts" / "tools"
    (tools / "where.js").write_text("function run() { return caller().temp_dir; }")
    (tools / "where.yaml").write_text("kind: script_tool\nname: where\nscript: where.js\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = cli("agentkernel", "tool", "run", "./where.yaml", "{}", "--session", "s1", cwd=tools)
    assert done.returncode == 0, done.stderr
    assert Path(json.loads(done.stdout)["content"]).is_relative_to(shipped.resolve() / "data")
    assert not (tools / "data").exists()
    from_far = cli(
        "agentkernel", "tool", "run", str(tools / "where.yaml"), "{}", "--session", "s2", cwd=elsewhere
    )
    assert from_far.returncode == 0, from_far.stderr
    assert list(elsewhere.iterdir()) == []


def test_no_project_says_where_it_looked(tmp_path: Path) -> None:
    (tmp_path / "x.js").write_text("function run() { return 'x'; }")
    (tmp_path / "x.yaml").write_text("kind: script_tool\nname: x\nscript: x.js\n")
    by_name = cli("agentkernel", "tool", "run", "x", "{}", cwd=tmp_path)
    by_path = cli("agentkernel", "tool", "run", "./x.yaml", "{}", cwd=tmp_path)
    hook = cli("hook_tool", "./x.yaml", "user", "hi", cwd=tmp_path)
    for done in (by_name, by_path, hook):
        assert done.returncode == 1
        assert (
            f"looked for config/kernel.yaml in {tmp_path.resolve()} and every folder above it" in done.stderr
        )
        assert "--config" in done.stderr and "AGENTKERNEL_CONFIG" in done.stderr
        assert "to make a project, run `agentkernel init` (here) or `agentkernel init DIR`" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.js", "x.yaml"]  # no stray data/


def test_discovery_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outer = write_kernel_yaml(tmp_path)
    inner = write_kernel_yaml(tmp_path / "sub" / "project")
    deep = tmp_path / "sub" / "project" / "config" / "scripts" / "tools"
    monkeypatch.delenv("AGENTKERNEL_CONFIG", raising=False)
    assert find_kernel_config(None, deep) == inner.resolve()  # the nearest wins
    assert find_kernel_config(None, tmp_path / "sub") == outer.resolve()
    monkeypatch.setenv("AGENTKERNEL_CONFIG", str(outer))
    assert find_kernel_config(None, deep) == outer  # the variable beats the search
    assert find_kernel_config(inner, deep) == inner  # --config beats the variable
    monkeypatch.setenv("AGENTKERNEL_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(
        ConfigError, match=r"missing.yaml: kernel config not found \(given by \$AGENTKERNEL_CONFIG\)"
    ):
        find_kernel_config(None, deep)


def test_the_config_variable_works_from_anywhere(shipped: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = cli(
        "agentkernel",
        "tool",
        "run",
        "text_stats",
        '{"text": "a"}',
        cwd=elsewhere,
        env={"AGENTKERNEL_CONFIG": str(shipped / "config" / "kernel.yaml")},
    )
    assert done.returncode == 0, done.stderr


# -- the CLI as people expect it (point 6) ------------------------------------------


def test_version() -> None:
    from agentkernel import __version__

    done = cli("agentkernel", "--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"agentkernel {__version__}")


def test_global_flags_before_or_after_the_subcommand(shipped: Path, tmp_path: Path) -> None:
    from agentkernel.cli.main import _parser

    parse = _parser().parse_args
    for argv in (
        ["-v", "--config", "k.yaml", "tool", "list"],
        ["tool", "list", "-v", "--config", "k.yaml"],
        ["-v", "tool", "list", "--config", "k.yaml"],
    ):
        options = parse(argv)
        assert (options.verbose, options.config) == (1, Path("k.yaml")), argv
    assert parse(["tool", "list"]).config is None
    assert parse(["-vv", "rhai", "run", "x.rhai"]).verbose == 2
    config = str(shipped / "config" / "kernel.yaml")
    before = cli(
        "agentkernel", "--config", config, "tool", "run", "text_stats", '{"text": "a"}', cwd=tmp_path
    )
    after = cli("agentkernel", "tool", "run", "text_stats", '{"text": "a"}', "--config", config, cwd=tmp_path)
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert before.stdout == after.stdout


def test_arguments_from_stdin_and_from_a_file(shipped: Path) -> None:
    piped = cli("agentkernel", "tool", "run", "text_stats", "-", cwd=shipped, stdin='{"text": "раз два"}')
    (shipped / "args.json").write_text('{"text": "раз два"}', encoding="utf-8")
    from_file = cli("agentkernel", "tool", "run", "text_stats", "@args.json", cwd=shipped)
    inline = cli("agentkernel", "tool", "run", "text_stats", '{"text": "раз два"}', cwd=shipped)
    assert piped.returncode == from_file.returncode == inline.returncode == 0
    assert json.loads(piped.stdout) == json.loads(from_file.stdout) == json.loads(inline.stdout)


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        ("-", "{oops", "standard input is not valid JSON"),
        ("@missing.json", None, "cannot read the arguments from missing.json"),
        ("{oops", None, "ARGS is not valid JSON"),
    ],
)
def test_bad_arguments_exit_2(shipped: Path, args: str, stdin: str | None, message: str) -> None:
    done = cli("agentkernel", "tool", "run", "text_stats", args, cwd=shipped, stdin=stdin)
    assert done.returncode == 2 and message in done.stderr


def test_a_closed_pipe_ends_quietly(shipped: Path) -> None:
    tools = shipped / "config" / "scripts" / "tools"
    (tools / "long.js").write_text("function run() { return 'line\\n'.repeat(200000); }")
    (tools / "long.yaml").write_text("kind: script_tool\nname: long\nscript: long.js\n")
    (shipped / "config" / "kernel.yaml").write_text(
        (shipped / "config" / "kernel.yaml").read_text() + "\n", encoding="utf-8"
    )
    command = f"'{BIN / 'agentkernel'}' tool run long '{{}}' --pretty | head -3"
    done = subprocess.run(["bash", "-c", command], cwd=shipped, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 3
    assert done.stderr == ""  # no traceback, no "Exception ignored"


def test_pretty_shows_content_tables_and_warnings(shipped: Path) -> None:
    done = cli(
        "agentkernel", "tool", "run", "wordcount", '{"text": "да да нет", "top": 2}', "--pretty", cwd=shipped
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("✓ wordcount\nСлов: 3")
    assert "┃" in done.stdout or "│" in done.stdout  # the visual table, drawn
    assert "да" in done.stdout and "нет" in done.stdout
    failed = cli("agentkernel", "tool", "run", "text_stats", '{"text": " "}', "--pretty", cwd=shipped)
    assert failed.stdout.startswith("✗ text_stats\nтекст пуст")
    assert "⚠ Не удалось проанализировать текст" in failed.stdout


def test_every_flag_has_help() -> None:
    from agentkernel.cli.common import leaf_parsers
    from agentkernel.cli.hook_tool import _parser as hook_parser
    from agentkernel.cli.main import _parser

    for parser in (*leaf_parsers(_parser()), hook_parser()):
        for action in parser._actions:
            assert action.help, f"{parser.prog}: {action.option_strings or action.dest} has no help"


# -- start-up: what each command imports (point 1) ------------------------------------

PROBE = """
import sys, contextlib, io
from agentkernel.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main({argv!r})
    except SystemExit:
        pass
print(sorted(sys.modules))
"""


def modules_after(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))
    return set(loaded)


HEAVY = {
    "httpx",
    "duckdb",
    "rich",
    "jsonschema",
    "yaml",
    "sqlite3",
    "asyncio",
    "agentkernel_quickjs",
    "fastapi",
    "uvicorn",
    "mcp",  # the MCP SDK: ~1.5 s to import, loaded only where MCP is spoken (issue 16)
    "mcp_types",
}
KERNEL = {"agentkernel.kernel", "agentkernel.services", "agentkernel.config", "agentkernel.tools.catalog"}


def test_version_and_help_import_nothing_heavy(tmp_path: Path) -> None:
    for argv in (
        ["--version"],
        ["--help"],
        ["tool", "run", "--help"],
        ["serve", "--help"],
        ["mcp", "serve", "--help"],
    ):
        loaded = modules_after(argv, tmp_path)
        assert not loaded & (HEAVY | KERNEL), (argv, loaded & (HEAVY | KERNEL))
        assert "agentkernel.rhai.engine" not in loaded


def test_rhai_run_imports_only_the_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "one.rhai"
    script.write_text("print(1)")
    loaded = modules_after(["rhai", "run", str(script)], tmp_path)
    assert "agentkernel.rhai.engine" in loaded
    assert not loaded & (HEAVY | KERNEL), loaded & (HEAVY | KERNEL)
    # a closure's name hashes with OpenSSL's sha256, parse_json needs json: each loads its module (issue 31)
    assert not loaded & {"hashlib", "_hashlib", "json"}, loaded & {"hashlib", "_hashlib", "json"}
    # paths as strings until a script imports a module: pathlib (with urllib.parse) is 6 % of it
    assert not loaded & {"pathlib", "urllib.parse"}, loaded & {"pathlib", "urllib.parse"}
    natives = {name for name in loaded if name.startswith("agentkernel.rhai.stdlib.")}
    assert natives <= {
        f"agentkernel.rhai.stdlib.{m}" for m in ("registry", "indexing", "text", "engine_natives")
    }
    script.write_text('print(parse_json("{\\"a\\": 1}").a); let f = |x| x + 1; print(f.call(1)); print(f)')
    done = cli("agentkernel", "rhai", "run", str(script))
    assert done.stdout.splitlines()[:2] == ["1", "2"], done.stderr
    assert done.stdout.splitlines()[2].startswith("Fn(anon$"), done.stdout


COMPILER = {
    "agentkernel.rhai.syntax.parser",
    "agentkernel.rhai.codegen.script_module",
    "agentkernel.rhai.compiler",
}


def test_rhai_run_of_a_text_run_before_loads_it_compiled(tmp_path: Path) -> None:
    """The compiled script is kept in the user's cache folder: the same text again is neither parsed
    nor compiled, and what a hit imports stays light (no pickle, no OpenSSL, no pathlib, no
    dataclasses, inspect, typing or importlib.util); with `--no-cache` nothing is kept."""
    script = tmp_path / "one.rhai"
    script.write_text("fn f(x) { x * 2 } print(f(21))")
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = modules_after(["rhai", "run", str(script)], tmp_path, cache)
    assert "agentkernel.rhai.syntax.parser" in first
    kept = [p.name for p in (tmp_path / "cache" / "agentkernel" / "rhai").iterdir() if p.name != "secret"]
    assert len(kept) == 1
    again = modules_after(["rhai", "run", str(script)], tmp_path, cache)
    assert not again & COMPILER, again & COMPILER
    light = {"pickle", "hashlib", "_hashlib", "hmac", "pathlib"}
    light |= {"dataclasses", "inspect", "typing", "importlib.util"}
    assert not again & light, again & light
    done = cli("agentkernel", "rhai", "run", str(script), env=cache)
    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr
    other = {"XDG_CACHE_HOME": str(tmp_path / "other")}
    assert "agentkernel.rhai.syntax.parser" in modules_after(
        ["rhai", "run", "--no-cache", str(script)], tmp_path, other
    )
    assert not (tmp_path / "other" / "agentkernel" / "rhai").exists()


def test_rhai_run_flags_are_the_runners() -> None:
    from agentkernel.cli.rhai_cmd import LIMITS_HELP
    from agentkernel.rhai.runner import LIMIT_FLAGS

    assert {flag: attribute for flag, (attribute, _) in LIMITS_HELP.items()} == LIMIT_FLAGS


def test_a_tool_run_builds_only_the_services_its_script_uses(shipped: Path) -> None:
    from agentkernel import Kernel
    from agentkernel.config import load_kernel_config
    from agentkernel.testing.parts import kernel_parts

    with Kernel(load_kernel_config(shipped / "config" / "kernel.yaml")) as kernel:
        parts = kernel_parts(kernel)
        assert kernel.run_tool("text_stats", {"text": "a b"}).success
        assert parts.services.built() == []  # no HTTP pool, no DuckDB, no state file
        # the LLM client is not built either
        assert repr(parts.llm) == "QuotaGate(MeteredProvider(DeferredProvider(None)))"
        tools = shipped / "config" / "scripts" / "tools"
        (tools / "who.js").write_text("function run() { return fs_list(caller().temp_dir).length; }")
        (tools / "who.yaml").write_text("kind: script_tool\nname: who\nscript: who.js\n")
        assert kernel.run_tool("who", {}, kernel.caller(session_id="s")).success
        assert [type(s).__name__ for s in parts.services.built()] == ["FilesService"]


# JSON Schema's validator and what it brings: a valid project read and a valid call need none (issue 31)
JSONSCHEMA = {"jsonschema", "jsonschema_specifications", "referencing", "attrs", "regex"}


def test_a_js_tool_run_imports_only_what_its_script_uses(shipped: Path, tmp_path: Path) -> None:
    argv = ["tool", "run", "text_stats", '{"text": "a b"}']
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert "yaml" in modules_after(argv, shipped, cache)  # the project's YAML parsed, and kept
    loaded = modules_after(argv, shipped, cache)  # unchanged since: the parse cache has it (issue 31)
    assert "agentkernel.kernel" in loaded and "agentkernel_quickjs" in loaded
    assert not loaded & {"yaml", "agentkernel.util.yaml_parse"}, loaded & {"yaml"}
    unused = {"httpx", "duckdb", "rich", "asyncio", "prompt_toolkit", "agentkernel.rhai.engine"}
    unused |= {"agentkernel.agent.loop", "agentkernel.llm.openai_compat", "agentkernel.services.http"}
    unused |= {"mcp", "mcp_types", "opentelemetry", "subprocess", "pickle"} | JSONSCHEMA
    unused |= {"importlib.resources", "hashlib", "secrets"}  # the JS prelude read by its path (issue 31)
    unused |= {"uuid", "platform", "shutil"}  # ids drawn without uuid, the width measured without shutil
    unused |= {f"agentkernel.helpers.{area}" for area in AREAS}  # text_stats calls no helper
    # no store, agent runtime, LLM, approvals store, logging nor pools' futures: imported when used (issue 31)
    unused |= {"sqlite3", "logging", "concurrent.futures", "queue", "datetime", "struct"}
    unused |= {f"agentkernel.{m}" for m in ("agent.hooks", "agent.processes", "llm.base", "util.addresses")}
    unused |= {f"agentkernel.services.{m}" for m in ("approvals", "memory", "turn_leases", "usage")}
    assert not loaded & unused, loaded & unused
    rhai = modules_after(["tool", "run", "text_stats_rhai", '{"text": "a b"}'], shipped)
    assert "agentkernel.rhai.engine" in rhai
    compile_cache = {"pickle", "hashlib", "secrets", "struct"}  # the Rhai compile cache's (pickle: struct)
    assert not rhai & (unused - {"agentkernel.rhai.engine"} - compile_cache), rhai & unused


def test_a_bad_call_or_project_is_still_told_by_jsonschema(shipped: Path) -> None:
    """What jsonschema is no longer imported for at start-up, it still says when something is wrong."""
    bad_args = ["tool", "run", "text_stats", '{"text": 5}']
    assert JSONSCHEMA - {"regex"} <= modules_after(bad_args, shipped)
    done = cli("agentkernel", *bad_args, cwd=shipped)
    error = json.loads(done.stdout)["error"]
    assert error == "invalid arguments for text_stats: text: 5 is not of type 'string'"
    kernel_yaml = shipped / "config" / "kernel.yaml"
    text = kernel_yaml.read_text(encoding="utf-8")
    kernel_yaml.write_text(text.replace("timeout_secs: 30 ", "timeout_secs: fast "), encoding="utf-8")
    done = cli("agentkernel", "tool", "run", "text_stats", '{"text": "a"}', cwd=shipped)
    assert done.returncode == 1 and "kernel.yaml:12: limits.timeout_secs: " in done.stderr, done.stderr


def test_check_of_a_project_without_mcp_servers_never_imports_mcp(shipped: Path) -> None:
    loaded = modules_after(["check"], shipped)
    assert "agentkernel.kernel" in loaded
    assert not loaded & {"mcp", "mcp_types", "anyio"}, loaded & {"mcp", "mcp_types", "anyio"}


def test_a_project_owned_by_someone_else_is_not_picked_up_silently(tmp_path: Path) -> None:
    if not hasattr(os, "getuid") or os.getuid() != 0:
        pytest.skip("changing a file's owner needs root")
    config = write_kernel_yaml(tmp_path)
    os.chown(config, 4242, 4242)
    inside = tmp_path / "config" / "scripts" / "tools"
    with pytest.raises(
        ConfigError, match=r"owned by another user \(uid 4242\); use it on purpose with --config"
    ):
        find_kernel_config(None, inside)
    assert find_kernel_config(config, inside) == config  # named on purpose: used


@pytest.mark.parametrize(
    ("section", "reason"),
    [
        ("duckdb:\n  max_rowz: 5\n", "duckdb.max_rowz: unknown field"),
        ("http:\n  allow_privat: true\n", "http.allow_privat: unknown field"),
        ("shell:\n  enabled: yes please\n", "shell.enabled: expected true or false"),
        ("files:\n  bogus: 1\n", "files.bogus: unknown field"),
        ("state:\n  max_value_bytes: 0\n", "state.max_value_bytes: expected an integer >= 1"),
    ],
)
def test_a_bad_helper_section_is_refused_at_start_though_services_are_lazy(
    tmp_path: Path, section: str, reason: str
) -> None:
    """Services are built on first use; their sections are still checked when the kernel starts."""
    config = write_kernel_yaml(tmp_path, section)
    tools = tmp_path / "config" / "scripts" / "tools"
    (tools / "t.js").write_text("function run() { return 'ran'; }")
    (tools / "t.yaml").write_text("kind: script_tool\nname: t\nscript: t.js\n")
    run = cli("agentkernel", "tool", "run", "t", "{}", cwd=tmp_path)
    check = cli("agentkernel", "check", cwd=tmp_path)
    assert run.returncode == check.returncode == 1
    assert f"config/kernel.yaml:5: {reason}" in run.stderr, run.stderr
    assert f"config/kernel.yaml:5: {reason}" in check.stdout, check.stdout
    assert config.is_file() and not (tmp_path / "data").exists()


def test_python_dash_m_is_the_same_command() -> None:
    from agentkernel import __version__

    done = subprocess.run(
        [sys.executable, "-m", "agentkernel", "--version"], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, f"agentkernel {__version__}")


def test_python_dash_m_exits_with_the_commands_status(tmp_path: Path) -> None:
    """A failing command fails under `python -m agentkernel` too (its status is the exit code)."""
    missing = str(tmp_path / "missing.rhai")
    by_module = subprocess.run(
        [sys.executable, "-m", "agentkernel", "rhai", "run", missing],
        capture_output=True,
        text=True,
        check=False,
    )
    by_script = cli("agentkernel", "rhai", "run", missing)
    assert by_module.returncode == by_script.returncode != 0, by_module.stderr
    assert "missing.rhai" in by_module.stderr
