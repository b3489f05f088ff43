"""`agentkernel check`: every mistake refused loudly, as `file:line: field: what is wrong` (S2.5).

Custom fields stay legal (S2.1, S2.2); near misses of known fields, unsound
`parameters` schemas, names claimed twice, missing hook functions (S7) and
unknown tools in templates (S23.1) are problems, each with its line. Each
test builds a small project and runs the command as `main([...])`; the
subprocess runs are in test_cli.py.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from agentkernel.builtins import HOOKS_FOLDER, TOOLS_FOLDER
from agentkernel.cli.main import main
from tests.conftest import REPO, write_kernel_yaml

TOOL_JS = "function run(args) { return 'ok'; }\n"
HOOK_RHAI = "fn before_user_message(ctx, msg) { () }\n"


def write(project: Path, relative: str, text: str) -> Path:
    path = project / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def tool_yaml(project: Path, name: str, extra: str = "", *, script: str = TOOL_JS) -> Path:
    """config/scripts/tools/NAME.yaml (lines 1-3: kind, name, script; `extra` from line 4) and NAME.js."""
    write(project, f"config/scripts/tools/{name}.js", script)
    body = f"kind: script_tool\nname: {name}\nscript: {name}.js\n" + textwrap.dedent(extra)
    return write(project, f"config/scripts/tools/{name}.yaml", body)


def hook_yaml(project: Path, name: str, source: str, extra: str = "", *, ext: str = ".rhai") -> Path:
    """config/scripts/hooks/NAME.yaml (lines 1-3: kind, name, script) and its script."""
    write(project, f"config/scripts/hooks/{name}{ext}", source)
    body = f"kind: script_hook\nname: {name}\nscript: {name}{ext}\n" + textwrap.dedent(extra)
    return write(project, f"config/scripts/hooks/{name}.yaml", body)


Check = Callable[..., tuple[int, list[str]]]


def run_check(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, list[str]]:
    monkeypatch.chdir(folder)
    code = main(["check", *flags])
    return code, capsys.readouterr().out.splitlines()


@pytest.fixture
def check(project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Check:
    """`agentkernel check FLAGS…` in the project: its exit status and its lines of output."""
    return lambda *flags: run_check(project, monkeypatch, capsys, *flags)


def problems_of(check: Check) -> list[str]:
    """The problem lines of a check that must fail (the summary line dropped)."""
    code, lines = check()
    assert code == 1, lines
    assert lines[-1].startswith("found "), lines
    return lines[:-1]


# -- the shipped project passes ----------------------------------------------------------------


def test_the_shipped_project_passes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:

    config = REPO / "config"
    tools = len(list((config / "scripts" / "tools").glob("*.yaml")))
    hooks = len(list((config / "scripts" / "hooks").glob("*.yaml")))
    templates = len(list((config / "templates").glob("*.yaml")))
    code, lines = run_check(REPO, monkeypatch, capsys)
    assert code == 0
    assert lines == [
        f"ok: {tools} tools, {hooks} hooks, {templates} templates; built-in: {built_in_counts()}"
    ]


def built_in_counts() -> str:
    """What `check` says of the package's built-ins, counted from their folders."""
    counts = {
        kind: len(list(folder.glob("*.yaml")))
        for kind, folder in (("tools", TOOLS_FOLDER), ("hooks", HOOKS_FOLDER))
    }
    return ", ".join(f"{n} {kind[:-1] if n == 1 else kind}" for kind, n in counts.items())


def test_an_empty_project_passes(project: Path, check: Check) -> None:
    assert check() == (0, ["ok: 0 tools, 0 hooks, 0 templates"])


# -- S2.1/S2.2: custom fields are free, near misses of known ones are not ----------------------------


def test_honest_custom_fields_pass(project: Path, check: Check) -> None:
    tool_yaml(
        project,
        "custom",
        """\
        repos: [a/b, c/d]
        api_base: https://example.invalid
        currency: RUB
        base: RUB
        rates: {USD: 92.5}
        stopwords: [и, the]
        url: x
        uri: y
        names: [a, b]
        timeout: 5
        """,
    )
    hook_yaml(project, "mod", HOOK_RHAI, "banned: [spam]\nreply: no\ndescription: custom in a hook\n")
    assert check() == (0, ["ok: 1 tool, 1 hook, 0 templates"])


