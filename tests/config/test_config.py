"""Loading kernel.yaml and script YAML: S2.1–S2.5, S1.4."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.config import HookSpec, ToolSpec, load_kernel_config, load_script_spec, read_yaml
from agentkernel.config.scripts import spec_claim
from agentkernel.errors import ConfigError, LoadProblem, ScriptError
from agentkernel.helpers import default_helper_table
from agentkernel.scripting.contract import LoadedScript, ScriptEngine
from agentkernel.scripting.host import ScriptHost
from agentkernel.tools.catalog import ScriptCatalog
from agentkernel.util.file_stamps import Stamp
from agentkernel.util.near_miss import close_match, did_you_mean
from tests.conftest import ToolFactory, write_kernel_yaml


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- kernel.yaml (S2.4) ------------------------------------------------------------


def test_embedded_defaults_root_at_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_kernel_config(None)
    assert config.tool_dirs == (tmp_path / "config/scripts/tools",)
    assert config.hook_dirs == (tmp_path / "config/scripts/hooks",)
    assert config.limits.max_operations == 100_000_000


def test_relative_paths_resolve_against_the_project(tmp_path: Path) -> None:
    path = write_kernel_yaml(tmp_path, "limits:\n  timeout_secs: 5\npaths:\n  temp_root: scratch\n")
    config = load_kernel_config(path)
    assert config.root == tmp_path.resolve()
    assert config.tool_dirs == (tmp_path.resolve() / "config/scripts/tools",)
    assert config.temp_root == tmp_path.resolve() / "scratch"
    assert config.limits.timeout_secs == 5


def test_the_script_pool_settings_load_and_default(tmp_path: Path) -> None:
    config = load_kernel_config(write_kernel_yaml(tmp_path, "scripts:\n  max_workers_per_user: 2\n"))
    assert (config.script_workers, config.script_workers_per_user) == (16, 2)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("limts: {}\n", "unknown key 'limts' (allowed: approvals, cron, duckdb, files, http, limits, "),
        ("limts: {}\n", "; did you mean 'limits'?"),
        ("limits:\n  timeout_secs: soon\n", "limits.timeout_secs: 'soon' is not of type 'number'"),
        ("scripts:\n  tools: config/x\n", "scripts.tools: 'config/x' is not of type 'array'"),
        ("scripts:\n  max_workers: 0\n", "scripts.max_workers: 0 is less than the minimum of 1"),
        ("scripts:\n  max_workers_per_user: two\n", "scripts.max_workers_per_user: 'two' is not of type"),
        ("- a\n", "expected a mapping at the top, got list"),
        ("a: [\n", "bad YAML"),
    ],
)
def test_bad_kernel_yaml_names_file_and_field(tmp_path: Path, text: str, reason: str) -> None:
    path = write(tmp_path / "config" / "kernel.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(path)
    assert caught.value.path == str(path)
    assert reason in caught.value.reason


# -- script YAML (S2.1, S2.2, S2.3) ------------------------------------------------------


def test_tool_spec_keeps_every_field_and_the_raw_yaml(tmp_path: Path) -> None:
    write(tmp_path / "t.js", "function run(a) { return 'x'; }")
    path = write(
        tmp_path / "t.yaml",
        "kind: script_tool\nname: t\ndescription: d\nscript: t.js\n"
        "parameters: {type: object, properties: {q: {type: string}}}\n"
        "ui: {icon: '📝'}\nwarnings:\n  - failed: true\n    message: m\n"
        "max_operations: 5000\ntimeout_secs: 2.5\nmemory_limit_mb: 8\nrepos: [a, b]\n",
    )
    spec = load_script_spec(path)
    assert isinstance(spec, ToolSpec)
    assert spec.script == (tmp_path / "t.js").resolve()
    assert spec.parameters["properties"] == {"q": {"type": "string"}}
    assert spec.ui == {"icon": "📝"}
    assert spec.warnings[0].failed is True and spec.warnings[0].message == "m"
    assert spec.raw["repos"] == ["a", "b"]
    limits = spec.script_limits(load_kernel_config(None).limits)
    assert (limits.max_operations, limits.timeout_secs, limits.memory_limit_bytes) == (5000, 2.5, 8 << 20)


def test_hook_spec(tmp_path: Path) -> None:
    write(tmp_path / "h.js", "function after_turn() {}")
    path = write(
        tmp_path / "h.yaml",
        "kind: script_hook\nname: h\nscript: h.js\nevents: [after_turn]\npriority: -3\nmine: 1\n",
    )
    spec = load_script_spec(path)
    assert isinstance(spec, HookSpec)
    assert (spec.events, spec.priority, spec.raw["mine"]) == (("after_turn",), -3, 1)
    assert spec.on_error == "deny"  # S24.2: a failing before_tool_call hook denies by default


def test_s24_hook_events_and_on_error(tmp_path: Path) -> None:
    write(tmp_path / "g.js", "function before_tool_call() {}")
    path = write(
        tmp_path / "g.yaml",
        "kind: script_hook\nname: g\nscript: g.js\non_error: allow\n"
        "events: [before_tool_call, after_tool_call, before_llm_call]\n",
    )
    spec = load_script_spec(path)
    assert isinstance(spec, HookSpec)
    assert spec.on_error == "allow"
    assert spec.events == ("before_tool_call", "after_tool_call", "before_llm_call")


@pytest.mark.parametrize(
    ("yaml_text", "reason"),
    [
        ("kind: script_tool\nname: t\nscript: t.js\nparameters: {type: objekt}\n", "parameters.type: not a"),
        ("kind: script_tool\nname: t\nscript: missing.js\n", "script: file 'missing.js' not found"),
        ("kind: script_tool\nscript: t.js\n", "'name' is a required property"),
        ("kind: script_tool\nname: t\n", "'script' is a required property"),
        ("kind: tool\nname: t\nscript: t.js\n", "kind: expected 'script_tool' or 'script_hook', got 'tool'"),
        ("name: t\nscript: t.js\n", "got None"),
        ("kind: script_tool\nname: 'bad name!'\nscript: t.js\n", "name: 'bad name!' does not match"),
        ("kind: script_tool\nname: t\nscript: t.js\nwarnings: [{failed: true}]\n", "warnings[0]: 'message'"),
        ("kind: script_tool\nname: t\nscript: t.js\nwarnings: [{message: m, when: x}]\n", "warnings[0]"),
        ("kind: script_tool\nname: t\nscript: t.js\ntimeout_secs: 0\n", "timeout_secs: 0 is less than"),
        (  # kernel.yaml's way of writing limits: in a tool's YAML it would be a custom field, unused
            "kind: script_tool\nname: t\nscript: t.js\nlimits:\n  timeout_secs: 3\n",
            "limits.timeout_secs: a tool's or hook's limits are fields of their own at the top of the YAML "
            "(timeout_secs: 3), not under `limits:`",
        ),
        (
            "kind: script_hook\nname: h\nscript: t.js\nevents: [on_start]\n",
            "events[0]: 'on_start' is not one",
        ),
        (
            "kind: script_hook\nname: h\nscript: t.js\non_error: maybe\n",
            "on_error: 'maybe' is not one of ['deny', 'allow']",
        ),
        ("kind: script_hook\nname: h\nscript: t.js\non_eror: allow\n", "did you mean 'on_error'?"),
        (
            "kind: script_hook\nname: h\nscript: t.js\nevents: [before_tool_cal]\n",
            "did you mean 'before_tool_call'?",
        ),
        (
            "kind: script_tool\nname: t\nscript: t.js\nloop: &a [*a]\n",
            "an alias refers to a value that contains it",
        ),
        ("kind: script_tool\nname: t\nscript: t.js\nx: .nan\n", "cannot be passed to a script as JSON"),
        ("", "got an empty file"),
        ("kind: [unclosed\n", "bad YAML"),
    ],
)
def test_bad_script_yaml_names_the_field(tmp_path: Path, yaml_text: str, reason: str) -> None:
    write(tmp_path / "t.js", "function run() {}")
    path = write(tmp_path / "t.yaml", yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_script_spec(path)
    assert caught.value.path == str(path)
    assert reason in caught.value.reason


# -- S2.5: bad files are reported, the rest load ---------------------------------------------


def test_bad_files_are_reported_and_the_rest_serve(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path
) -> None:
    make_tool("good", "function run() { return 'good'; }")
    make_tool("syntax", "function run( {\n  return 1;\n}\n")
    write(tools_dir / "broken.yaml", "kind: script_tool\nname: [\n")
    write(tools_dir / "nokind.yml", "name: x\nscript: x.js\n")
    make_tool("good2", "function run() { return 'good too'; }")
    write(tools_dir / "zdup.yaml", "kind: script_tool\nname: good\nscript: good.js\n")

    assert [s.name for s in kernel.list_tools()] == ["good2"]  # `good` is claimed twice: both refused
    problems = {p.path.name: p.reason for p in kernel.problems()}
    assert set(problems) == {"syntax.yaml", "broken.yaml", "nokind.yml", "good.yaml", "zdup.yaml"}
    assert "SyntaxError" in problems["syntax.yaml"] and "syntax.js:2:" in problems["syntax.yaml"]
    assert problems["nokind.yml"] == "kind: expected 'script_tool' or 'script_hook', got None"
    assert problems["broken.yaml"].startswith("bad YAML")
    assert kernel.run_tool("good2", {}).content == "good too"
    assert kernel.run_tool("syntax", {}).content.startswith(
        "tool 'syntax' is not available: config/scripts/tools/syntax.yaml:4 failed to load: "
        "script syntax.js: "
    )


def test_duplicate_names_refuse_both_files(kernel: Kernel, make_tool: ToolFactory, tools_dir: Path) -> None:
    make_tool("alpha", "function run() { return 'first'; }")
    assert kernel.run_tool("alpha", {}).content == "first"
    write(tools_dir / "zeta.yaml", "kind: script_tool\nname: alpha\nscript: alpha.js\n")
    assert kernel.list_tools(kernel.caller()) == []  # what an agent's next message is offered
    problems = [(p.path.name, p.line, p.reason) for p in kernel.problems()]
    assert problems == [
        ("alpha.yaml", 2, "name: 'alpha' is also defined in zeta.yaml; rename one of them"),
        ("zeta.yaml", 2, "name: 'alpha' is also defined in alpha.yaml; rename one of them"),
    ]
    assert kernel.list_tools() == []
    with pytest.raises(ConfigError, match=r"tool 'alpha' is not available: .*alpha.yaml:2 failed to load"):
        kernel.tool("alpha")
    assert kernel.run_tool("alpha", {}).success is False  # even a running kernel stops offering it


def test_hooks_are_catalogued_apart_from_tools(kernel: Kernel, project: Path) -> None:
    hooks = project / "config" / "scripts" / "hooks"
    write(hooks / "audit.js", "function before_user_message(ctx, msg) { return {notice: 'n'}; }")
    write(hooks / "audit.yaml", "kind: script_hook\nname: audit\nscript: audit.js\n")
    assert [h.name for h in kernel.list_hooks()] == ["audit"]
    assert kernel.list_tools() == []


# -- S1.4: edits take effect on the next call, no restart ------------------------------------


def bump(path: Path, text: str) -> None:
    """Rewrite a file so its modification stamp surely changes."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def test_editing_the_script_applies_on_next_call(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path
) -> None:
    make_tool("live", "function run() { return 'v1'; }")
    assert kernel.run_tool("live", {}).content == "v1"
    bump(tools_dir / "live.js", "function run() { return 'v2'; }")
    assert kernel.run_tool("live", {}).content == "v2"


