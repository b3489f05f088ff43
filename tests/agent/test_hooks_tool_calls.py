"""The tool-call hook events (S24.1–S24.3) in the pipeline: chains, denies, failures, in both engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.agent.hooks import REASON_CHARS, HookEvent, HookPipeline
from agentkernel.types import JSONObject
from tests.agent.test_hooks import hooks_dir, make_hook, pipeline

__all__ = ["hooks_dir", "pipeline"]  # the fixtures, shared with test_hooks.py

CALL: JSONObject = {"id": "call-7", "tool": "shell", "args": {"command": "ls"}, "origin": "llm"}
RESULT: JSONObject = {"content": "key=sk-123", "success": True, "error": None, "visual": None, "warnings": []}
TOOL_CALL: JSONObject = {"id": "c1", "type": "function", "function": {"name": "upper", "arguments": "{}"}}
REQUEST: JSONObject = {
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "mail bob@example.com"},
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
        {"role": "tool", "content": "sent to bob@example.com", "tool_call_id": "c1"},
    ],
    "tools": ["upper"],
    "model": "fake",
}


# -- before_tool_call (S24.2) -----------------------------------------------------------------


def test_s24_2_first_deny_wins_over_an_earlier_ask_and_ends_the_chain(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    asker = make_hook(
        hooks_dir,
        "asker",
        'fn before_tool_call(ctx, tc) { #{ ask: `run ${tc.tool}?`, notice: "asked" } }',
        ext=".rhai",
        extra="priority: 1\n",
    )
    guard = make_hook(
        hooks_dir,
        "guard",
        "function before_tool_call(ctx, call) { if (call.tool === 'shell') return {deny: 'no shell'}; }",
        extra="priority: 2\n",
    )
    never = make_hook(
        hooks_dir, "never", "function before_tool_call() { return {notice: 'never'}; }", extra="priority: 3\n"
    )
    outcome = pipeline.before_tool_call([never, guard, asker], kernel.caller(), CALL)
    assert outcome.denied and outcome.deny == "denied by hook guard: no shell"
    assert (outcome.denied_by, outcome.ask, outcome.asked_by) == ("guard", "run shell?", "asker")
    assert outcome.notices == ["asked"] and not outcome.replaced
    assert [r.hook for r in outcome.records] == ["asker", "guard"]  # the deny ended the chain
    allowed = pipeline.before_tool_call([asker, guard], kernel.caller(), {**CALL, "tool": "upper"})
    assert not allowed.denied and allowed.ask == "run upper?" and allowed.args == CALL["args"]


def test_s24_2_replace_args_chain_in_priority_order(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    first = make_hook(
        hooks_dir,
        "z_first",
        "function before_tool_call(ctx, call) { return {replace_args: {...call.args, limit: 5}}; }",
        extra="priority: -1\n",
    )
    second = make_hook(
        hooks_dir,
        "a_second",
        """
        fn before_tool_call(ctx, tc) {
            let args = tc.args;
            args.command = `${args.command} -l`;
            #{ replace_args: args, notice: `saw limit ${tc.args.limit}` }
        }
        """,
        ext=".rhai",
    )
    outcome = pipeline.before_tool_call([second, first], kernel.caller(), CALL)
    assert outcome.replaced and not outcome.denied
    assert outcome.args == {"command": "ls -l", "limit": 5}
    assert outcome.notices == ["saw limit 5"]
    assert CALL["args"] == {"command": "ls"}  # the caller's call is not changed


@pytest.mark.parametrize(
    ("source", "ext", "extra", "error"),
    [
        ("function before_tool_call() { throw new Error('guard broke'); }", ".js", "", "Error: guard broke"),
        ('fn before_tool_call(ctx, tc) { throw "guard broke"; }', ".rhai", "", "guard broke"),
        ("function before_tool_call() { while (true) {} }", ".js", "max_operations: 100000\n",
         "max_operations"),
        ("fn before_tool_call(ctx, tc) { loop {} }", ".rhai", "max_operations: 100000\n", "max_operations"),
        ("function before_tool_call() { while (true) {} }", ".js",
         "timeout_secs: 0.2\nmax_operations: 1000000000000\n", "timeout_secs"),
        ("function before_tool_call() { return {replace_args: [1, 2]}; }", ".js", "",
         "a malformed verdict: replace_args: expected an object (the tool's arguments), got [1, 2]"),
        ('fn before_tool_call(ctx, tc) { #{ replace_args: "rm -rf /" } }', ".rhai", "",
         "replace_args: expected an object"),
        ("function before_tool_call() { return {replace_args: {data: 'x'.repeat(200000)}}; }", ".js", "",
         "(max_result_chars, 50,000 more than the"),
        ('fn before_tool_call(ctx, tc) { let s = ""; s.pad(200000, "x"); #{ replace_args: #{ data: s } } }',
         ".rhai", "", "(max_result_chars, 50,000 more than the"),
        ("function before_tool_call() { return {denied: 'typo'}; }", ".js", "", "unknown field 'denied'"),
        ("function before_tool_call() { return 42; }", ".js", "", "expected an object or nothing, got 42"),
    ],
)  # fmt: skip
def test_s24_2_a_failing_hook_denies_the_call(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path, source: str, ext: str, extra: str, error: str
) -> None:
    bad = make_hook(hooks_dir, "bad", source, ext=ext, extra=extra)
    later = make_hook(hooks_dir, "later", "function before_tool_call() { return {notice: 'later'}; }")
    outcome = pipeline.before_tool_call([bad, later], kernel.caller(), CALL)
    assert outcome.denied and outcome.denied_by == "bad"
    assert outcome.deny is not None and outcome.deny.startswith("denied by hook bad: the hook failed")
    assert error in outcome.deny and len(outcome.deny) <= REASON_CHARS
    assert outcome.args == CALL["args"] and not outcome.replaced  # a failed verdict changes nothing
    assert outcome.notices == [] and {r.hook for r in outcome.records} == {"bad"}
    recorded = error.removeprefix("a malformed verdict: ")
    assert any(r.failed and recorded in str(r.error) for r in outcome.records)


@pytest.mark.parametrize(
    ("source", "ext"),
    [
        ("function before_tool_call() { throw new Error('guard broke'); }", ".js"),
        ('fn before_tool_call(ctx, tc) { throw "guard broke"; }', ".rhai"),
        ("function before_tool_call() { return {replace_args: 'oops', notice: 'kept'}; }", ".js"),
    ],
)
def test_s24_2_on_error_allow_records_and_skips_the_hook(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path, source: str, ext: str
) -> None:
    lenient = make_hook(hooks_dir, "lenient", source, ext=ext, extra="on_error: allow\n")
    later = make_hook(
        hooks_dir,
        "later",
        "function before_tool_call(c, call) { return {replace_args: {command: call.args.command + '!'}}; }",
        extra="priority: 1\n",
    )
    outcome = pipeline.before_tool_call([later, lenient], kernel.caller(), CALL)
    assert not outcome.denied and outcome.args == {"command": "ls!"}
    assert [(r.hook, r.failed) for r in outcome.records][-1] == ("later", False)
    assert [r.hook for r in outcome.records if r.failed] == ["lenient"]


def test_s24_2_a_hook_that_no_longer_compiles_denies(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    spec = make_hook(hooks_dir, "fragile", "function before_tool_call() {}")
    assert not pipeline.before_tool_call([spec], kernel.caller(), CALL).denied
    (hooks_dir / "fragile.js").write_text("function before_tool_call( {", encoding="utf-8")
    stamp = (hooks_dir / "fragile.js").stat().st_mtime_ns + 10_000_000
    import os

    os.utime(hooks_dir / "fragile.js", ns=(stamp, stamp))
    outcome = pipeline.before_tool_call([spec], kernel.caller(), CALL)
    assert outcome.deny is not None and "denied by hook fragile: the hook failed" in outcome.deny
    assert "SyntaxError" in outcome.deny


def test_s24_2_a_long_deny_reason_is_cut(kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path) -> None:
    long = make_hook(hooks_dir, "long", "function before_tool_call() { return {deny: 'x'.repeat(30000)}; }")
    outcome = pipeline.before_tool_call([long], kernel.caller(), CALL)
    assert outcome.deny is not None and len(outcome.deny) == REASON_CHARS
    assert outcome.deny.startswith("denied by hook long: xxx") and outcome.deny.endswith("…")
    rhai = make_hook(
        hooks_dir,
        "asks",
        'fn before_tool_call(c, tc) { let s = ""; s.pad(30000, "?"); #{ ask: s } }',
        ext=".rhai",
    )
    asked = pipeline.before_tool_call([rhai], kernel.caller(), CALL)
    assert asked.ask is not None and len(asked.ask) == REASON_CHARS and asked.ask.endswith("…")


def test_s24_2_a_10_mb_deny_reason_is_never_kept(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    huge = make_hook(
        hooks_dir,
        "huge",
        "function before_tool_call() { return {deny: 'x'.repeat(10 * 1024 * 1024)}; }",
        extra="memory_limit_mb: 256\n",
    )
    outcome = pipeline.before_tool_call([huge], kernel.caller(), CALL)
    assert outcome.deny is not None and len(outcome.deny) <= REASON_CHARS
    assert (
        outcome.deny.startswith("denied by hook huge: the hook failed") and "max_result_chars" in outcome.deny
    )
    assert all(len(json.dumps(r.to_json())) < 10_000 for r in outcome.records)


def test_s24_1_ctx_and_call_as_the_hook_sees_them(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    spy = make_hook(
        hooks_dir,
        "spy",
        "function before_tool_call(ctx, call) { return {notice: JSON.stringify([ctx, call])}; }",
        extra="flavour: mint\n",
    )
    caller = kernel.caller(user_id="u1", session_id="s1", template="t1")
    (notice,) = pipeline.before_tool_call([spy], caller, CALL).notices
    ctx, call = json.loads(notice)
    assert (ctx["user_id"], ctx["session_id"], ctx["template"], ctx["config"]["flavour"]) == (
        "u1",
        "s1",
        "t1",
        "mint",
    )
    assert call == CALL


def test_s24_1_events_filter(kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path) -> None:
    source = """
        function before_tool_call() { return {deny: 'filtered?'}; }
        function after_tool_call() { return 'after'; }
        function before_llm_call() { return {notice: 'llm'}; }
    """
    only_after = make_hook(hooks_dir, "only_after", source, extra="events: [after_tool_call]\n")
    assert not pipeline.before_tool_call([only_after], kernel.caller(), CALL).records
    assert not pipeline.before_llm_call([only_after], kernel.caller(), REQUEST).records
    assert pipeline.after_tool_call([only_after], kernel.caller(), CALL, RESULT).notices == ["after"]
    every = make_hook(hooks_dir, "every", source)
    assert pipeline.before_tool_call([every], kernel.caller(), CALL).denied
    assert pipeline.before_llm_call([every], kernel.caller(), REQUEST).notices == ["llm"]


# -- after_tool_call (S24.3) ------------------------------------------------------------------


def test_s24_3_replace_result_chains(kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path) -> None:
    scrub = make_hook(
        hooks_dir,
        "scrub",
        """
        function after_tool_call(ctx, call, result) {
            return {replace_result: {...result, content: result.content.replace(/sk-\\d+/, '[key]')},
                    notice: `scrubbed ${call.tool}`};
        }
        """,
        extra="priority: 1\n",
    )
    stamp = make_hook(
        hooks_dir,
        "stamp",
        """
        fn after_tool_call(ctx, tc, result) {
            #{ replace_result: #{ content: result.content + " (checked)", success: false, note: 1 } }
        }
        """,
        ext=".rhai",
        extra="priority: 2\n",
    )
    outcome = pipeline.after_tool_call([stamp, scrub], kernel.caller(), CALL, RESULT)
    assert outcome.replaced and outcome.notices == ["scrubbed shell"]
    assert outcome.result == {"content": "key=[key] (checked)", "success": False, "note": 1}
    assert not any(r.failed for r in outcome.records)


@pytest.mark.parametrize(
    ("verdict", "problem"),
    [
        ("{replace_result: 'plain'}", "replace_result: expected an object {content: string"),
        ("{replace_result: {success: true}}", "replace_result.content: expected a string, got null"),
        (
            "{replace_result: {content: 'x', success: 'yes'}}",
            "replace_result.success: expected true or false",
        ),
        ("{notice: 5}", "notice: expected a string, got 5"),
        ("{replace: {content: 'x'}}", "unknown field 'replace'"),
    ],
)
def test_s24_3_a_bad_replace_result_is_recorded_and_ignored(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path, verdict: str, problem: str
) -> None:
    bad = make_hook(hooks_dir, "bad", f"function after_tool_call() {{ return {verdict}; }}")
    thrower = make_hook(hooks_dir, "thrower", "function after_tool_call() { throw new Error('x'); }")
    outcome = pipeline.after_tool_call([bad, thrower], kernel.caller(), CALL, RESULT)
    assert not outcome.replaced and outcome.result == RESULT
    errors = [str(r.error) for r in outcome.records if r.failed]
    assert len(errors) == 2 and problem in errors[0] and "Error: x" in errors[1]


# -- before_llm_call (S24.3) ------------------------------------------------------------------

MASK_JS = """
function before_llm_call(ctx, request) {
    return {replace_messages: request.messages.map(m =>
        ({...m, content: m.content === null ? null : m.content.replace(/\\w+@\\w+\\.com/g, '[email]')}))};
}
"""
SHOUT_RHAI = """
fn before_llm_call(ctx, request) {
    let out = [];
    for m in request.messages {
        out.push(#{ role: m.role, content: if m.content == () { () } else { m.content.to_upper() } });
    }
    #{ replace_messages: out, notice: `${request.model}: ${request.tools.len()} tool(s)` }
}
"""


def test_s24_3_replace_messages_chain_and_keep_tool_calls(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    mask = make_hook(hooks_dir, "mask", MASK_JS, extra="priority: 1\n")
    shout = make_hook(hooks_dir, "shout", SHOUT_RHAI, ext=".rhai", extra="priority: 2\n")
    outcome = pipeline.before_llm_call([shout, mask], kernel.caller(), REQUEST)
    assert outcome.contents == ["BE BRIEF", "MAIL [EMAIL]", None, "SENT TO [EMAIL]"]
    assert outcome.notices == ["fake: 1 tool(s)"] and not outcome.denied
    assert not any(r.failed for r in outcome.records)
    messages = REQUEST["messages"]
    assert isinstance(messages, list)
    assert messages[1] == {"role": "user", "content": "mail bob@example.com"}  # not changed


@pytest.mark.parametrize(
    ("replacement", "problem"),
    [
        ("request.messages.slice(1)",
         "replace_messages: expected 4 messages (one for each of the request's, in order), got 3"),
        ("request.messages.map(m => ({role: 'user', content: 'x'}))",
         "replace_messages[0].role: expected 'system'"),
        ("request.messages.map(m => ({role: m.role, content: 5}))",
         "replace_messages[0].content: expected a string, got 5"),
        ("request.messages.map(m => ({role: m.role, content: null}))",
         "replace_messages[0].content: expected a string, got null"),
        ("request.messages.map(m => ({...m, tool_calls: []}))", "replace_messages[0].tool_calls: differs"),
        ("request.messages.map(m => ({...m, name: 'x'}))", "replace_messages[0]: unknown field 'name'"),
        ("'all of it'", "replace_messages: expected a list of 4 {role, content}"),
    ],
)  # fmt: skip
def test_s24_3_a_malformed_replace_messages_is_ignored_and_recorded(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path, replacement: str, problem: str
) -> None:
    bad = make_hook(
        hooks_dir,
        "bad",
        f"function before_llm_call(c, request) {{ return {{replace_messages: {replacement},notice: 'n'}}; }}",
    )
    outcome = pipeline.before_llm_call([bad], kernel.caller(), REQUEST)
    assert outcome.contents is None and outcome.notices == ["n"]  # the well-formed rest holds (S7.5)
    (failure,) = [r for r in outcome.records if r.failed]
    assert problem in str(failure.error)


def test_s24_3_replace_messages_wrong_role_in_rhai(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    bad = make_hook(
        hooks_dir,
        "bad",
        'fn before_llm_call(ctx, request) { #{ replace_messages: [#{ role: "user", content: "hi" }] } }',
        ext=".rhai",
    )
    outcome = pipeline.before_llm_call([bad], kernel.caller(), REQUEST)
    assert outcome.contents is None
    assert "expected 4 messages" in str(outcome.records[-1].error)


def test_s24_3_llm_deny_ends_the_chain_and_errors_are_skipped(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    broken = make_hook(hooks_dir, "broken", "function before_llm_call() { throw new Error('down'); }")
    blocker = make_hook(
        hooks_dir,
        "blocker",
        'fn before_llm_call(c, r) { #{ deny: "no PII out" } }',
        ext=".rhai",
        extra="priority: 1\n",
    )
    never = make_hook(
        hooks_dir, "never", "function before_llm_call() { return {notice: 'x'}; }", extra="priority: 2\n"
    )
    outcome = pipeline.before_llm_call([never, blocker, broken], kernel.caller(), REQUEST)
    assert outcome.deny == "denied by hook blocker: no PII out" and outcome.denied_by == "blocker"
    assert [(r.hook, r.failed) for r in outcome.records] == [("broken", True), ("blocker", False)]


# -- run_event: what a hook's tests: case runs ------------------------------------------------


def test_run_event_gives_each_s24_event_its_outcome(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    spec = make_hook(
        hooks_dir,
        "all",
        MASK_JS
        + """
        function before_tool_call(ctx, call) { return {ask: 'sure?'}; }
        function after_tool_call(ctx, call, result) { return 'seen'; }
        """,
    )
    caller = kernel.caller()
    call_run = pipeline.run_event(spec, caller, HookEvent("before_tool_call", call=CALL))
    assert call_run.handled and call_run.tool_call is not None and call_run.tool_call.ask == "sure?"
    result_run = pipeline.run_event(spec, caller, HookEvent("after_tool_call", call=CALL, result=RESULT))
    assert result_run.tool_result is not None and result_run.tool_result.notices == ["seen"]
    llm_run = pipeline.run_event(spec, caller, HookEvent("before_llm_call", request=REQUEST))
    assert llm_run.llm_call is not None and llm_run.llm_call.contents is not None
    assert llm_run.llm_call.contents[1] == "mail [email]"


def test_a_verdict_may_be_as_big_as_what_the_hook_got_plus_max_result_chars(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    limit = kernel.config.limits.max_result_chars
    long_text = "Bob@Example.com " * (limit // 8)  # twice max_result_chars
    request: JSONObject = {"messages": [{"role": "user", "content": long_text}], "tools": [], "model": "m"}
    lower = make_hook(
        hooks_dir,
        "lower",
        "function before_llm_call(c, r) { return {replace_messages: [{role: 'user', content: "
        "r.messages[0].content.toLowerCase()}]}; }",
    )
    outcome = pipeline.before_llm_call([lower], kernel.caller(), request)
    assert outcome.contents == [long_text.lower()] and not any(r.failed for r in outcome.records)
    scrub = make_hook(
        hooks_dir,
        "scrub",
        "fn after_tool_call(c, tc, result) { let t = result.content; t.make_lower(); #{ replace_result: "
        "#{ content: t } } }",
        ext=".rhai",
    )
    big = {**RESULT, "content": long_text}
    replaced = pipeline.after_tool_call([scrub], kernel.caller(), CALL, big)
    assert replaced.result == {"content": long_text.lower()}
    grower = make_hook(
        hooks_dir,
        "grower",
        f"function after_tool_call(c, tc, r) {{ return {{replace_result: {{content: r.content + "
        f"'x'.repeat({2 * limit})}}}}; }}",
    )
    refused = pipeline.after_tool_call([grower], kernel.caller(), CALL, big)
    assert not refused.replaced
    assert f"more than the {len(json.dumps([CALL, big], ensure_ascii=False)):,} it was given" in str(
        refused.records[-1].error
    )