NEAR_MISSES = [
    ("paramaters: {type: object}\n", "4: paramaters: unknown field; did you mean 'parameters'?"),
    ("warning: [{message: m}]\n", "4: warning: unknown field; did you mean 'warnings'?"),
    ("descripton: counts words\n", "4: descripton: unknown field; did you mean 'description'?"),
    ("timeout_sec: 3\n", "4: timeout_sec: unknown field; did you mean 'timeout_secs'?"),
    ("maxOperations: 10\n", "4: maxOperations: unknown field; did you mean 'max_operations'?"),
    ("ui: {}\nParameters: {type: object}\n", "5: Parameters: unknown field; did you mean 'parameters'?"),
]


def test_a_misspelt_script_key_says_so_before_the_missing_field(project: Path, check: Check) -> None:
    write(project, "config/scripts/tools/t.js", TOOL_JS)
    write(project, "config/scripts/tools/t.yaml", "kind: script_tool\nname: t\nscirpt: t.js\n")
    assert problems_of(check) == [
        "config/scripts/tools/t.yaml:3: scirpt: unknown field; did you mean 'script'?"
    ]


HOOK_NEAR_MISSES = [
    (HOOK_RHAI, ".rhai", "event: [before_user_message]\n", "4: event: unknown field; did you mean 'events'?"),
    (HOOK_RHAI, ".rhai", "priorty: 3\n", "4: priorty: unknown field; did you mean 'priority'?"),
    (
        HOOK_RHAI,
        ".rhai",
        "events: [before_user_messages]\n",
        "4: events[0]: 'before_user_messages' is not one of "
        "['before_user_message', 'after_turn', 'after_loop', 'before_tool_call', 'after_tool_call', "
        "'before_llm_call']; did you mean 'before_user_message'?",
    ),
]


# -- parameters: a JSON Schema (2020-12) of an object, with no misspelt keyword ----------------------


UNSOUND_SCHEMAS = [
    (
        "parameters:\n  type: string\n",
        "5: parameters.type: must be 'object' (a tool's arguments are a JSON object), not 'string'",
    ),
    (
        "parameters:\n  properties: {}\n",
        "4: parameters: needs `type: object`: a tool's arguments are a JSON object",
    ),
    (
        "parameters:\n  type: object\n  properties:\n    q: {type: strin}\n",
        "7: parameters.properties.q.type: not a valid JSON Schema: "
        "'strin' is not valid under any of the given schemas; did you mean 'string'?",
    ),
    *(
        (
            f"parameters:\n  type: object\n  properties:\n    n: {{type: {python}}}\n",
            f"7: parameters.properties.n.type: not a valid JSON Schema: "
            f"'{python}' is not valid under any of the given schemas; did you mean '{json_schema}'?",
        )
        for python, json_schema in [
            ("int", "integer"),
            ("str", "string"),
            ("bool", "boolean"),
            ("float", "number"),
            ("dict", "object"),
            ("list", "array"),
        ]
    ),
    (
        "parameters:\n  type: object\n  properties:\n    n: {type: [int, 'null']}\n",
        "7: parameters.properties.n.type: not a valid JSON Schema: "
        "['int', 'null'] is not valid under any of the given schemas; did you mean 'integer' for 'int'?",
    ),
    (
        "parameters:\n  type: object\n  properties:\n    n: {type: integer, minimum: low}\n",
        "7: parameters.properties.n.minimum: not a valid JSON Schema: 'low' is not of type 'number'",
    ),
    (
        "parameters:\n  type: object\n  properties:\n    text: {type: string}\n  required: [text, txet]\n",
        "8: parameters.required[1]: 'txet' is not in properties (properties: text); did you mean 'text'?",
    ),
    (
        "parameters:\n  type: object\n  required: [text]\n",
        "6: parameters.required[0]: 'text' is not in properties (properties: none)",
    ),
    (
        "parameters:\n  type: object\n  properties:\n    text: {type: string}\n  requried: [text]\n",
        "8: parameters.requried: unknown keyword; did you mean 'required'?",
    ),
    (
        "parameters:\n  type: object\n  propertes:\n    text: {type: string}\n",
        "6: parameters.propertes: unknown keyword; did you mean 'properties'?",
    ),
    (
        "parameters:\n  type: object\n  properties:\n    text:\n      type: string\n      descripton: x\n",
        "9: parameters.properties.text.descripton: unknown keyword; did you mean 'description'?",
    ),
    (
        "parameters:\n  type: object\n  properties:\n    unit: {enmu: [c, f]}\n",
        "7: parameters.properties.unit.enmu: unknown keyword; did you mean 'enum'?",
    ),
    (
        "parameters:\n  type: object\n  properties:\n    tags: {type: array, itmes: {type: string}}\n",
        "7: parameters.properties.tags.itmes: unknown keyword; did you mean 'items'?",
    ),
    (
        "parameters:\n  type: object\n  properties:\n    rows:\n      type: array\n"
        "      items: {type: object, properties: {n: {minimun: 1}}}\n",
        "9: parameters.properties.rows.items.properties.n.minimun: unknown keyword; did you mean 'minimum'?",
    ),
    (
        "parameters:\n  type: object\n  properties:\n    a: {type: string}\n  addtionalProperties: false\n",
        "8: parameters.addtionalProperties: unknown keyword; did you mean 'additionalProperties'?",
    ),
    (
        "parameters:\n  type: object\n  properties:\n    a: {type: string, maxlength: 3}\n",
        "7: parameters.properties.a.maxlength: unknown keyword; did you mean 'maxLength'?",
    ),
]