def test_editing_the_yaml_applies_on_next_call(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path
) -> None:
    make_tool("conf", "function run(a, c) { return c.greeting; }", yaml_extra="greeting: hi\n")
    assert kernel.run_tool("conf", {}).content == "hi"
    yaml_path = tools_dir / "conf.yaml"
    bump(yaml_path, yaml_path.read_text().replace("greeting: hi", "greeting: привет"))
    assert kernel.run_tool("conf", {}).content == "привет"


def test_new_and_removed_files_are_noticed(kernel: Kernel, make_tool: ToolFactory, tools_dir: Path) -> None:
    assert kernel.run_tool("later", {}).success is False
    make_tool("later", "function run() { return 'here'; }")
    assert kernel.run_tool("later", {}).content == "here"
    (tools_dir / "later.yaml").unlink()
    assert kernel.run_tool("later", {}).content == "unknown tool 'later'"


def test_a_broken_edit_is_reported_then_a_fix_recovers(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path
) -> None:
    make_tool("fragile", "function run() { return 'ok'; }")
    assert kernel.run_tool("fragile", {}).content == "ok"
    bump(tools_dir / "fragile.js", "function run() { return 'ok' +; }")
    assert kernel.run_tool("fragile", {}).success is False
    assert any(p.path.name == "fragile.yaml" for p in kernel.problems())
    bump(tools_dir / "fragile.js", "function run() { return 'fixed'; }")
    assert kernel.run_tool("fragile", {}).content == "fixed"


