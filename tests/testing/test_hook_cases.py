"""`agentkernel hook test` and hooks' `tests:` blocks in `agentkernel check`, as real subprocesses.

A case calls one hook function through the loop's pipeline with the inputs
it states (a message, a question and an answer, an end reason); what the
hook decided is compared field by field, a failing case names file, line,
expected and got, and a block with problems is reported by `check` with
file, line, field and case, as a tool's.
"""

from __future__ import annotations

import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agentkernel.agent.loop import EndReason
from agentkernel.testing.hook_cases import REASONS
from tests.cli.conftest import cli
from tests.conftest import REPO, write_kernel_yaml

GATE_JS = """
function before_user_message(ctx, msg) {
    if (ctx.earlier) { return { notice: `earlier ${msg.role}` }; }
    if (msg.content === "ping") { return { reply: "pong", notice: `gate for ${ctx.user_id}` }; }
    if (msg.content === "drop") { return { suppress: true }; }
    if (msg.content === "bad") { return { notice: 5 }; }
    if (msg.content === "throw") { throw new Error("gate broke"); }
    if (msg.content.startsWith("FTS5")) {
        return {
            replace_message: { role: "user", content: msg.content + " Answer briefly." },
            inject: [{ role: "system", content: "FTS5 is SQLite's full-text search." }],
        };
    }
}

function after_turn(ctx, question, answer) {
    if (answer === null) { return { notice: `no answer (${ctx.turn.reason})` }; }
    return `${question.content.length} → ${answer.content.length}, ${ctx.turn.tool_calls} tool call(s)`;
}

function after_loop(ctx, reason) { return { reason }; }
"""

GATE_RHAI = """
fn before_user_message(ctx, msg) {
    if ctx.earlier { return #{ notice: `earlier ${msg.role}` }; }
    if msg.content == "ping" { return #{ reply: "pong", notice: `gate for ${ctx.user_id}` }; }
    if msg.content == "drop" { return #{ suppress: true }; }
    if msg.content == "bad" { return #{ notice: 5 }; }
    if msg.content == "throw" { throw "gate broke"; }
    if msg.content.starts_with("FTS5") {
        return #{
            replace_message: #{ role: "user", content: msg.content + " Answer briefly." },
            inject: [#{ role: "system", content: "FTS5 is SQLite's full-text search." }],
        };
    }
}

fn after_turn(ctx, question, answer) {
    if answer == () { return #{ notice: `no answer (${ctx.turn.reason})` }; }
    `${question.content.len} → ${answer.content.len}, ${ctx.turn.tool_calls} tool call(s)`
}

fn after_loop(ctx, reason) { #{ reason: reason } }
"""

PASSING = """
tests:
  - name: ping
    event: before_user_message
    message: ping
    user: alice
    expect: {reply: pong, notice: gate for alice, suppress: false, inject: []}
  - name: drop
    event: before_user_message
    message: {role: user, content: drop}
    expect: {suppress: true, reply: null, notice: null}
  - name: replace and inject
    event: before_user_message
    message: FTS5?
    expect:
      replace_message: {role: user, content: FTS5? Answer briefly.}
      inject: [{role: system, content: "FTS5 is SQLite's full-text search."}]
  - name: an earlier message
    event: before_user_message
    message: {role: assistant, content: hi}
    earlier: true
    expect: {notice: earlier assistant}
  - name: unchanged
    event: before_user_message
    message: hello
    expect: {result: null, replace_message: null}
  - name: a bad verdict is a failed call
    event: before_user_message
    message: bad
    expect: {error_contains: "ignored part of the verdict: notice: expected a string, got 5"}
  - name: a throw
    event: before_user_message
    message: throw
    expect: {success: false, error_contains: gate broke}
  - name: after the turn
    event: after_turn
    question: hello
    answer: {role: assistant, content: hi there}
    turn: {tool_calls: 3}
    expect: {notice: "5 → 8, 3 tool call(s)"}
  - name: no answer
    event: after_turn
    question: hello
    answer: null
    turn: {reason: blocked}
    expect: {notice: no answer (blocked)}
  - name: the end
    event: after_loop
    reason: max_turns
    expect: {result: {reason: max_turns}}
  - name: the end by default
    event: after_loop
    expect: {result: {reason: job_done}}
"""