def _nested_properties(levels: int) -> str:
    """A flow mapping of `levels` objects, each the property `a` of the one outside it."""
    return "{type: object, properties: {a: " * levels + "{}" + "}}" * levels


FOUR_BRANCHES = "{anyOf: [" + ", ".join(["{$ref: '#/$defs/NEXT'}"] * 4) + "]}"
COSTLY_SCHEMAS = [  # schemas/bounds.py: what validating calls against it could cost, measured at load
    (
        "parameters:\n  type: object\n  properties:\n    q: {type: string, pattern: '(?<'}\n",
        "7: parameters.properties.q.pattern: the pattern '(?<' is not a regular expression the kernel runs: "
        "unexpected end of pattern at position 3",
    ),
    (
        f"parameters: {_nested_properties(32)}\n",
        "4: parameters" + ".properties.a" * 32 + ": subschemas nest more than 32 deep, counting each $ref "
        "followed (limits.max_schema_depth: 32 in kernel.yaml)",
    ),
    (  # 4^6 leaves, through $refs
        "parameters:\n  type: object\n  properties: {q: {$ref: '#/$defs/l0'}}\n  $defs:\n"
        + "".join(f"    l{i}: {FOUR_BRANCHES.replace('NEXT', f'l{i + 1}')}\n" for i in range(6))
        + "    l6: {type: string}\n",
        "4: parameters: the schema is too complex to validate: with its $refs expanded it holds more than "
        "2,000 subschemas and enum values (limits.max_schema_nodes: 2,000 in kernel.yaml)",
    ),
]


@pytest.mark.parametrize(("extra", "problem"), NEAR_MISSES + UNSOUND_SCHEMAS + COSTLY_SCHEMAS)
def test_a_near_miss_or_an_unsound_schema_in_a_tool_yaml_is_refused(
    project: Path,
    check: Check,
    extra: str,
    problem: str,
) -> None:
    tool_yaml(project, "t", extra)
    assert problems_of(check) == [f"config/scripts/tools/t.yaml:{problem}"]


def test_the_schema_bounds_are_the_kernel_yaml_s(project: Path, check: Check) -> None:
    tool_yaml(project, "t", "parameters: {type: object, properties: {a: {}, b: {}}}\n")
    assert check()[0] == 0
    write_kernel_yaml(project, "limits:\n  max_schema_nodes: 2\n")
    assert problems_of(check) == [
        "config/scripts/tools/t.yaml:4: parameters: the schema is too complex to validate: with its $refs "
        "expanded it holds more than 2 subschemas and enum values (limits.max_schema_nodes: 2 in kernel.yaml)"
    ]