# -- lazy compiling: `tool(name)` compiles one script, listings compile all --------------------------


class RecordingHost(ScriptHost):
    """The real host, noting each script it compiles (a hit of its cache, as when the catalog then
    looks for a tool's `run`, compiles nothing)."""

    def __init__(self) -> None:
        super().__init__(default_helper_table())
        self.asked: list[str] = []
        self._last: dict[Path, LoadedScript] = {}

    def compile(
        self, path: Path, deadline: float | None = None, known: Stamp = None
    ) -> tuple[ScriptEngine[Any], LoadedScript]:
        try:
            engine, loaded = super().compile(path, deadline, known)
        except ScriptError:
            self.asked.append(path.name)
            raise
        if self._last.get(path) is not loaded:
            self.asked.append(path.name)
            self._last[path] = loaded
        return engine, loaded


def test_a_tool_by_name_compiles_only_its_own_script(make_tool: ToolFactory, tools_dir: Path) -> None:
    make_tool("alpha", "function run() { return 'a'; }")
    make_tool("broken", "function run( {\n")
    make_tool("gamma", "fn run(args) { 1 }", ext=".rhai")
    host = RecordingHost()
    catalog = ScriptCatalog([tools_dir], host)
    spec = catalog.tool("alpha")
    assert spec is not None and spec.name == "alpha"
    assert host.asked == ["alpha.js"]
    assert catalog.tool("broken") is None  # its YAML is fine, its script is not: never offered
    assert host.asked == ["alpha.js", "broken.js"]
    assert sorted(catalog.tools()) == ["alpha", "gamma"]
    assert host.asked == ["alpha.js", "broken.js", "gamma.rhai"]  # each checked once while unchanged
    assert [(p.path.name, p.line) for p in catalog.problems()] == [("broken.yaml", 4)]


