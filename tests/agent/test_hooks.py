"""The hook pipeline (S7): every verdict, order, short-circuit and isolation, in both engines."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.agent.hooks import HookPipeline
from agentkernel.config import HookSpec, load_kernel_config, load_script_spec
from agentkernel.helpers import default_helper_table
from agentkernel.scripting.host import ScriptHost
from agentkernel.types import JSONObject
from tests.conftest import REPO

pytestmark = pytest.mark.across_deployments  # S27.3: on the project's files and on PostgreSQL

MSG: JSONObject = {"role": "user", "content": "привет"}


@pytest.fixture
def hooks_dir(project: Path) -> Path:
    return project / "config" / "scripts" / "hooks"


@pytest.fixture
def pipeline(kernel: Kernel) -> HookPipeline:
    """The pipeline under test, on a script host of its own; `kernel` gives the callers."""
    return HookPipeline(ScriptHost(default_helper_table()), kernel.config.limits)


def make_hook(folder: Path, name: str, source: str, *, ext: str = ".js", extra: str = "") -> HookSpec:
    (folder / f"{name}{ext}").write_text(textwrap.dedent(source), encoding="utf-8")
    yaml_path = folder / f"{name}.yaml"
    yaml_path.write_text(f"kind: script_hook\nname: {name}\nscript: {name}{ext}\n{extra}", encoding="utf-8")
    spec = load_script_spec(yaml_path)
    assert isinstance(spec, HookSpec)
    return spec


def test_s7_4_ctx_carries_identity_and_raw_config(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    spec = make_hook(
        hooks_dir,
        "ctxdump",
        "function before_user_message(ctx, msg) { return {notice: JSON.stringify(ctx)}; }",
        extra="flavour: mint\n",
    )
    caller = kernel.caller(user_id="u1", session_id="s1", template="hello-agent", agent="helper")
    outcome = pipeline.before_user_message([spec], caller, MSG)
    ctx = json.loads(outcome.notices[0])
    assert ctx["pid"] == caller.pid and ctx["agent"] == "helper" and ctx["template"] == "hello-agent"
    assert (ctx["session_id"], ctx["user_id"]) == ("s1", "u1")
    assert ctx["config"]["flavour"] == "mint" and ctx["config"]["name"] == "ctxdump"
    assert ctx["earlier"] is False  # the message being answered; a client's earlier one is vetted with true
    vetted = pipeline.before_user_message([spec], caller, MSG, earlier=True)
    assert json.loads(vetted.notices[0])["earlier"] is True


def test_s7_6_order_replace_and_notices(kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path) -> None:
    first = make_hook(
        hooks_dir,
        "b_first",
        """
        function before_user_message(ctx, msg) {
          return {notice: 'first saw ' + msg.content,
                  replace_message: {role: 'user', content: msg.content + '!'},
                  inject: [{role: 'system', content: 'be brief'}]};
        }
        """,
        extra="priority: -5\n",
    )
    second = make_hook(
        hooks_dir,
        "a_second",
        "fn before_user_message(ctx, msg) { #{ notice: `second saw ${msg.content}` } }",
        ext=".rhai",
    )
    third = make_hook(
        hooks_dir, "c_third", "function before_user_message(ctx, msg) { return 'x'.length ? undefined : 1; }"
    )
    outcome = pipeline.before_user_message([third, second, first], kernel.caller(), MSG)
    assert outcome.notices == ["first saw привет", "second saw привет!"]
    assert outcome.message == {"role": "user", "content": "привет!"}
    assert outcome.inject == [{"role": "system", "content": "be brief"}]
    assert not outcome.stops_turn
    assert [r.hook for r in outcome.records] == ["b_first", "a_second", "c_third"]


@pytest.mark.parametrize(
    ("verdict", "reply", "suppressed"),
    [("{reply: 'готово'}", "готово", False), ("{suppress: true}", None, True)],
)
def test_s7_6_reply_or_suppress_ends_the_chain(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path, verdict: str, reply: str | None, suppressed: bool
) -> None:
    stopper = make_hook(
        hooks_dir,
        "stopper",
        f"function before_user_message(c, m) {{ return Object.assign({{notice: 'n1'}}, {verdict}); }}",
    )
    later = make_hook(
        hooks_dir,
        "later",
        "function before_user_message(c, m) { return {notice: 'never'}; }",
        extra="priority: 9\n",
    )
    outcome = pipeline.before_user_message([later, stopper], kernel.caller(), MSG)
    assert (outcome.reply, outcome.suppressed, outcome.stops_turn) == (reply, suppressed, True)
    assert outcome.notices == ["n1"]
    assert [r.hook for r in outcome.records] == ["stopper"]


@pytest.mark.parametrize(
    ("source", "extra", "error"),
    [
        ("function before_user_message() { throw new Error('boom'); }", "", "Error: boom"),
        ("function before_user_message() { while (true) {} }", "max_operations: 100000\n", "max_operations"),
        ("function before_user_message() { while (true) {} }",
         "timeout_secs: 0.1\nmax_operations: 1000000000000\n", "timeout_secs"),
        ("function before_user_message() { return run(); }", "", "not defined"),
    ],
)  # fmt: skip
def test_s7_5_a_failing_hook_never_breaks_the_turn(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path, source: str, extra: str, error: str
) -> None:
    bad = make_hook(hooks_dir, "bad", source, extra=extra)
    good = make_hook(hooks_dir, "good", "function before_user_message() { return {notice: 'fine'}; }")
    outcome = pipeline.before_user_message([bad, good], kernel.caller(), MSG)
    assert outcome.notices == ["fine"] and not outcome.stops_turn
    (failure,) = [r for r in outcome.records if r.failed]
    assert failure.hook == "bad" and error in str(failure.error)


def test_garbage_fields_are_ignored_and_recorded(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    spec = make_hook(
        hooks_dir,
        "garbage",
        """function before_user_message() {
             return {notice: 42, reply: 'ok', suppress: 'yes',
                     inject: [{role: 'robot', content: 1}], extra: 1};
           }""",
    )
    outcome = pipeline.before_user_message([spec], kernel.caller(), MSG)
    assert outcome.reply == "ok" and outcome.notices == [] and outcome.inject == []
    problems = [r.error for r in outcome.records if r.failed]
    assert len(problems) == 4
    assert any("notice: expected a string, got 42" in str(p) for p in problems)
    assert any("unknown field 'extra'" in str(p) for p in problems)


def test_non_object_verdict_is_recorded(kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path) -> None:
    spec = make_hook(hooks_dir, "numeric", "function before_user_message() { return 5; }")
    outcome = pipeline.before_user_message([spec], kernel.caller(), MSG)
    assert not outcome.stops_turn
    assert [r.error for r in outcome.records if r.failed] == [
        "ignored part of the verdict: expected an object or nothing, got 5"
    ]


def test_events_filter_and_defined_functions(kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path) -> None:
    source = """
        function before_user_message() { return {notice: 'before'}; }
        function after_turn(ctx, q, a) { return 'after ' + q.content + ' -> ' + a.content; }
        function after_loop(ctx, reason) { throw new Error('loop ' + reason); }
    """
    only_before = make_hook(hooks_dir, "only_before", source, extra="events: [before_user_message]\n")
    everything = make_hook(hooks_dir, "everything", source)
    caller = kernel.caller()
    notices, records = pipeline.after_turn(
        [only_before, everything], caller, MSG, {"role": "assistant", "content": "ответ"}
    )
    assert notices == ["after привет -> ответ"] and [r.hook for r in records] == ["everything"]
    loop_records = pipeline.after_loop([only_before, everything], caller, "job_done")
    assert [(r.hook, r.failed) for r in loop_records] == [("everything", True)]
    assert "loop job_done" in str(loop_records[0].error)


def test_s7_2_after_turn_object_string_or_garbage(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    obj = make_hook(hooks_dir, "obj", "fn after_turn(c, q, a) { #{ notice: `a=${a}` } }", ext=".rhai")
    text = make_hook(hooks_dir, "text", "function after_turn(c, q, a) { return 'plain'; }")
    junk = make_hook(hooks_dir, "junk", "function after_turn(c, q, a) { return [1]; }")
    notices, records = pipeline.after_turn([obj, text, junk], kernel.caller(), None, None)
    assert notices == ["a=", "plain"]
    assert [r.error for r in records if r.failed] == [
        "ignored part of the verdict: expected a string or {notice}, got [1]"
    ]


def test_shipped_hooks() -> None:
    with Kernel(load_kernel_config(REPO / "config" / "kernel.yaml"), live=False) as shipped:
        every = shipped.list_hooks()
        assert [h.name for h in every] == ["guard", "moderation", "audit", "memory", "faq_cache"]  # priority
        hooks = [h for h in every if h.origin == "project"]  # built-ins run only where a template names them
        calm = shipped.run_hooks(hooks, {"role": "user", "content": "Привет, мир"})
        banned = shipped.run_hooks(hooks, {"role": "user", "content": "Где КАЗИНО?"})
    assert calm.before.notices == ["🔍 audit: 11 символов"] and not calm.before.stops_turn
    assert calm.after_notices == ["✅ audit: 11 → 0 символов"]  # no LLM: the answer is ""
    assert banned.before.reply == "Извините, эту тему я не обсуждаю."
    assert banned.before.notices == ["🚫 moderation: «казино»"]  # moderation runs first, ends the chain
    assert banned.after_notices == ["✅ audit: 11 → 33 символов"]  # the reply is the answer


def test_a_hook_that_stops_compiling_is_recorded(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    spec = make_hook(hooks_dir, "fragile", "function before_user_message() { return {notice: 'ok'}; }")
    assert pipeline.before_user_message([spec], kernel.caller(), MSG).notices == ["ok"]
    (hooks_dir / "fragile.js").write_text("function before_user_message( {", encoding="utf-8")
    stamp = (hooks_dir / "fragile.js").stat().st_mtime_ns + 10_000_000
    os.utime(hooks_dir / "fragile.js", ns=(stamp, stamp))
    outcome = pipeline.before_user_message([spec], kernel.caller(), MSG)
    (record,) = outcome.records
    assert record.failed and "cannot run" in str(record.error) and "SyntaxError" in str(record.error)