def test_a_sound_schema_with_keywords_of_its_own_passes(project: Path, check: Check) -> None:
    tool_yaml(
        project,
        "t",
        """\
        parameters:
          type: object
          title: T
          x-ui: {order: [a, b]}
          properties:
            a: {type: string, examples: [x], x-widget: textarea, order: 1}
            b: {type: array, items: {type: integer}, prefixItems: [{const: 1}]}
            requried: {type: boolean, description: "a property may have any name"}
          oneOf:
            - required: [a]
            - required: [b]
          $defs:
            pair: {type: array, minItems: 2}
          required: [requried]
        """,
    )
    assert check() == (0, ["ok: 1 tool, 0 hooks, 0 templates"])


# -- a name claimed twice: both refused, each naming the other ------------------------------------


def test_two_tools_with_one_name_are_both_refused(project: Path, check: Check) -> None:
    tool_yaml(project, "first")
    write(
        project, "config/scripts/tools/sub/copy.yml", "kind: script_tool\nname: first\nscript: ../first.js\n"
    )
    assert problems_of(check) == [
        "config/scripts/tools/first.yaml:2: name: 'first' is also defined in sub/copy.yml;"
        " rename one of them",
        "config/scripts/tools/sub/copy.yml:2: name: 'first' is also defined in ../first.yaml;"
        " rename one of them",
    ]


def test_two_hooks_with_one_name_are_both_refused_but_a_tool_may_share_it(
    project: Path, check: Check
) -> None:
    hook_yaml(project, "audit", HOOK_RHAI)
    write(project, "config/scripts/hooks/audit2.yaml", "kind: script_hook\nname: audit\nscript: audit.rhai\n")
    tool_yaml(project, "audit")  # tools and hooks are two name spaces
    assert problems_of(check) == [
        "config/scripts/hooks/audit.yaml:2: name: 'audit' is also defined in audit2.yaml; rename one of them",
        "config/scripts/hooks/audit2.yaml:2: name: 'audit' is also defined in audit.yaml; rename one of them",
    ]


def test_two_templates_with_one_name_are_both_refused(project: Path, check: Check) -> None:
    write(project, "config/templates/a.yaml", "# first\nname: helper\ninstructions: x\n")
    write(project, "config/templates/b.yaml", "name: helper\ninstructions: y\n")
    assert problems_of(check) == [
        "config/templates/a.yaml:2: name: 'helper' is also defined in b.yaml; rename one of them",
        "config/templates/b.yaml:1: name: 'helper' is also defined in a.yaml; rename one of them",
    ]


# -- S7: a hook's script must define what it promises ------------------------------------------------


MISSING_HOOK_FUNCTIONS = [
    (
        "function beforeUserMessage(ctx, msg) { return {notice: 'n'}; }\n",
        ".js",
        "",
        "3: script: h.js defines none of the hook functions before_user_message, after_turn, after_loop,"
        " before_tool_call, after_tool_call, before_llm_call; it defines beforeUserMessage():"
        " did you mean before_user_message?",
    ),
    (
        "fn helper(x) { x }\n",
        ".rhai",
        "",
        "3: script: h.rhai defines none of the hook functions before_user_message, after_turn, after_loop,"
        " before_tool_call, after_tool_call, before_llm_call",
    ),
    (
        "fn before_user_message(ctx, msg) { () }\nfn after_turns(ctx, q, a) { () }\n",
        ".rhai",
        "events: [before_user_message, after_turn]\n",
        "4: events[1]: h.rhai does not define after_turn();"
        " it defines after_turns(): did you mean after_turn?",
    ),
    (
        "function before_user_message() {}\nconst afterLoop = () => 1;\n",
        ".js",
        "",
        "3: script: h.js defines afterLoop(), which is never called; did you mean after_loop?",
    ),
    (
        "throw new Error('not at load');\nfunction after_turn() {}\n",
        ".js",
        "",
        "3: script h.js: its top level failed while looking for the hook functions (it runs with no"
        " services at load): Error: not at load (at h.js:1:",
    ),
]