@pytest.mark.parametrize(
    ("origin", "yaml_text"),
    [
        ("project", "kind: script_tool\nname: t\nscript: t.js\n"),
        ("project", "kind: script_hook\nname: h\nscript: t.js\n"),
        ("project", "kind: script_tool\nname: 2024-01-02\nscript: t.js\n"),  # a date, as JSON: a string
        ("project", "base: &b {kind: script_tool, name: merged}\n<<: *b\nscript: t.js\n"),
        ("project", "kind: python_tool\nname: p\nfunction: office:make_docx\n"),  # not in a project
        ("builtin", "kind: python_tool\nname: p\nfunction: office:make_docx\n"),
        ("project", "kind: script_tool\nname: 12\nscript: t.js\n"),
        ("project", "kind: script_tool\nname: [t]\nscript: t.js\n"),
        ("project", "kind: script_toll\nname: t\nscript: t.js\n"),
        ("project", "name: t\nscript: t.js\n"),
        ("project", "kind: script_tool\nscript: t.js\n"),
        ("project", "- kind: script_tool\n"),
    ],
)
def test_what_a_file_claims_is_what_it_loads_as(tmp_path: Path, origin: str, yaml_text: str) -> None:
    """The catalog finds a tool's files by `spec_claim` of their YAML alone: a file that loads claims
    exactly its spec's kind and name, and one whose claim is None never loads."""
    write(tmp_path / "t.js", "function run() {}")
    path = write(tmp_path / "t.yaml", yaml_text)
    claim = spec_claim(read_yaml(path))
    try:
        spec = load_script_spec(path, origin=origin)
    except ConfigError:
        return
    assert claim == ("hook" if isinstance(spec, HookSpec) else "tool", spec.name)


