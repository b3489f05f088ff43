"""`agentkernel tool test` and the `tests:` blocks in `agentkernel check` (issue 15 §2), as real subprocesses.

The cases run through `Kernel.run_tool` (the one dispatch path, S16) in a
throw-away data folder; a failing case really fails (exit 1, expected vs
got), a bad block is a problem naming file, line, field and case, and an
unknown tool is exit 2. `--junit` writes XML that parses.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.cli.conftest import cli
from tests.conftest import REPO, write_kernel_yaml

ECHO_JS = """
function run(args) {
    if (args.fail) { return { success: false, content: "refused: " + args.text, error: "asked to fail" }; }
    return {
        content: "echo: " + args.text + " as " + caller().user_id,
        visual: [{ type: "table", columns: [{ key: "t", title: "T" }], rows: [{ t: args.text }, { t: 1 }] }],
    };
}
"""

ECHO_YAML = """
kind: script_tool
name: echo
script: echo.js
parameters:
  type: object
  properties: {text: {type: string}, fail: {type: boolean}}
  required: [text]
"""


def agentkernel(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli("agentkernel", *args, cwd=cwd)


def tool(project: Path, name: str, yaml_text: str, script: str, ext: str = ".js") -> Path:
    folder = project / "config" / "scripts" / "tools"
    (folder / f"{name}{ext}").write_text(textwrap.dedent(script), encoding="utf-8")
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(yaml_text).lstrip(), encoding="utf-8")
    return path


def echo_with(project: Path, tests: str) -> Path:
    return tool(project, "echo", ECHO_YAML + textwrap.dedent(tests), ECHO_JS)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_kernel_yaml(tmp_path, "state:\n  db_path: data/state.db\n")
    return tmp_path


def test_the_shipped_tools_pass_their_own_tests(tmp_path: Path) -> None:
    shutil.copytree(REPO / "config", tmp_path / "config")
    done = agentkernel("tool", "test", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for name in ("currency", "text_stats", "text_stats_rhai", "wordcount", "state_tool", "duckdb_tool"):
        assert any(line.startswith(f"PASS  {name}: ") for line in lines), (name, done.stdout)  # built-ins too
    assert "FAIL" not in done.stdout
    cases = sum(line.startswith("PASS  ") for line in lines)
    assert re.match(rf"{cases} passed, 0 failed \({cases} cases of \d+ tools in ", lines[-1]), lines[-1]
    assert not (tmp_path / "data").exists(), "a test run writes nothing into the project"


def test_every_shipped_tool_tests_success_and_bad_input() -> None:
    import yaml

    for path in sorted((REPO / "config" / "scripts" / "tools").glob("*.yaml")):
        cases = yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]
        outcomes = {"error_contains" not in case["expect"] for case in cases}
        assert outcomes == {True, False}, path.name


def test_cases_pass_and_fail_with_expected_and_got(project: Path) -> None:
    echo_with(
        project,
        """
        tests:
          - name: plain
            args: {text: hi}
            expect: {content: "echo: hi as test-user", visual: {type: table, rows: 2}}
          - name: as alice
            args: {text: hi}
            user: alice
            expect: {contains: ["as alice"], matches: "^echo: \\\\w+ as"}
          - name: failure expected
            args: {text: nope, fail: true}
            expect: {error_contains: asked to fail}
          - name: wrong content
            args: {text: hi}
            expect: {content: "echo: bye as test-user"}
          - name: wrong everything
            args: {text: hi}
            expect:
              {success: false, contains: [zzz], matches: "^nope", error_contains: x, visual: {type: chart}}
          - name: bad args
            args: {text: 5}
            expect: {}
        """,
    )
    done = agentkernel("tool", "test", "echo", cwd=project)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["PASS  echo: plain", "PASS  echo: as alice", "PASS  echo: failure expected"]
    assert lines[3] == (
        "FAIL  echo: wrong content (config/scripts/tools/echo.yaml:20) — "
        "content: expected 'echo: bye as test-user', got 'echo: hi as test-user'"
    )
    assert lines[4].startswith("FAIL  echo: wrong everything (config/scripts/tools/echo.yaml:23) — ")
    for part in (
        "success: expected false, got true (content: 'echo: hi as test-user')",
        "contains: 'zzz' not in content 'echo: hi as test-user'",
        "matches: /^nope/ not found in content",
        "error_contains: expected 'x' in the error, got no error",
        "visual: expected a 'chart' block, got ['table']",
    ):
        assert part in lines[4], (part, lines[4])
    assert lines[5].startswith("FAIL  echo: bad args (config/scripts/tools/echo.yaml:27) — success: expected")
    assert "text: 5 is not of type 'string'" in lines[5]
    assert lines[6].startswith("3 passed, 3 failed (6 cases of 1 tool in ")


def test_every_case_has_its_own_session_in_one_throwaway_folder(project: Path) -> None:
    tool(
        project,
        "counter",
        """
        kind: script_tool
        name: counter
        script: counter.js
        tests:
          - name: first
            args: {}
            expect: {content: "1 in a fresh scratch folder"}
          - name: second
            args: {}
            expect: {content: "2 in a fresh scratch folder"}
        """,
        """
        function run() {
            const n = (state_get("user", "n") || 0) + 1;
            state_set("user", "n", n);
            let fresh = "a used";
            try { fs_read("mark.txt"); } catch (e) { fresh = "a fresh"; }
            fs_write("mark.txt", "x");
            return `${n} in ${fresh} scratch folder`;
        }
        """,
    )
    for _ in range(2):  # the state of one run is gone in the next: a new folder per run
        done = agentkernel("tool", "test", "counter", cwd=project)
        assert done.returncode == 0, done.stdout + done.stderr
    assert not (project / "data").exists()


def test_scripted_llm_replies_are_used_in_order(project: Path) -> None:
    tool(
        project,
        "ask",
        """
        kind: script_tool
        name: ask
        script: ask.js
        tests:
          - name: text then json
            args: {}
            llm: ["first", {json: {n: 2}}]
            expect: {content: "first 2"}
          - name: a 503 is retried by the kernel
            args: {}
            llm: [{error: 503}, "again", {json: {n: 3}}]
            expect: {content: "again 3"}
          - name: a 400 fails the call
            args: {}
            llm: [{error: 400}]
            expect: {error_contains: "400"}
          - name: a reply left over
            args: {}
            llm: ["one", {json: {n: 1}}, "spare"]
            expect: {content: "one 1"}
          - name: no reply scripted
            args: {}
            expect: {}
        """,
        """
        function run() {
            const text = llm("q");
            const value = llm_json({ user: "n?", output_schema: { type: "object" } });
            return `${text} ${value.n}`;
        }
        """,
    )
    done = agentkernel("tool", "test", "ask", cwd=project)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        "PASS  ask: text then json",
        "PASS  ask: a 503 is retried by the kernel",
        "PASS  ask: a 400 fails the call",
    ]
    assert lines[3].endswith("llm: 1 of 3 scripted replies not used (the tool asked the LLM less)"), lines[3]
    assert "more time(s) than the 0 scripted" in lines[4], lines[4]  # HTTP 500 is retried: 4 requests


def test_a_tool_asking_the_llm_with_no_case_scripting_it_reaches_none(project: Path) -> None:
    write_kernel_yaml(project, "llm:\n  base_url: http://127.0.0.1:9/v1\n  model: real\n")
    tool(
        project,
        "ask",
        "kind: script_tool\nname: ask\nscript: ask.js\n"
        "tests:\n  - {args: {}, expect: {error_contains: no LLM attached}}\n",
        'function run() { return llm("q"); }',
    )
    done = agentkernel("tool", "test", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr


def test_unknown_names_exit_2_and_tools_without_tests_are_named(project: Path) -> None:
    echo_with(project, "")
    done = agentkernel("tool", "test", "echo", "ghost", cwd=project)
    assert done.returncode == 2
    assert "agentkernel: unknown tool 'ghost' (loaded: echo)" in done.stderr
    done = agentkernel("tool", "test", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("; without tests: echo")


def test_junit_report(project: Path) -> None:
    echo_with(
        project,
        """
        tests:
          - {name: good, args: {text: a}, expect: {contains: [a]}}
          - {name: bad, args: {text: a}, expect: {content: b}}
        """,
    )
    report = project / "out" / "report.xml"
    report.parent.mkdir()
    done = agentkernel("tool", "test", "--junit", str(report), cwd=project)
    assert done.returncode == 1
    root = ET.parse(report).getroot()
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "2", "1")
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "echo"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {"good", "bad"}
    assert cases["good"].find("failure") is None
    failure = cases["bad"].find("failure")
    assert failure is not None
    assert failure.get("message") == "content: expected 'b', got 'echo: a as test-user'"


def test_check_names_file_line_field_and_case(project: Path) -> None:
    echo_with(
        project,
        """
        tests:
          - name: typo
            args: {text: a}
            expect: {sucess: true}
          - name: regex
            args: {text: a}
            expect: {matches: "[a"}
          - args: {text: a}
            llm: [{error: 200}]
            expect: {contains: a}
          - name: typo
            expect: {}
        """,
    )
    done = agentkernel("check", cwd=project)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "config/scripts/tools/echo.yaml:12: tests[0].expect.sucess (case 'typo'): unknown key 'sucess' "
        "(allowed: contains, content, error_contains, matches, success, visual); did you mean 'success'?",
        "config/scripts/tools/echo.yaml:15: tests[1].expect.matches (case 'regex'): "
        "not a valid regular expression '[a': unterminated character set at position 0",
        "config/scripts/tools/echo.yaml:17: tests[2].llm[0] (case 'case 3'): expected a scripted reply: "
        "a string, {json: VALUE} or {error: STATUS} (400-599), got {'error': 200}",
        "config/scripts/tools/echo.yaml:18: tests[2].expect.contains (case 'case 3'): "
        "expected a list of strings, got 'a'",
        "config/scripts/tools/echo.yaml:19: tests[3] (case 'typo'): 'args' is a required property",
        "found 5 problems (1 tool, 0 hooks, 0 templates loaded)",
    ]
    done = agentkernel("tool", "test", cwd=project)  # a block with problems does not run
    assert done.returncode == 1
    assert done.stdout.startswith("ERROR config/scripts/tools/echo.yaml:12: tests[0].expect.sucess")
    assert "PASS" not in done.stdout
    listed = agentkernel("tool", "list", cwd=project)  # the tool itself still loads
    assert listed.stdout.startswith("echo"), listed.stdout + listed.stderr


def test_tests_must_be_a_list_and_a_near_miss_is_a_typo(project: Path) -> None:
    echo_with(project, "tests: {args: {}}\n")
    done = agentkernel("check", cwd=project)
    assert "echo.yaml:8: tests: expected a list of test cases, got dict" in done.stdout
    echo_with(project, "test:\n  - {args: {}, expect: {}}\n")
    done = agentkernel("check", cwd=project)
    assert "echo.yaml:8: test: unknown field; did you mean 'tests'?" in done.stdout