@pytest.mark.parametrize(("source", "ext", "extra", "problem"), HOOK_NEAR_MISSES + MISSING_HOOK_FUNCTIONS)
def test_a_near_miss_in_a_hook_or_a_missing_hook_function_is_refused(
    project: Path,
    check: Check,
    source: str,
    ext: str,
    extra: str,
    problem: str,
) -> None:
    hook_yaml(project, "h", source, extra, ext=ext)
    (line,) = problems_of(check)
    assert line.startswith(f"config/scripts/hooks/h.yaml:{problem}")


@pytest.mark.parametrize(
    ("source", "ext"),
    [
        ("const after_turn = (ctx, q, a) => ({notice: 'n'});\n", ".js"),
        ("module.exports = {after_loop(ctx, reason) {}};\n", ".cjs"),
        ("export function before_user_message(ctx, msg) {}\n", ".mjs"),
        ("fn after_loop(ctx, reason) { () }\n", ".rhai"),
    ],
)
def test_hook_functions_are_found_however_they_are_defined(
    project: Path, check: Check, source: str, ext: str
) -> None:
    hook_yaml(project, "h", source, ext=ext)
    assert check() == (0, ["ok: 0 tools, 1 hook, 0 templates"])


def test_a_hooks_top_level_sees_no_environment_at_load(
    project: Path, check: Check, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AK_CHECK_SECRET", "s3cret")
    source = (
        "if (env_var('AK_CHECK_SECRET')) { throw new Error('saw the secret'); }\nfunction after_loop() {}\n"
    )
    hook_yaml(project, "h", source, ext=".js")
    assert check() == (0, ["ok: 0 tools, 1 hook, 0 templates"])


# -- S3.1: a tool's script must define run() -----------------------------------------------------------


MISSING_RUN = [
    ("function main(args) { return 'ok'; }\n", ".js", "; it defines main(): did you mean run?"),
    ("const handler = (args) => 'ok';\n", ".js", "; it defines handler(): did you mean run?"),
    ("export function run_tool(a) { return 'ok'; }\n", ".mjs", "; it defines run_tool(): did you mean run?"),
    ("function helper(x) { return x; }\n", ".js", ""),
    ("fn Run(args) { 1 }\n", ".rhai", "; it defines Run(): did you mean run?"),
    ("fn helper(x) { x }\nlet run = 1;\n", ".rhai", ""),
]


@pytest.mark.parametrize(("source", "ext", "hint"), MISSING_RUN)
def test_a_tool_whose_script_defines_no_run_is_refused_at_its_script_line(
    project: Path, check: Check, source: str, ext: str, hint: str
) -> None:
    write(project, f"config/scripts/tools/t{ext}", source)
    write(project, "config/scripts/tools/t.yaml", f"kind: script_tool\nname: t\nscript: t{ext}\n")
    (line,) = problems_of(check)
    reason = f"script: t{ext} defines no run() function, which a tool's script must{hint}"
    assert line == f"config/scripts/tools/t.yaml:3: {reason}"


@pytest.mark.parametrize(
    ("source", "ext"),
    [
        ("const run = (args) => 'ok';\n", ".js"),
        ("module.exports = {run(args) { return 'ok'; }};\n", ".cjs"),
        ("export function run(args) { return 'ok'; }\n", ".mjs"),
        ('fn run(args, config) { "ok" }\n', ".rhai"),
    ],
)
def test_run_is_found_however_it_is_defined(project: Path, check: Check, source: str, ext: str) -> None:
    write(project, f"config/scripts/tools/t{ext}", source)
    write(project, "config/scripts/tools/t.yaml", f"kind: script_tool\nname: t\nscript: t{ext}\n")
    assert check() == (0, ["ok: 1 tool, 0 hooks, 0 templates"])


def test_a_tools_top_level_sees_no_environment_at_load(
    project: Path, check: Check, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AK_CHECK_SECRET", "s3cret")
    source = "if (env_var('AK_CHECK_SECRET')) { throw new Error('saw it'); }\nfunction run() { return 1; }\n"
    tool_yaml(project, "t", script=source)
    assert check() == (0, ["ok: 1 tool, 0 hooks, 0 templates"])


def test_a_tools_endless_top_level_is_stopped_at_its_own_limit(project: Path, check: Check) -> None:
    endless = "while (true) {}\nfunction run() { return 1; }\n"
    tool_yaml(project, "t", "max_operations: 1000\n", script=endless)
    (line,) = problems_of(check)
    assert line.startswith("config/scripts/tools/t.yaml:3: script t.js: its top level failed while looking")
    assert "max_operations" in line


def test_a_tools_top_level_that_fails_at_load_is_refused_naming_its_line(project: Path, check: Check) -> None:
    tool_yaml(project, "t", script="throw new Error('not at load');\nfunction run(args) { return 1; }\n")
    (line,) = problems_of(check)
    assert line.startswith(
        "config/scripts/tools/t.yaml:3: script t.js: its top level failed while looking for run()"
        " (it runs with no services at load): Error: not at load (at t.js:1:"
    )


# -- YAML itself: syntax errors and keys given twice name the file and line ----------------------------


def test_a_yaml_syntax_error_names_file_and_line(project: Path, check: Check) -> None:
    write(project, "config/scripts/tools/t.js", TOOL_JS)
    write(project, "config/scripts/tools/t.yaml", "kind: script_tool\nname: t\n  oops: here\nscript: t.js\n")
    (line,) = problems_of(check)
    assert line.startswith("config/scripts/tools/t.yaml:3: bad YAML: mapping values are not allowed")
    assert "<unicode string>" not in line


def test_a_key_given_twice_is_refused(project: Path, check: Check) -> None:
    tool_yaml(project, "t", "description: one\nui: {}\ndescription: two\n")
    assert problems_of(check) == [
        "config/scripts/tools/t.yaml:6: description: key given twice (first on line 4)"
    ]


def test_a_script_syntax_error_points_at_the_script_key(project: Path, check: Check) -> None:
    tool_yaml(project, "t", script="function run( {\n")
    (line,) = problems_of(check)
    assert line.startswith("config/scripts/tools/t.yaml:3: script t.js: SyntaxError:")


# -- templates (S23.1) -------------------------------------------------------------------------------


def test_a_template_naming_an_unknown_tool_or_hook_is_a_problem(project: Path, check: Check) -> None:
    tool_yaml(project, "text_stats")
    hook_yaml(project, "audit", HOOK_RHAI)
    write(
        project,
        "config/templates/helper.yaml",
        "name: helper\ninstructions: x\ntools:\n  - text_stats\n  - text_stat\nhooks: [audti]\n",
    )
    assert problems_of(check) == [
        "config/templates/helper.yaml:5: template helper: tools[1]: unknown tool 'text_stat'"
        " (known: text_stats); did you mean 'text_stats'?",
        "config/templates/helper.yaml:6: template helper: hooks[0]: unknown hook 'audti'"
        " (known: audit); did you mean 'audit'?",
    ]


def test_a_template_naming_a_broken_tool_is_a_problem_too(project: Path, check: Check) -> None:
    tool_yaml(project, "broken", script="function run( {\n")
    write(project, "config/templates/helper.yaml", "name: helper\ninstructions: x\ntools: [broken]\n")
    lines = problems_of(check)
    assert [line.split(": ")[0] for line in lines] == [
        "config/scripts/tools/broken.yaml:3",
        "config/templates/helper.yaml:3",
    ]


# -- kernel.yaml -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "scripts: {}\nlimts: {}\n",
            "2: unknown key 'limts' (allowed: approvals, cron, duckdb, files, http, limits, llm, logging,"
            " paths, quotas, root, runs, scripts, server, shell, state, store, telemetry);"
            " did you mean 'limits'?",
        ),
        ("limits:\n  timeout_secs: soon\n", "2: limits.timeout_secs: 'soon' is not of type 'number'"),
        ("llm:\n  model: m\n  base_url: 5\n", "3: llm.base_url: "),
        ("scripts: [\n", "2: bad YAML: "),
    ],
)
def test_a_broken_kernel_yaml_is_a_problem_not_a_traceback(
    project: Path,
    check: Check,
    text: str,
    problem: str,
) -> None:
    write(project, "config/kernel.yaml", text)
    code, lines = check()
    assert code == 1
    assert lines[0].startswith(f"config/kernel.yaml:{problem}"), lines
    assert lines[1:] == ["found 1 problem (0 tools, 0 hooks, 0 templates loaded)"]