def test_a_broken_script_is_never_run_by_name(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("broken", "function run() { return 1 +; }")
    result = kernel.run_tool("broken", {})
    assert not result.success
    assert result.content.startswith(
        "tool 'broken' is not available: config/scripts/tools/broken.yaml:4 failed"
    )


# -- near misses: typos refused, custom fields free (S2.1) --------------------------------------------

TOOL_FIELDS = ("kind", "name", "description", "script", "parameters", "ui", "warnings", "timeout_secs")


@pytest.mark.parametrize(
    ("word", "meant"),
    [
        ("paramaters", "parameters"),
        ("scirpt", "script"),
        ("warning", "warnings"),
        ("descripton", "description"),
        ("timeout_sec", "timeout_secs"),
        ("Parameters", "parameters"),
        ("params", "parameters"),
    ],
)
def test_a_typo_is_a_near_miss(word: str, meant: str) -> None:
    assert close_match(word, TOOL_FIELDS) == meant
    assert did_you_mean(word, TOOL_FIELDS) == f"; did you mean {meant!r}?"


@pytest.mark.parametrize(
    "word", ["repos", "api_base", "currency", "rates", "stopwords", "banned", "url", "uri", "timeout", "name"]
)
def test_an_honest_custom_field_is_no_near_miss(word: str) -> None:
    assert close_match(word, TOOL_FIELDS) is None
    assert did_you_mean(word, TOOL_FIELDS) == ""


@pytest.mark.parametrize(("word", "meant"), [("enmu", "enum"), ("tpye", "type"), ("itmes", "items")])
def test_swapped_letters_in_short_keywords_are_near_misses(word: str, meant: str) -> None:
    assert close_match(word, ("enum", "type", "items", "if", "not")) == meant


def test_a_custom_field_next_to_the_field_it_resembles_is_legal(tmp_path: Path) -> None:
    write(tmp_path / "t.js", "function run(a) { return 'x'; }")
    spec = load_script_spec(
        write(tmp_path / "t.yaml", "kind: script_tool\nname: t\nscript: t.js\nnames: [a]\n")
    )
    assert spec.raw["names"] == ["a"]


# -- lines: every problem says where -----------------------------------------------------------------


def test_spec_knows_the_line_of_each_key(tmp_path: Path) -> None:
    write(tmp_path / "t.js", "function run(a) { return 'x'; }")
    path = write(
        tmp_path / "t.yaml",
        "# a comment\nkind: script_tool\nname: t\nscript: t.js\nparameters:\n  type: object\n"
        "  properties:\n    q: {type: string}\nwarnings:\n  - message: m\n",
    )
    lines = load_script_spec(path).lines
    assert (lines.of("kind"), lines.of("script"), lines.of("parameters", "properties", "q")) == (2, 4, 8)
    assert (lines.of("warnings", 0), lines.of("warnings", 0, "message"), lines.of("nowhere")) == (
        10,
        10,
        None,
    )
    assert lines.of("parameters", "properties", "q", "deeper") == 8  # the nearest known ancestor


def test_a_config_error_reads_path_line_field_reason(tmp_path: Path) -> None:
    write(tmp_path / "t.js", "function run() {}")
    path = write(tmp_path / "t.yaml", "kind: script_tool\nname: t\nscript: t.js\ntimeout_secs: 0\n")
    with pytest.raises(ConfigError) as caught:
        load_script_spec(path)
    assert caught.value.line == 4
    assert str(caught.value) == f"{path}:4: timeout_secs: 0 is less than or equal to the minimum of 0"
    assert str(LoadProblem(path, "x: y")) == f"{path}: x: y"  # no line known: none shown


def test_yaml_syntax_errors_name_the_file_not_a_unicode_string(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "kind: script_tool\nname: [t\nscript: t.js\n")
    with pytest.raises(ConfigError) as caught:
        load_script_spec(path)
    assert caught.value.line == 3 and caught.value.reason.startswith("bad YAML: ")
    assert "<unicode string>" not in str(caught.value)
    assert "that starts at line 2, column 7" in caught.value.reason


def test_merge_keys_and_aliases_still_load(tmp_path: Path) -> None:
    write(tmp_path / "t.js", "function run() {}")
    text = "kind: script_tool\nname: t\nscript: t.js\nbase: &b {x: 1}\nmine:\n  <<: *b\n  y: 2\nagain: *b\n"
    spec = load_script_spec(write(tmp_path / "t.yaml", text))
    assert spec.raw["mine"] == {"x": 1, "y": 2} and spec.raw["again"] == {"x": 1}
    assert spec.lines.of("mine", "y") == 7


# -- hostile YAML: aliases that expand without end --------------------------------------------


def test_billion_laughs_is_refused_before_it_is_built(tmp_path: Path) -> None:
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    write(tmp_path / "t.js", "function run() {}")
    path = write(tmp_path / "t.yaml", "kind: script_tool\nname: t\nscript: t.js\n" + "\n".join(levels) + "\n")
    with pytest.raises(ConfigError) as caught:
        load_script_spec(path)
    assert caught.value.reason == "its aliases expand to more than 100,000 values"
    assert caught.value.line is not None and caught.value.line > 4


def test_as_many_values_written_out_without_an_alias_are_refused_too(tmp_path: Path) -> None:
    """Only a short file without a `*` skips the count (util/yaml_parse.py `_may_expand`)."""
    write(tmp_path / "t.js", "function run() {}")
    values = "[" + ",".join(["{}"] * 100_001) + "]"
    path = write(tmp_path / "t.yaml", f"kind: script_tool\nname: t\nscript: t.js\nx: {values}\n")
    with pytest.raises(ConfigError) as caught:
        load_script_spec(path)
    assert caught.value.reason == "its aliases expand to more than 100,000 values"


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "t.js", "function run() {}")
    path = write(tmp_path / "t.yaml", "kind: script_tool\nname: t\nscript: t.js\nx: &x [1, *x]\n")
    with pytest.raises(ConfigError, match="an alias refers to a value that contains it"):
        load_script_spec(path)


