"""The `agentkernel` and `hook_tool` commands, run as a user runs them: real subprocesses."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, write_kernel_yaml

BIN = Path(sys.executable).parent


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def readme_commands() -> list[str]:
    """The README's shell lines, in order: install+serve, install+tests, then init's and the tool run."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in readme.split("```sh\n")[1:]]
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_tool_run_prints_what_the_readme_shows() -> None:
    """The README's terminal example prints what the README shows, character for character."""
    command = next(c for c in readme_commands() if c.startswith("agentkernel tool run "))
    assert command == 'agentkernel tool run text_stats \'{"text": "Привет, мир"}\'', command
    done = cli("agentkernel", "tool", "run", "text_stats", '{"text": "Привет, мир"}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "content": "Символов: 11, слов: 2, предложений: 1",
        "success": True,
        "error": None,
        "visual": None,
        "warnings": [],
    }
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = readme.split("```json\n", 1)[1].split("```", 1)[0]
    assert done.stdout == shown


def test_failed_tool_still_exits_zero_with_the_failure_in_json() -> None:
    done = cli("agentkernel", "tool", "run", "text_stats", '{"text": "   "}')
    assert done.returncode == 0
    assert json.loads(done.stdout) == {
        "content": "текст пуст",
        "success": False,
        "error": "empty text",
        "visual": None,
        "warnings": ["Не удалось проанализировать текст"],
    }


def test_invalid_arguments_are_in_the_json() -> None:
    done = cli("agentkernel", "tool", "run", "text_stats", '{"txt": "x"}')
    assert done.returncode == 0
    assert (
        json.loads(done.stdout)["content"]
        == "invalid arguments for text_stats: 'text' is a required property"
    )


def test_run_by_yaml_path_from_anywhere(tmp_path: Path) -> None:
    yaml_path = REPO / "config" / "scripts" / "tools" / "wordcount.yaml"
    done = cli("agentkernel", "tool", "run", str(yaml_path), '{"text": "да да нет", "top": 1}', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["content"].startswith("Слов: 3, разных: 2. Чаще всего — да: 2")
    assert result["visual"][0]["rows"] == [{"word": "да", "count": 2}]


def test_list_shows_tools(tmp_path: Path) -> None:
    done = cli("agentkernel", "tool", "list")
    assert done.returncode == 0
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert {"text_stats", "wordcount"} <= set(names)
    listed = json.loads(cli("agentkernel", "tool", "list", "--json").stdout)
    assert {t["name"] for t in listed["tools"]} >= {"text_stats", "wordcount"}


def test_list_reports_broken_files_with_path_and_reason(tmp_path: Path) -> None:
    config = write_kernel_yaml(tmp_path)
    tools = tmp_path / "config" / "scripts" / "tools"
    (tools / "ok.js").write_text("function run() { return 'ok'; }")
    (tools / "ok.yaml").write_text("kind: script_tool\nname: ok\nscript: ok.js\n")
    (tools / "bad.yaml").write_text("kind: script_tool\nname: bad\nscript: gone.js\n")
    done = cli("agentkernel", "tool", "list", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.split()[0] == "ok"
    assert "not loaded: config/scripts/tools/bad.yaml:3: script: file 'gone.js' not found" in done.stderr

    unavailable = cli("agentkernel", "tool", "run", "bad", "{}", "--config", str(config), cwd=tmp_path)
    assert unavailable.returncode == 1
    assert unavailable.stderr == (
        "agentkernel: tool 'bad' is not available: config/scripts/tools/bad.yaml:3 failed to load: "
        "script: file 'gone.js' not found (looked at config/scripts/tools/gone.js)\n"
    )


def test_s2_5_a_tool_that_failed_to_load_says_only_why_its_file_failed(tmp_path: Path) -> None:
    config = write_kernel_yaml(tmp_path)
    tools = tmp_path / "config" / "scripts" / "tools"
    (tools / "ok.js").write_text("function run() { return 'ok'; }")
    (tools / "ok.yaml").write_text("kind: script_tool\nname: ok\nscript: ok.js\n")
    (tools / "stats.yaml").write_text(
        "kind: script_tool\nname: stats\nscript: ok.js\nparameters: {type: object, required: 5}\n"
    )
    (tools / "broken.yaml").write_text("kind: script_tool\nname: [\n")

    stats = cli("agentkernel", "tool", "run", "stats", "{}", "--config", str(config), cwd=tmp_path)
    assert (stats.returncode, stats.stdout) == (1, "")
    assert stats.stderr == (
        "agentkernel: tool 'stats' is not available: config/scripts/tools/stats.yaml:4 failed to load: "
        "parameters.required: not a valid JSON Schema: 5 is not of type 'array'\n"
    )
    broken = cli("agentkernel", "tool", "run", "broken", "{}", "--config", str(config), cwd=tmp_path)
    assert broken.returncode == 1
    assert broken.stderr.startswith(
        "agentkernel: tool 'broken' is not available: "
        "config/scripts/tools/broken.yaml:3 failed to load: bad YAML: "
    )
    assert "stats" not in broken.stderr

    unknown = cli("agentkernel", "tool", "run", "nope", "{}", "--config", str(config), cwd=tmp_path)
    assert unknown.returncode == 1
    assert unknown.stderr == (
        "agentkernel: unknown tool 'nope' (loaded: ok; 2 files failed to load, see `agentkernel tool list`)\n"
    )


def test_check_passes_on_the_shipped_project() -> None:
    done = cli("agentkernel", "check")
    assert (done.returncode, done.stderr) == (0, "")
    assert re.fullmatch(
        r"ok: \d+ tools?, \d+ hooks?, \d+ templates?(; built-in: \d+ tools?, \d+ hooks?)?\n", done.stdout
    )


def test_check_fails_on_a_broken_project(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path)
    tools = tmp_path / "config" / "scripts" / "tools"
    (tools / "t.js").write_text("function run() { return 'ok'; }")
    (tools / "t.yaml").write_text("kind: script_tool\nname: t\nscript: t.js\nparamaters: {type: object}\n")
    done = cli("agentkernel", "check", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "config/scripts/tools/t.yaml:4: paramaters: unknown field; did you mean 'parameters'?",
        "found 1 problem (0 tools, 0 hooks, 0 templates loaded)",
    ]
    listed = json.loads(cli("agentkernel", "check", "--json", cwd=tmp_path).stdout)
    assert [(p["line"], p["reason"][:11]) for p in listed["problems"]] == [(4, "paramaters:")]


def test_hook_and_template_lists_of_the_shipped_project() -> None:
    hooks = cli("agentkernel", "hook", "list")
    assert hooks.returncode == 0
    own = [line.split()[0] for line in hooks.stdout.splitlines() if line.split()[1] == "project"]
    assert own == [
        "guard",
        "moderation",
        "audit",
    ]  # run order; the built-ins are listed too, with their origin
    templates = json.loads(cli("agentkernel", "template", "list", "--json").stdout)
    assert {t["name"] for t in templates["templates"]} == {"hello-agent", "review-agent"}
    assert templates["problems"] == []


def test_user_and_session_reach_caller(tmp_path: Path) -> None:
    config = write_kernel_yaml(tmp_path)
    tools = tmp_path / "config" / "scripts" / "tools"
    (tools / "me.js").write_text(
        "function run() { const c = caller(); return `${c.user_id}|${c.session_id}|${c.temp_dir}`; }"
    )
    (tools / "me.yaml").write_text("kind: script_tool\nname: me\nscript: me.js\n")
    done = cli(
        "agentkernel", "tool", "run", "me", "{}", "--config", str(config), "--user", "u1", "--session", "s1"
    )
    user, session, temp = json.loads(done.stdout)["content"].split("|")
    assert (user, session) == ("u1", "s1")
    assert Path(temp).is_dir() and Path(temp).is_relative_to(tmp_path.resolve() / "data" / "tmp")


def test_console_log_goes_to_stderr_not_the_json(tmp_path: Path) -> None:
    config = write_kernel_yaml(tmp_path)
    tools = tmp_path / "config" / "scripts" / "tools"
    (tools / "loud.js").write_text("function run() { console.log('debug me'); return 'quiet'; }")
    (tools / "loud.yaml").write_text("kind: script_tool\nname: loud\nscript: loud.js\n")
    done = cli("agentkernel", "tool", "run", "loud", "{}", "--config", str(config))
    assert json.loads(done.stdout)["content"] == "quiet"
    assert "[tool loud] debug me" in done.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["tool", "run", "text_stats", "{not json"], 2, "ARGS is not valid JSON"),
        (["tool", "run", "no_such_tool", "{}"], 1, "unknown tool 'no_such_tool'"),
        (["tool", "run", "/nowhere/x.yaml", "{}"], 1, "/nowhere/x.yaml: no such file"),
        (
            ["tool", "list", "--config", "/nowhere/kernel.yaml"],
            1,
            "/nowhere/kernel.yaml: kernel config not found",
        ),
        (["tool"], 2, "usage:"),
    ],
)
def test_usage_errors(args: list[str], code: int, message: str) -> None:
    done = cli("agentkernel", *args)
    assert done.returncode == code
    assert message in done.stderr


# -- hook_tool (S22.1) ----------------------------------------------------------------


@pytest.fixture
def audit_hook(tmp_path: Path) -> Path:
    """A JS audit hook in the hooks folder of a project in tmp_path."""
    write_kernel_yaml(tmp_path)
    hooks = tmp_path / "config" / "scripts" / "hooks"
    (hooks / "audit.js").write_text(
        "function before_user_message(ctx, msg) {\n"
        "  return { notice: `🔍 audit: ${msg.content.length} символов` };\n}\n"
        "function after_turn(ctx, question, answer) { return `✅ ${question.content.length} → ${answer}`; }\n"
        "function after_loop(ctx, reason) { return reason; }\n",
        encoding="utf-8",
    )
    path = hooks / "audit.yaml"
    path.write_text(
        "kind: script_hook\nname: audit\nscript: audit.js\nevents: [before_user_message, after_turn]\n"
    )
    return path


def test_hook_tool_prints_each_verdict(audit_hook: Path) -> None:
    done = cli("hook_tool", str(audit_hook), "user", "Привет, мир")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        {"event": "before_user_message", "result": {"notice": "🔍 audit: 11 символов"}},
        {"event": "after_turn", "result": "✅ 11 → [object Object]"},
    ]


def test_hook_tool_without_events_runs_every_defined_function(audit_hook: Path) -> None:
    audit_hook.write_text("kind: script_hook\nname: audit\nscript: audit.js\n")
    done = cli("hook_tool", str(audit_hook), "user", "hi")
    assert [json.loads(line)["event"] for line in done.stdout.splitlines()] == [
        "before_user_message",
        "after_turn",
        "after_loop",
    ]


def test_hook_tool_reports_a_throwing_hook_and_goes_on(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path)
    tmp_path = tmp_path / "config" / "scripts" / "hooks"
    (tmp_path / "h.js").write_text(
        "function before_user_message(ctx, msg) { throw new Error('hook broke'); }\n"
        "function after_loop(ctx, reason) { return {ctx_keys: Object.keys(ctx), reason}; }\n"
    )
    (tmp_path / "h.yaml").write_text("kind: script_hook\nname: h\nscript: h.js\nflavour: mint\n")
    done = cli("hook_tool", str(tmp_path / "h.yaml"), "user", "x", "--user", "u1")
    assert done.returncode == 1, done.stderr  # a call failed: a script or CI must see it
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first["event"] == "before_user_message" and "hook broke" in first["error"]
    assert second["result"]["reason"] == "job_done"
    assert second["result"]["ctx_keys"] == ["pid", "agent", "template", "session_id", "user_id", "config"]


def test_hook_tool_exits_1_on_a_verdict_with_a_part_ignored_and_0_when_every_call_returned(
    tmp_path: Path,
) -> None:
    write_kernel_yaml(tmp_path)
    hooks = tmp_path / "config" / "scripts" / "hooks"
    (hooks / "h.yaml").write_text("kind: script_hook\nname: h\nscript: h.js\n")
    (hooks / "h.js").write_text("function before_user_message(ctx, msg) { return {notice: 5}; }\n")
    done = cli("hook_tool", str(hooks / "h.yaml"), "user", "x")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ignored part of the verdict: notice" in done.stdout
    (hooks / "h.js").write_text("function before_user_message(ctx, msg) { return {notice: 'ok'}; }\n")
    done = cli("hook_tool", str(hooks / "h.yaml"), "user", "x")
    assert done.returncode == 0, done.stdout + done.stderr


def test_hook_tool_refuses_a_tool_yaml() -> None:
    done = cli("hook_tool", str(REPO / "config/scripts/tools/text_stats.yaml"), "user", "x")
    assert done.returncode == 1 and "kind is script_tool" in done.stderr


# -- agentkernel rhai run: the reference runner's contract (issue: Rhai, runner) ---------------


def test_rhai_run_prints_output_and_result(tmp_path: Path) -> None:
    script = tmp_path / "hello.rhai"
    script.write_text(
        '#!/usr/bin/env rhai\nprint("привет"); let x = [1, 2]; x.push(3); x\n', encoding="utf-8"
    )
    done = cli("agentkernel", "rhai", "run", "--print-result", str(script))
    assert (done.returncode, done.stdout, done.stderr) == (0, "привет\narray: [1, 2, 3]\n", "")


def test_rhai_run_reads_stdin_and_reports_runtime_errors() -> None:
    done = subprocess.run(
        [str(BIN / "agentkernel"), "rhai", "run", "-"],
        input='print("before"); let a = [1]; a[5]',
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, "before\n")
    assert done.stderr == "Array index 5 out of bounds: only 1 element in array (line 1, position 33)\n"


def test_rhai_run_syntax_error_exits_2(tmp_path: Path) -> None:
    script = tmp_path / "bad.rhai"
    script.write_text("let x = 1 +;")
    done = cli("agentkernel", "rhai", "run", str(script))
    assert (done.returncode, done.stderr) == (2, "Syntax error: Unexpected ';' (line 1, position 12)\n")


def test_rhai_run_limit_flags(tmp_path: Path) -> None:
    script = tmp_path / "spin.rhai"
    script.write_text("let a = []; loop { a.push(1); }")
    ops = cli("agentkernel", "rhai", "run", "--max-operations", "1000", str(script))
    size = cli("agentkernel", "rhai", "run", "--max-array-size", "5", str(script))
    assert (ops.returncode, ops.stderr) == (1, "Too many operations (line 1, position 20)\n")
    assert (size.returncode, size.stderr.split(" (")[0]) == (1, "Size of array/BLOB too large")


def test_rhai_run_imports_relative_to_the_scripts_real_folder(tmp_path: Path) -> None:
    """Modules are found beside the script's file, links resolved; a file that cannot be read is
    named as pathlib names it (`./x` as `x`), as before `rhai run` read it without pathlib."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "util.rhai").write_text("fn twice(x) { x * 2 }\nexport const TEN = 10;\n")
    (tmp_path / "lib" / "main.rhai").write_text('import "util" as u;\nprint(u::twice(u::TEN));\n')
    (tmp_path / "main.rhai").symlink_to(tmp_path / "lib" / "main.rhai")
    done = cli("agentkernel", "rhai", "run", "./main.rhai", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "20\n", "")
    missing = cli("agentkernel", "rhai", "run", ".//gone.rhai", cwd=tmp_path)
    folder = cli("agentkernel", "rhai", "run", "lib/", cwd=tmp_path)
    assert (missing.returncode, missing.stderr) == (
        2,
        "agentkernel rhai: cannot read .//gone.rhai: [Errno 2] No such file or directory: 'gone.rhai'\n",
    )
    assert (folder.returncode, folder.stderr) == (
        2,
        "agentkernel rhai: cannot read lib/: [Errno 21] Is a directory: 'lib'\n",
    )


def test_hook_tool_live_records_verdicts_in_the_transcript(tmp_path: Path, audit_hook: Path) -> None:
    config = write_kernel_yaml(
        tmp_path, "llm:\n  base_url: http://127.0.0.1:9/v1\n  model: m\nlogging:\n  messages_db_path: t.db\n"
    )
    done = cli(
        "hook_tool", str(audit_hook), "user", "hi", "--live", "--session", "s-live", "--config", str(config)
    )
    assert done.returncode == 0, done.stderr
    assert "recorded in session s-live" in done.stderr
    from agentkernel.services.memory import SqliteMessageStore

    with SqliteMessageStore(tmp_path / "t.db") as store:
        records = store.history("s-live", 10)
    assert [r.kind for r in records] == ["hook", "hook"]
    assert records[0].content == '{"notice": "🔍 audit: 2 символов"}'  # as the agent loop records it
    assert records[0].meta == {
        "hook": "audit",
        "event": "before_user_message",
        "result": {"notice": "🔍 audit: 2 символов"},
    }


def test_hook_tool_live_needs_an_llm(tmp_path: Path, audit_hook: Path) -> None:
    config = write_kernel_yaml(tmp_path)
    done = cli("hook_tool", str(audit_hook), "user", "hi", "--live", "--config", str(config))
    assert done.returncode == 1 and "--live needs an LLM configured" in done.stderr


def test_hook_tool_without_live_leaves_no_transcript(tmp_path: Path, audit_hook: Path) -> None:
    config = write_kernel_yaml(tmp_path, "logging:\n  messages_db_path: t.db\n")
    done = cli("hook_tool", str(audit_hook), "user", "hi", "--config", str(config))
    assert done.returncode == 0 and not (tmp_path / "t.db").exists()


def test_hook_tool_takes_a_hooks_name_in_the_project(audit_hook: Path) -> None:
    """As `agentkernel tool run NAME`: the project found from the working directory."""
    by_path = cli("hook_tool", str(audit_hook), "user", "Привет, мир")
    by_name = cli("hook_tool", "audit", "user", "Привет, мир", cwd=audit_hook.parents[3])
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout == by_path.stdout
    unknown = cli("hook_tool", "audti", "user", "x", cwd=audit_hook.parents[3])
    assert unknown.returncode != 0
    assert "unknown hook 'audti' (loaded: audit)" in unknown.stderr


def test_hook_tool_live_names_the_store_database_it_recorded_in(
    tmp_path: Path, audit_hook: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With store.url the verdicts go to the database, and that is where it says they went (S27.2)."""
    config = write_kernel_yaml(tmp_path, "llm:\n  base_url: http://127.0.0.1:9/v1\n  model: m\n")
    monkeypatch.setenv("AGENTKERNEL_STORE_URL", pg_url)  # inherited by the command
    done = cli(
        "hook_tool", str(audit_hook), "user", "hi", "--live", "--session", "s-pg", "--config", str(config)
    )
    assert done.returncode == 0, done.stderr
    assert f"recorded in session s-pg of {pg_url}" in done.stderr
    from agentkernel.services.memory_pg import PostgresMessageStore

    with PostgresMessageStore(pg_url) as store:
        assert [r.kind for r in store.history("s-pg", 10)] == ["hook", "hook"]
    assert not (tmp_path / "data" / "messages.db").exists()