def test_config_flag_and_paths_outside_the_working_directory(
    project: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    tool_yaml(project, "t", "paramaters: {}\n")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(elsewhere)
        assert main(["check", "--config", str(project / "config" / "kernel.yaml")]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    where = project.resolve() / "config" / "scripts" / "tools" / "t.yaml"
    assert first == f"{where}:4: paramaters: unknown field; did you mean 'parameters'?"


# -- --json ----------------------------------------------------------------------------------------


def test_json_lists_every_problem_with_path_line_and_reason(project: Path, check: Check) -> None:
    tool_yaml(project, "good")
    bad = tool_yaml(project, "bad", "event: x\nparamaters: {}\n")
    write(project, "config/templates/helper.yaml", "name: helper\ninstructions: x\n")
    code, lines = check("--json")
    assert code == 1
    assert json.loads("\n".join(lines)) == {
        "ok": False,
        "problems": [
            {
                "path": str(bad.resolve()),
                "line": 5,
                "reason": "paramaters: unknown field; did you mean 'parameters'?",
            }
        ],
        "tools": 1,
        "hooks": 0,
        "templates": 1,
        "builtin": {"tools": 0, "hooks": 0},
        "mcp_servers": {},
    }
    bad.unlink()
    code, lines = check("--json")
    assert (code, json.loads("\n".join(lines))["ok"]) == (0, True)


# -- hook list, template list ------------------------------------------------------------------------


def test_hook_list_shows_hooks_in_run_order(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hook_yaml(project, "late", HOOK_RHAI, "events: [before_user_message]\n")
    hook_yaml(project, "early", HOOK_RHAI, "priority: -5\n")
    hook_yaml(project, "broken", "fn nothing() { () }\n")
    monkeypatch.chdir(project)
    assert main(["hook", "list"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "early  project  early.rhai  priority -5  every hook function it defines",
        "late   project  late.rhai   priority 0   before_user_message",
    ]
    assert err.splitlines() == [
        "not loaded: config/scripts/hooks/broken.yaml:3: script: broken.rhai defines none of the hook"
        " functions before_user_message, after_turn, after_loop, before_tool_call, after_tool_call,"
        " before_llm_call"
    ]
    assert main(["hook", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(h["name"], h["events"], h["priority"]) for h in listed["hooks"]] == [
        ("early", None, -5),
        ("late", ["before_user_message"], 0),
    ]
    assert [(Path(p["path"]).name, p["line"]) for p in listed["problems"]] == [("broken.yaml", 3)]


def test_template_list_shows_templates_and_their_problems(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tool_yaml(project, "t")
    write(
        project, "config/templates/b.yaml", "name: beta\ndescription: second\ninstructions: x\ntools: [t]\n"
    )
    write(project, "config/templates/a.yaml", "name: alpha\ndescription: first\ninstructions: x\n")
    write(project, "config/templates/c.yaml", "name: gamma\ninstructions: x\ntools: [nope]\n")
    monkeypatch.chdir(project)
    assert main(["template", "list"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["alpha  a.yaml  first", "beta   b.yaml  second", "gamma  c.yaml"]
    assert err.splitlines() == [
        "not loaded: config/templates/c.yaml:3: template gamma: tools[0]: unknown tool 'nope' (known: t)"
    ]
    assert main(["template", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(t["name"], t["tools"]) for t in listed["templates"]] == [
        ("alpha", []),
        ("beta", ["t"]),
        ("gamma", ["nope"]),
    ]
    assert [p["line"] for p in listed["problems"]] == [3]


def test_lists_with_nothing_in_them(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project)
    assert main(["template", "list"]) == 0
    assert capsys.readouterr().out.startswith("no templates found in ")
    assert main(["hook", "list"]) == 0
    assert capsys.readouterr().out.startswith("no hooks found in ")