def test_shared_anchors_of_modest_size_still_load(tmp_path: Path) -> None:
    write(tmp_path / "t.js", "function run() {}")
    path = write(
        tmp_path / "t.yaml",
        "kind: script_tool\nname: t\nscript: t.js\nbase: &base {retries: 3}\nprod: *base\nstage: *base\n",
    )
    assert load_script_spec(path).raw["stage"] == {"retries": 3}


# -- one config model (issue 10): every section typed, checked at load, in one style -------------------


@pytest.mark.parametrize(
    ("text", "reason", "line"),
    [
        ("shell:\n  enabled: maybe\n", "shell.enabled: expected true or false, got 'maybe'", 2),
        (
            "http:\n  max_redirects: 2\n  tmeout: 1\n",
            "http.tmeout: unknown field (known: max_response_bytes",
            3,
        ),
        (
            "shell:\n  enabeld: true\n",
            "shell.enabeld: unknown field (known: enabled, default_timeout_secs, max_output_bytes, "
            "max_concurrent, env_allow, non_dumpable); did you mean 'enabled'?",
            2,
        ),
        ("llm:\n  base_url: http://x\n", "llm.model: required", 1),
        ("llm:\n  model: m\n  base_url: ftp://x\n", "llm.base_url: expected an http:// or https:// URL", 3),
        ("duckdb:\n  threads: 0\n", "duckdb.threads: expected an integer of at least 1, got 0", 2),
        # an int is an int: `64.0 << 20` failed every call; NaN passed every bound and never timed out
        ("limits:\n  memory_limit_mb: 64.0\n", "limits.memory_limit_mb: 64.0 is not of type 'integer'", 2),
        ("limits:\n  timeout_secs: .nan\n", "limits.timeout_secs: nan is not of type 'number'", 2),
        ("state:\n  max_user_bytes: 1.0\n", "state.max_user_bytes: expected an integer >= 1, got 1.0", 2),
    ],
)
def test_s2_4_every_section_is_checked_at_load_with_its_line(
    tmp_path: Path, text: str, reason: str, line: int
) -> None:
    path = write(tmp_path / "config" / "kernel.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(path)
    assert caught.value.reason.startswith(reason), caught.value.reason
    assert (caught.value.path, caught.value.line) == (str(path), line)


def test_each_service_is_built_from_its_own_section(tmp_path: Path) -> None:
    from agentkernel.services.files import FilesService
    from agentkernel.services.shell import ShellService

    path = write_kernel_yaml(
        tmp_path, "shell:\n  enabled: true\n  max_concurrent: 3\nfiles:\n  max_read_bytes: 7\n"
    )
    config = load_kernel_config(path)
    assert (config.shell.enabled, config.shell.max_concurrent, config.files.max_read_bytes) == (True, 3, 7)
    assert ShellService.from_config(config).settings is config.shell
    assert FilesService.from_config(config).settings is config.files
    assert not hasattr(config, "raw")  # no service reads the YAML itself any more


# -- what a scan finds: links, folders named like YAML ------------------------------------------------


def test_a_scan_finds_linked_files_by_their_real_path_and_never_enters_a_linked_folder(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path, tmp_path: Path
) -> None:
    """S2.4: the folders are scanned on every listing; links are followed for files only, as before."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    make_tool("linked", "function run() { return 'through a link'; }")
    for name in ("linked.yaml", "linked.js"):
        (tools_dir / name).rename(elsewhere / name)
    (tools_dir / "linked.yaml").symlink_to(elsewhere / "linked.yaml")
    (tools_dir / "twice.yaml").symlink_to(elsewhere / "linked.yaml")  # one file, two links: one tool
    (tools_dir / "folder").symlink_to(elsewhere, target_is_directory=True)  # not entered
    (tools_dir / "dir.yaml").mkdir()  # a folder named like a YAML file is a folder
    assert kernel.run_tool("linked", {}).content == "through a link"
    assert [s.name for s in kernel.list_tools() if s.name == "linked"] == ["linked"]
    assert [p for p in kernel.problems() if p.path.is_relative_to(tools_dir)] == []
    (tools_dir / "broken.yaml").symlink_to(tmp_path / "missing.yaml")  # a dangling link is reported
    assert [p.path.name for p in kernel.problems() if "broken" in str(p.path) or "missing" in str(p.path)]