def agentkernel(*args: str, cwd: Path) -> tuple[int, str, str]:
    done = cli("agentkernel", *args, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


def hook(project: Path, name: str, script: str, tests: str, ext: str = ".js", extra: str = "") -> Path:
    folder = project / "config" / "scripts" / "hooks"
    (folder / f"{name}{ext}").write_text(textwrap.dedent(script), encoding="utf-8")
    path = folder / f"{name}.yaml"
    head = f"kind: script_hook\nname: {name}\nscript: {name}{ext}\n{extra}"
    path.write_text(head + textwrap.dedent(tests).lstrip(), encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_kernel_yaml(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("script", "ext"), [(GATE_JS, ".js"), (GATE_RHAI, ".rhai")])
def test_every_event_s_cases_pass(project: Path, script: str, ext: str) -> None:
    hook(project, "gate", script, PASSING, ext)
    code, out, err = agentkernel("hook", "test", "gate", cwd=project)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[:-1] == [
        f"PASS  gate: {name}"
        for name in (
            "ping",
            "drop",
            "replace and inject",
            "an earlier message",
            "unchanged",
            "a bad verdict is a failed call",
            "a throw",
            "after the turn",
            "no answer",
            "the end",
            "the end by default",
        )
    ]
    assert lines[-1].startswith("11 passed, 0 failed (11 cases of 1 hook in ")


def test_a_failing_case_names_its_line_what_was_expected_and_what_came(project: Path) -> None:
    hook(
        project,
        "gate",
        GATE_JS,
        """
        tests:
          - name: wrong reply
            event: before_user_message
            message: ping
            expect: {reply: ping, notice: gate for test-user}
          - name: not a failure
            event: before_user_message
            message: throw
            expect: {notice: null}
          - name: wrong result
            event: after_loop
            expect: {result: job_done}
        """,
    )
    code, out, _ = agentkernel("hook", "test", cwd=project)
    assert code == 1
    path = "config/scripts/hooks/gate.yaml"
    assert out.splitlines()[:3] == [
        f"FAIL  gate: wrong reply ({path}:5) — reply: expected 'ping', got 'pong'",
        f"FAIL  gate: not a failure ({path}:9) — success: expected true, got false (Error: gate broke "
        "(at gate.js:7:51))",
        f'FAIL  gate: wrong result ({path}:13) — result: expected \'job_done\', got {{"reason": "job_done"}}',
    ]


def test_a_hook_asking_the_llm_gets_the_case_s_scripted_replies(project: Path) -> None:
    hook(
        project,
        "summary",
        """
        function after_turn(ctx, question, answer) {
            return { notice: llm("Summarise in three words.", answer.content) };
        }
        """,
        """
        tests:
          - name: summarised
            event: after_turn
            question: What is FTS5?
            answer: SQLite's full-text search engine, built in.
            llm: ["Full-text search"]
            expect: {notice: Full-text search}
          - name: a reply too many
            event: after_turn
            question: x
            answer: y
            llm: ["one", "two"]
            expect: {notice: one}
        """,
    )
    code, out, _ = agentkernel("hook", "test", "summary", cwd=project)
    assert code == 1
    assert out.splitlines()[:2] == [
        "PASS  summary: summarised",
        "FAIL  summary: a reply too many (config/scripts/hooks/summary.yaml:11) — "
        "llm: 1 of 2 scripted replies not used (the hook asked the LLM less)",
    ]


def test_a_hook_that_takes_no_part_in_the_event_fails_its_case(project: Path) -> None:
    hook(
        project,
        "greeter",
        "function before_user_message(ctx, msg) { return { notice: 'hi' }; }\n",
        """
        tests:
          - event: after_turn
            question: a
            answer: b
            expect: {notice: hi}
        """,
    )
    code, out, _ = agentkernel("hook", "test", cwd=project)
    assert code == 1
    assert out.splitlines()[0] == (
        "FAIL  greeter: case 1 (config/scripts/hooks/greeter.yaml:5) — "
        "the hook takes no part in after_turn: its script defines no after_turn function"
    )


def test_check_names_file_line_field_and_case(project: Path) -> None:
    hook(
        project,
        "gate",
        GATE_JS,
        """
        tests:
          - name: typo
            event: before_user_message
            message: ping
            expect: {replay: pong}
          - name: another event input
            event: after_loop
            message: ping
            expect: {notice: x}
          - name: missing inputs
            event: after_turn
            question: x
            expect: {}
          - name: not an event
            event: before_user_mesage
            message: x
            expect: {}
          - name: bad turn
            event: after_turn
            question: x
            answer: y
            turn: {reason: done, tool_calls: -1}
            expect: {}
        """,
        extra="events: [before_user_message, after_turn]\n",
    )
    code, out, err = agentkernel("check", cwd=project)
    assert code == 1, out + err
    path = "config/scripts/hooks/gate.yaml"
    assert out.splitlines()[:-1] == [
        f"{path}:9: tests[0].expect.replay (case 'typo'): unknown key 'replay' (allowed: ask, deny, "
        "error_contains, inject, notice, replace_args, replace_message, replace_messages, replace_result, "
        "reply, result, success, suppress); did you mean 'reply'?",
        f"{path}:11: tests[1].event (case 'another event input'): the hook's `events:` leaves after_loop "
        "out (events: before_user_message, after_turn)",
        f"{path}:12: tests[1].message (case 'another event input'): not an input of after_loop "
        "(its inputs: reason)",
        f"{path}:13: tests[1].expect.notice (case 'another event input'): not a verdict of after_loop "
        "(expect: success, error_contains, result)",
        f"{path}:15: tests[2].event (case 'missing inputs'): after_turn needs `answer:`",
        f"{path}:19: tests[3].event (case 'not an event'): expected one of before_user_message, "
        "after_turn, after_loop, before_tool_call, after_tool_call, before_llm_call, got "
        "'before_user_mesage'; did you mean 'before_user_message'?",
        f"{path}:26: tests[4].turn.reason (case 'bad turn'): expected an end reason: "
        + ", ".join(REASONS)
        + ", got 'done'",
        f"{path}:26: tests[4].turn.tool_calls (case 'bad turn'): expected an integer >= 0, got -1",
    ]
    code, out, _ = agentkernel("hook", "test", "gate", cwd=project)  # a block with problems does not run
    assert code == 1 and out.splitlines()[-1].startswith("0 passed, 0 failed, 8 tests: block problems")


GUARD_JS = """
function before_tool_call(ctx, call) {
    if (call.tool === "shell") { return { deny: `no shell from ${call.origin}` }; }
    if (call.args.path === "/etc") { throw new Error("guard broke"); }
    if (call.tool === "delete") { return { ask: `delete ${call.args.path}?` }; }
    if (call.args.limit > 10) { return { replace_args: { ...call.args, limit: 10 }, notice: "capped" }; }
}

function after_tool_call(ctx, call, result) {
    if (result.content.includes("sk-")) {
        const content = result.content.replace(/sk-\\w+/, "[key]");
        return { replace_result: { content, success: result.success } };
    }
    return `${call.id}: ${result.success}`;
}

function before_llm_call(ctx, request) {
    if (request.model === "forbidden") { return { deny: "not that model" }; }
    const lower = request.messages.map(m => ({ role: m.role, content: m.content.toLowerCase() }));
    return { replace_messages: lower, notice: `${request.tools.length} tool(s)` };
}
"""

GUARD_RHAI = """
fn before_tool_call(ctx, tc) {
    if tc.tool == "shell" { return #{ deny: `no shell from ${tc.origin}` }; }
    if tc.args.path == "/etc" { throw "guard broke"; }
    if tc.tool == "delete" { return #{ ask: `delete ${tc.args.path}?` }; }
    if tc.args.limit != () && tc.args.limit > 10 {
        let args = tc.args;
        args.limit = 10;
        return #{ replace_args: args, notice: "capped" };
    }
}

fn after_tool_call(ctx, tc, result) {
    if result.content.contains("sk-") {
        let content = result.content;
        content.replace("sk-123", "[key]");
        return #{ replace_result: #{ content: content, success: result.success } };
    }
    `${tc.id}: ${result.success}`
}

fn before_llm_call(ctx, request) {
    if request.model == "forbidden" { return #{ deny: "not that model" }; }
    let out = [];
    for m in request.messages { let c = m.content; c.make_lower(); out.push(#{ role: m.role, content: c }); }
    #{ replace_messages: out, notice: `${request.tools.len()} tool(s)` }
}
"""

GUARD_CASES = """
tests:
  - name: no shell
    event: before_tool_call
    call: {tool: shell, args: {command: ls}, origin: subagent}
    expect: {deny: "denied by hook guard: no shell from subagent", ask: null, replace_args: null}
  - name: a throw denies
    event: before_tool_call
    call: {tool: read, args: {path: /etc}}
    expect: {error_contains: guard broke}
  - name: ask
    event: before_tool_call
    call: {tool: delete, args: {path: /tmp/x}}
    expect: {ask: delete /tmp/x?, deny: null}
  - name: capped
    event: before_tool_call
    call: {tool: search, args: {q: fts5, limit: 50}, id: c9}
    expect: {replace_args: {q: fts5, limit: 10}, notice: capped}
  - name: scrubbed
    event: after_tool_call
    call: {tool: env}
    result: "key sk-123"
    expect: {replace_result: {content: "key [key]", success: true}}
  - name: scrubbed, by its content
    event: after_tool_call
    call: {tool: env}
    result: {content: "key sk-123", success: false}
    expect: {replace_result: "key [key]"}
  - name: a notice
    event: after_tool_call
    call: {tool: env, id: c3}
    result: fine
    expect: {notice: "c3: true", replace_result: null}
  - name: lower-cased
    event: before_llm_call
    request: {messages: [{role: system, content: Be Brief}, {role: user, content: HI}], tools: [a, b]}
    expect: {replace_messages: [be brief, hi], notice: 2 tool(s), deny: null}
  - name: denied
    event: before_llm_call
    request: {messages: [], model: forbidden}
    expect: {deny: "denied by hook guard: not that model", replace_messages: null}
"""
GUARD_NAMES = (
    "no shell",
    "a throw denies",
    "ask",
    "capped",
    "scrubbed",
    "scrubbed, by its content",
    "a notice",
    "lower-cased",
    "denied",
)


@pytest.mark.parametrize(("script", "ext"), [(GUARD_JS, ".js"), (GUARD_RHAI, ".rhai")])
def test_s24_events_cases_pass(project: Path, script: str, ext: str) -> None:
    hook(project, "guard", script, GUARD_CASES, ext)
    code, out, err = agentkernel("hook", "test", "guard", cwd=project)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[:-1] == [f"PASS  guard: {name}" for name in GUARD_NAMES]


def test_s24_events_failing_cases_say_what_came(project: Path) -> None:
    hook(
        project,
        "guard",
        GUARD_JS,
        """
        tests:
          - name: allowed?
            event: before_tool_call
            call: {tool: shell}
            expect: {deny: null}
          - name: args
            event: before_tool_call
            call: {tool: search, args: {limit: 50}}
            expect: {replace_args: {limit: 5}}
          - name: contents
            event: before_llm_call
            request: {messages: [{role: user, content: HI}]}
            expect: {replace_messages: [HI]}
        """,
    )
    code, out, _ = agentkernel("hook", "test", "guard", cwd=project)
    assert code == 1
    path = "config/scripts/hooks/guard.yaml"
    assert out.splitlines()[:3] == [
        f"FAIL  guard: allowed? ({path}:5) — deny: expected none, "
        "got 'denied by hook guard: no shell from llm'",
        f'FAIL  guard: args ({path}:9) — replace_args: expected {{"limit": 5}}, got {{"limit": 10}}',
        f'FAIL  guard: contents ({path}:13) — replace_messages: expected ["HI"], got ["hi"]',
    ]


def test_check_names_the_s24_inputs_and_verdicts(project: Path) -> None:
    hook(
        project,
        "guard",
        GUARD_JS,
        """
        tests:
          - name: wrong input
            event: before_llm_call
            call: {tool: x}
            expect: {replace_args: {}}
          - name: no result
            event: after_tool_call
            call: {tool: x, origin: elsewhere}
            expect: {}
        """,
    )
    code, out, err = agentkernel("check", cwd=project)
    assert code == 1, out + err
    path = "config/scripts/hooks/guard.yaml"
    assert out.splitlines()[:-1] == [
        f"{path}:6: tests[0].event (case 'wrong input'): before_llm_call needs `request:`",
        f"{path}:7: tests[0].call (case 'wrong input'): not an input of before_llm_call "
        "(its inputs: request)",
        f"{path}:8: tests[0].expect.replace_args (case 'wrong input'): not a verdict of before_llm_call "
        "(expect: success, error_contains, result, notice, deny, replace_messages)",
        f"{path}:11: tests[1].call.origin (case 'no result'): expected where the call comes from: llm, "
        "call_tool, subagent, mcp_client, outside_mcp, panel, continuation, client, got 'elsewhere'",
    ]


def test_the_end_reasons_are_the_loop_s() -> None:
    assert tuple(reason.value for reason in EndReason) == REASONS


def test_unknown_names_exit_2_and_hooks_without_tests_are_named(project: Path) -> None:
    hook(project, "gate", GATE_JS, PASSING)
    hook(project, "quiet", "function after_loop(ctx, reason) {}\n", "")
    code, _, err = agentkernel("hook", "test", "nosuch", cwd=project)
    assert code == 2 and "unknown hook 'nosuch'" in err
    code, out, _ = agentkernel("hook", "test", cwd=project)
    assert code == 0
    assert out.splitlines()[-1].endswith("; without tests: quiet")


def test_junit_report_has_a_suite_per_hook(project: Path) -> None:
    hook(project, "gate", GATE_JS, PASSING)
    code, _, _ = agentkernel("hook", "test", "--junit", "report.xml", cwd=project)
    assert code == 0
    suite = ET.parse(project / "report.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == ("gate", "11", "0")


def test_the_shipped_hooks_pass_their_own_tests(tmp_path: Path) -> None:
    shutil.copytree(REPO / "config", tmp_path / "config")
    code, out, err = agentkernel("hook", "test", "moderation", "audit", cwd=tmp_path)
    assert code == 0, out + err
    assert out.splitlines()[-1].startswith("5 passed, 0 failed (5 cases of 2 hooks in ")
