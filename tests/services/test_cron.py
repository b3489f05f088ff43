"""Cron (S10) in one process: the helpers from JS and Rhai, the store's claims, the scheduler firing jobs.

The scheduler runs on an event loop of its own thread, as in `agentkernel
serve`; its jobs' agents talk to the scripted LLM server and deliver to a
webhook receiver on 127.0.0.1. Tests wait on the receiver (a condition),
never on time. The servers-as-processes tests (kill -9, two servers on one
store) are in tests/server/test_cron_serving.py.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.identity import Caller
from agentkernel.services.cron import job_session
from agentkernel.services.cron_jobs import parse_job
from agentkernel.services.cron_store_pg import PostgresCronStore
from agentkernel.services.memory import KIND_AGENT, KIND_USER
from agentkernel.telemetry import metrics
from agentkernel.testing.parts import kernel_parts
from tests.conftest import ToolFactory, write_kernel_yaml
from tests.fakes import FakeLLMServer, HttpError, Reply
from tests.fakes.openai_server import Exchange
from tests.fakes.webhook import WebhookReceiver
from tests.helpers.probes import probe_source


def make_kernel(project: Path, llm: FakeLLMServer, extra: str = "") -> Kernel:
    """A kernel with the scripted LLM, loopback reachable (the receiver), and a `watcher` template."""
    templates = project / "config" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "watcher.yaml").write_text(
        "name: watcher\ninstructions: Следи за ценой.\n", encoding="utf-8"
    )
    yaml_text = (
        f"llm:\n  base_url: {llm.base_url}\n  model: m\n  max_retries: 0\n"
        "http:\n  allow_private: true\n" + extra
    )
    return Kernel(load_kernel_config(write_kernel_yaml(project, yaml_text)))


@pytest.fixture
def llm(llm_server: FakeLLMServer) -> FakeLLMServer:
    llm_server.respond_with(lambda request: Reply(text="цена 100"))
    return llm_server


@pytest.fixture
def kernel(project: Path, llm: FakeLLMServer) -> Iterator[Kernel]:
    with make_kernel(project, llm, "cron:\n  min_interval_secs: 0.05\n") as made:
        yield made


@pytest.fixture
def hook() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as receiver:
        yield receiver


class Scheduling:
    """`kernel.cron_scheduler()` running on its own thread's event loop until the block ends."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._started = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self.failure: BaseException | None = None

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        self._started.set()
        try:
            await self.kernel.cron_scheduler().run(self.stop, grace=30)
        except BaseException as exc:
            self.failure = exc

    def __enter__(self) -> Scheduling:
        self._thread.start()
        assert self._started.wait(30)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.stop.set)
        self._thread.join(60)
        assert not self._thread.is_alive(), "the scheduler did not stop"


def js(options: dict[str, Any]) -> str:
    return f"schedule_cron({json.dumps(options, ensure_ascii=False)})"


def run(kernel: Kernel, make_tool: ToolFactory, expr: str, caller: Caller, engine: str = ".js") -> Any:
    make_tool("probe", probe_source(engine, expr), ext=engine)
    result = kernel.run_tool("probe", {}, caller)
    assert result.success, result.content
    assert isinstance(result.data, dict)
    return result.data.get("value", result.data)


def statuses(kernel: Kernel, user: str | None = None) -> list[Any]:
    """`kernel.cron_jobs(user)`, loosely typed for the assertions."""
    found: list[Any] = json.loads(json.dumps(kernel.cron_jobs(user)))
    return found


def job(**fields: Any) -> dict[str, Any]:
    return {"name": "watch", "template": "watcher", "prompt": "Проверь цену", **fields}


# -- the helpers (S10.1-S10.3) ------------------------------------------------------------------------


@pytest.mark.parametrize("engine", [".js", ".rhai"])
def test_s10_schedule_list_cancel_from_js_and_rhai(
    kernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    anna = kernel.caller(user_id="anna")
    if engine == ".js":
        made = run(kernel, make_tool, js(job(interval_secs=3600)), anna)
    else:
        fields = 'name: "watch", template: "watcher", prompt: "Проверь цену", interval_secs: 3600'
        expr = f"schedule_cron(#{{{fields}}})"
        made = run(kernel, make_tool, expr, anna, engine)
    assert made == {"name": "watch", "ok": True}
    (listed,) = run(kernel, make_tool, "list_cron()", anna, engine)
    assert listed["timing"] == {"interval_secs": 3600} and listed["runs"] == 0 and listed["last_run"] is None
    assert listed["notify"] == [{"type": "log"}] and not listed["done"] and listed["next_run"].endswith("Z")
    assert run(kernel, make_tool, 'cancel_cron("watch")', anna, engine) is True
    assert run(kernel, make_tool, 'cancel_cron("watch")', anna, engine) is False
    assert run(kernel, make_tool, "list_cron()", anna, engine) == []


def test_s10_the_same_name_replaces_the_users_job(kernel: Kernel, make_tool: ToolFactory) -> None:
    anna = kernel.caller(user_id="anna")
    run(kernel, make_tool, js(job(interval_secs=3600)), anna)
    run(kernel, make_tool, js(job(schedule="0 0 9 * * *", timezone="Europe/Moscow")), anna)
    (listed,) = statuses(kernel, "anna")
    assert listed["timing"] == {"schedule": "0 0 9 * * *", "timezone": "Europe/Moscow"}
    assert listed["next_run"].endswith("T06:00:00.000Z")  # nine in Moscow


def test_s10_jobs_are_their_users(kernel: Kernel, make_tool: ToolFactory) -> None:
    anna, bob = kernel.caller(user_id="anna"), kernel.caller(user_id="bob")
    run(kernel, make_tool, js(job(interval_secs=3600)), anna)
    assert run(kernel, make_tool, "list_cron()", bob) == []
    assert run(kernel, make_tool, 'cancel_cron("watch")', bob) is False
    run(kernel, make_tool, js(job(interval_secs=60)), bob)  # bob's own job of that name
    assert [(j["owner"], j["timing"]) for j in statuses(kernel)] == [
        ("anna", {"interval_secs": 3600}),
        ("bob", {"interval_secs": 60}),
    ]


NOW_PLUS = "2999-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (
            "every hour",
            "expected an object {name, template, interval_secs | schedule | oneshot_at, prompt, "
            "notify?}, got 'every hour'",
        ),
        (
            job(interval_secs=1, cron="x"),
            "cron: unknown field (expected: name, template, interval_secs, "
            "schedule, oneshot_at, timezone, prompt, notify, misfire)",
        ),
        (job(), "give exactly one of interval_secs, schedule, oneshot_at (got none)"),
        (
            job(interval_secs=5, schedule="0 0 9 * * *"),
            "give exactly one of interval_secs, schedule, oneshot_at (got interval_secs, schedule)",
        ),
        (job(interval_secs=0.01), "interval_secs: must be at least 0.05 (cron.min_interval_secs), got 0.01"),
        (job(interval_secs="hourly"), "interval_secs: must be a number of seconds, got 'hourly'"),
        (job(schedule="0 9 * * *"), "schedule: must be a cron expression of six fields, seconds first"),
        (job(schedule="61 0 9 * * *"), "schedule: is not a valid cron expression"),
        (job(schedule="0 0 9 * * *", timezone="Mars/Olympus"), "timezone: is not an IANA time zone name"),
        (job(interval_secs=5, timezone="UTC"), "timezone: applies to schedule only"),
        (job(oneshot_at="2020-01-01T00:00:00Z"), "oneshot_at: is in the past (2020-01-01T00:00:00Z"),
        (job(oneshot_at="tomorrow"), "oneshot_at: must be an RFC 3339 date and time"),
        (job(oneshot_at="2999-01-01T00:00:00"), "oneshot_at: needs a time zone offset (Z or +03:00)"),
        ({**job(interval_secs=5), "name": "x" * 201}, "name: is 201 characters long, over the limit of 200"),
        ({**job(interval_secs=5), "name": ""}, "name: must be a non-empty string, got ''"),
        ({**job(interval_secs=5), "template": "nope"}, "template: unknown template 'nope' (loaded: watcher)"),
        ({**job(interval_secs=5), "prompt": 5}, "prompt: must be a non-empty string, got 5"),
        (
            job(interval_secs=5, notify=[{"type": "sms"}]),
            "notify[0].type: must be one of log, webhook, session",
        ),
        (job(interval_secs=5, notify=[]), "notify: must be a non-empty list of sinks"),
        (
            job(interval_secs=5, notify=[{"type": "webhook"}]),
            "notify[0].url: must be an http:// or https:// URL",
        ),
        (
            job(interval_secs=5, notify=[{"type": "webhook", "url": "ftp://x/"}]),
            "notify[0].url: only http and https URLs are allowed, got scheme 'ftp'",
        ),
        (
            job(interval_secs=5, notify=[{"type": "webhook", "url": "http://evil.example/", "x": 1}]),
            "notify[0].x: is not a field of a webhook sink",
        ),
        (
            job(interval_secs=5, notify=[{"type": "session"}]),
            "notify[0].session_id: this call runs outside any session; name the chat",
        ),
        (
            job(interval_secs=5, notify=[{"type": "session", "session_id": "someone-elses"}]),
            "notify[0].session_id: 'someone-elses' is not a session of 'anna' (it holds none of their",
        ),
        (job(interval_secs=5, misfire="later"), "misfire: must be 'run_once' or 'skip', got 'later'"),
    ],
)
def test_bad_jobs_name_the_field(kernel: Kernel, make_tool: ToolFactory, options: Any, error: str) -> None:
    got = run(kernel, make_tool, f"schedule_cron({json.dumps(options)})", kernel.caller(user_id="anna"))
    assert got["error"].startswith(f"schedule_cron: {error}"), got
    assert statuses(kernel) == []  # nothing half-written


@pytest.mark.parametrize("sink", [{"type": "session"}, {"type": "session", "session_id": "fresh-chat"}])
def test_the_callers_own_session_qualifies_before_it_holds_a_message(
    kernel: Kernel, make_tool: ToolFactory, sink: dict[str, str]
) -> None:
    """scripts.md 8.14: the calling script's own chat, left out or named, even new; another's is refused."""
    anna = kernel.caller(user_id="anna", session_id="fresh-chat")
    assert run(kernel, make_tool, js(job(interval_secs=60, notify=[sink])), anna) == {
        "name": "watch",
        "ok": True,
    }
    (listed,) = statuses(kernel, "anna")
    assert listed["notify"] == [{"type": "session", "session_id": "fresh-chat"}]
    bob = kernel.caller(user_id="bob", session_id="bobs-chat")
    named = job(interval_secs=60, notify=[{"type": "session", "session_id": "fresh-chat"}])
    assert run(kernel, make_tool, js(named), bob)["error"].startswith(
        "schedule_cron: notify[0].session_id: 'fresh-chat' is not a session of 'bob'"
    )


def test_a_webhook_the_http_rules_deny_is_refused(
    project: Path, llm: FakeLLMServer, make_tool: ToolFactory
) -> None:
    with make_kernel(project, llm, "  deny_hosts: [evil.example]\n") as kernel:
        options = job(interval_secs=5, notify=[{"type": "webhook", "url": "https://evil.example/hook"}])
        got = run(kernel, make_tool, js(options), kernel.caller(user_id="anna"))
    assert got == {"error": "schedule_cron: notify[0].url: host 'evil.example' is denied by http.deny_hosts"}
    metadata = job(interval_secs=5, notify=[{"type": "webhook", "url": "http://169.254.169.254/latest"}])
    with make_kernel(project, llm) as kernel:
        got = run(kernel, make_tool, js(metadata), kernel.caller(user_id="anna"))
    assert got["error"].startswith("schedule_cron: notify[0].url: address 169.254.169.254 is"), got


def test_more_than_max_jobs_per_user_is_refused(
    project: Path, llm: FakeLLMServer, make_tool: ToolFactory
) -> None:
    with make_kernel(project, llm, "cron:\n  max_jobs_per_user: 2\n") as kernel:
        anna = kernel.caller(user_id="anna")
        for name in ("a", "b"):
            run(kernel, make_tool, js({**job(interval_secs=60), "name": name}), anna)
        third = run(kernel, make_tool, js({**job(interval_secs=60), "name": "c"}), anna)
        assert third == {
            "error": "schedule_cron: 'anna' already has 2 jobs, the most cron.max_jobs_per_user allows"
        }
        assert run(kernel, make_tool, js({**job(interval_secs=30), "name": "a"}), anna)[
            "ok"
        ]  # replacing is fine
        assert run(kernel, make_tool, js(job(interval_secs=60)), kernel.caller(user_id="bob"))["ok"]


def test_s10_3_without_the_service_each_helper_throws(
    project: Path, llm: FakeLLMServer, make_tool: ToolFactory
) -> None:
    with make_kernel(project, llm) as live:
        config = live.config
    with Kernel(config, live=False) as kernel:
        for expr, helper in (
            (js(job(interval_secs=5)), "schedule_cron"),
            ("list_cron()", "list_cron"),
            ('cancel_cron("x")', "cancel_cron"),
        ):
            got = run(kernel, make_tool, expr, kernel.caller())
            assert got == {
                "error": f"{helper}: no cron service attached to this kernel (hook_tool attaches it "
                "with --live)"
            }


# -- firing -------------------------------------------------------------------------------------------


def test_a_job_fires_into_every_sink_as_its_user(
    kernel: Kernel, make_tool: ToolFactory, hook: WebhookReceiver, llm: FakeLLMServer
) -> None:
    kernel_parts(kernel).store.append("chat-1", "user", KIND_USER, "следи за ценой", user_id="anna")
    anna = kernel.caller(user_id="anna", session_id="chat-1")
    sinks = [{"type": "log"}, {"type": "webhook", "url": hook.url}, {"type": "session"}]
    assert run(kernel, make_tool, js(job(interval_secs=0.2, notify=sinks)), anna)["ok"]
    with Scheduling(kernel):
        first, second = hook.wait_for(2)
    assert set(first) == {"job", "scheduled_at", "fired_at", "ok", "answer", "error"}
    assert (first["job"], first["ok"], first["answer"], first["error"]) == ("watch", True, "цена 100", None)
    assert first["scheduled_at"] < second["scheduled_at"] and first["fired_at"] >= first["scheduled_at"]
    assert hook.headers[0]["Idempotency-Key"] == f"anna/watch@{first['scheduled_at']}"
    posted = [r for r in kernel.transcript("chat-1", 50) if r.kind == KIND_AGENT]
    assert posted[0].content == "цена 100" and posted[0].meta["cron"] == "watch"
    asked = llm.bodies[0]["messages"]
    assert asked[0]["content"] == "Следи за ценой." and asked[-1] == {
        "role": "user",
        "content": "Проверь цену",
    }
    runs = kernel.transcript(job_session("anna", "watch"), 50, user_id="anna")
    assert runs[0].kind == KIND_USER and runs[0].content == "Проверь цену"
    (status,) = statuses(kernel, "anna")
    assert status["runs"] >= 2 and status["last_ok"] is True and status["last_error"] is None


def test_a_failing_run_is_recorded_and_the_schedule_goes_on(
    kernel: Kernel, make_tool: ToolFactory, hook: WebhookReceiver, llm: FakeLLMServer
) -> None:
    answers = iter([HttpError(400, "bad request")])
    llm.respond_with(lambda request: next(answers, Reply(text="снова работает")))
    anna = kernel.caller(user_id="anna")
    run(kernel, make_tool, js(job(interval_secs=0.2, notify=[{"type": "webhook", "url": hook.url}])), anna)
    with Scheduling(kernel):
        failed, recovered = hook.wait_for(2)
    assert failed["ok"] is False and "bad request" in failed["error"]
    assert recovered["ok"] is True and recovered["answer"] == "снова работает"


def test_a_webhook_that_fails_is_retried(
    kernel: Kernel, make_tool: ToolFactory, hook: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentkernel.agent import cron_runs

    monkeypatch.setattr(cron_runs, "FIRST_PAUSE_SECS", 0.01)
    hook.status = 503
    anna = kernel.caller(user_id="anna")
    run(kernel, make_tool, js(job(interval_secs=3600, notify=[{"type": "webhook", "url": hook.url}])), anna)
    kernel_parts(kernel).cron.store.put(
        "anna",
        parse_job(job(interval_secs=3600, notify=[{"type": "webhook", "url": hook.url}]), 0, 0),
        time.time() - 1,
        by="",
        now=time.time(),
        most=100,
    )
    with Scheduling(kernel):
        tries = hook.wait_for(3, attempts=True)
        hook.status = 200
        (delivered,) = hook.wait_for(1)
    assert len({t["scheduled_at"] for t in tries}) == 1 and delivered == tries[0]


def test_a_oneshot_fires_once_and_is_done(
    kernel: Kernel, make_tool: ToolFactory, hook: WebhookReceiver
) -> None:
    soon = time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3)
    )  # whole seconds: a slow call must not see it past
    anna = kernel.caller(user_id="anna")
    run(kernel, make_tool, js(job(oneshot_at=soon, notify=[{"type": "webhook", "url": hook.url}])), anna)
    run(
        kernel,
        make_tool,
        js({**job(interval_secs=0.3, notify=[{"type": "webhook", "url": hook.url}]), "name": "ticker"}),
        anna,
    )
    with Scheduling(kernel):
        hook.wait_for(12)  # the ticker's, with the oneshot's among them
    fired = [b for b in hook.bodies if b["job"] == "watch"]
    assert len(fired) == 1 and fired[0]["scheduled_at"].startswith(soon[:-1])
    status = {j["name"]: j for j in statuses(kernel, "anna")}["watch"]
    assert status["done"] is True and status["next_run"] is None and status["runs"] == 1


def cron_figures() -> tuple[float, float]:
    """(runs counted `ok`, lateness observations) on the metrics page of this process now."""
    samples = [s for f in text_string_to_metric_families(metrics.page(0)[0].decode()) for s in f.samples]
    ok = sum(
        s.value for s in samples if s.name == "agentkernel_cron_runs_total" and s.labels == {"outcome": "ok"}
    )
    late = sum(s.value for s in samples if s.name == "agentkernel_cron_lateness_seconds_count")
    return ok, late


def test_each_firing_is_counted_in_the_metrics_with_its_lateness(
    kernel: Kernel, make_tool: ToolFactory, hook: WebhookReceiver
) -> None:
    metrics.start()  # as the server does (S26.2)
    ok, late = cron_figures()
    anna = kernel.caller(user_id="anna")
    run(kernel, make_tool, js(job(interval_secs=0.2, notify=[{"type": "webhook", "url": hook.url}])), anna)
    with Scheduling(kernel):
        hook.wait_for(2)  # each counted before its delivery
    now_ok, now_late = cron_figures()
    assert now_ok >= ok + 2 and now_late - late == now_ok - ok


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    opened = threading.Event()
    try:
        yield opened
    finally:
        opened.set()  # a held LLM answer never outlives its test


@dataclass(frozen=True)
class Held:
    """An LLM answer that waits until the test opens `gate`: a run kept going, on purpose."""

    gate: threading.Event

    def answer(self, exchange: Exchange) -> None:
        self.gate.wait()
        Reply(text="наконец").answer(exchange)


def asked(llm: FakeLLMServer, text: str) -> int:
    return sum(text in json.dumps(r.body["messages"], ensure_ascii=False) for r in llm.requests)


def test_a_users_runs_past_the_cap_wait_while_another_users_jobs_go_on_firing(
    project: Path,
    llm_server: FakeLLMServer,
    make_tool: ToolFactory,
    hook: WebhookReceiver,
    gate: threading.Event,
) -> None:
    """Issue 24, item 5: a tool scheduled 100 jobs every second and kept 16 LLM calls in flight. Here anna's
    three jobs find the LLM holding their answers: with cron.max_running_per_user 1 one of them runs, the
    others wait, while boris's job fires again and again (the scheduler looked at them many times)."""
    llm_server.respond_with(
        lambda request: Held(gate) if "anna floods" in json.dumps(request.body) else Reply(text="тик")
    )
    extra = "cron:\n  min_interval_secs: 0.05\n  max_running_per_user: 1\n"
    with make_kernel(project, llm_server, extra) as kernel:
        anna, boris = kernel.caller(user_id="anna"), kernel.caller(user_id="boris")
        for name in ("f1", "f2", "f3"):
            run(kernel, make_tool, js(job(name=name, interval_secs=0.05, prompt="anna floods")), anna)
        ticks = [{"type": "webhook", "url": hook.url}]
        run(
            kernel,
            make_tool,
            js(job(name="tick", interval_secs=0.05, prompt="boris ticks", notify=ticks)),
            boris,
        )
        with Scheduling(kernel):
            hook.wait_for(5)
            assert asked(llm_server, "anna floods") == 1
            waiting = [status["waiting"] for status in statuses(kernel, "anna") if status["waiting"]]
            assert len(waiting) == 2 and "cron.max_running_per_user (1)" in waiting[0]
            gate.set()  # the held run ends; the others run in turn
            hook.wait_until(
                lambda _: all(s["runs"] >= 1 for s in statuses(kernel, "anna")), "anna's jobs", 60
            )


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_two_schedulers_on_one_store_run_each_due_time_once(
    where: str,
    request: pytest.FixtureRequest,
    project: Path,
    llm: FakeLLMServer,
    make_tool: ToolFactory,
    hook: WebhookReceiver,
) -> None:
    """Two kernels' schedulers on one cron store: the SQLite file, or with `store.url` the PostgreSQL
    database (S27.2), where the job is and the file is not."""
    extra = "cron:\n  min_interval_secs: 0.05\n"
    if where == "postgres":
        extra += f"store:\n  url: {request.getfixturevalue('pg_url')}\n"
    with make_kernel(project, llm, extra) as one, make_kernel(project, llm, extra) as two:
        anna = one.caller(user_id="anna")
        run(one, make_tool, js(job(interval_secs=0.1, notify=[{"type": "webhook", "url": hook.url}])), anna)
        with Scheduling(one), Scheduling(two):
            hook.wait_for(20)
    times = [b["scheduled_at"] for b in hook.bodies]
    assert len(times) == len(set(times)), "a due time ran twice"
    assert (project / "logs" / "cron.db").exists() == (where == "sqlite")
    if where == "postgres":
        with PostgresCronStore(request.getfixturevalue("pg_url")) as store:
            assert [(s.owner, s.spec.name) for s in store.statuses()] == [("anna", "watch")]


# -- static jobs (kernel.yaml) -----------------------------------------------------------------------


def test_static_jobs_are_written_replaced_and_removed(
    project: Path, llm: FakeLLMServer, hook: WebhookReceiver
) -> None:
    static = (
        "cron:\n  min_interval_secs: 0.05\n  user: ops\n  jobs:\n"
        "    - name: nightly\n      template: watcher\n"
        "      interval_secs: 0.2\n      prompt: Отчёт\n"
        f"      notify: [{{type: webhook, url: '{hook.url}'}}]\n"
    )
    with make_kernel(project, llm, static) as kernel, Scheduling(kernel):
        (fired,) = hook.wait_for(1)
    assert fired["job"] == "nightly"
    with make_kernel(project, llm) as kernel:
        (listed,) = statuses(kernel, "ops")
        assert listed["static"] is True and listed["runs"] >= 1
        with Scheduling(kernel):
            pass
        assert statuses(kernel, "ops") == []  # gone from kernel.yaml, gone from the store


def test_a_static_job_with_a_mistake_stops_the_scheduler(project: Path, llm: FakeLLMServer) -> None:
    bad = "cron:\n  jobs:\n    - {name: n, template: nope, interval_secs: 5, prompt: p}\n"
    with make_kernel(project, llm, bad) as kernel:
        scheduling = Scheduling(kernel)
        with scheduling:
            scheduling._thread.join(30)
    assert str(scheduling.failure).startswith("cron.jobs[0].template: unknown template 'nope'")


def test_an_agents_script_cannot_schedule_a_stronger_agent(
    kernel: Kernel, project: Path, make_tool: ToolFactory
) -> None:
    """A hostile tool must not plant a standing job that can do more than the agent it runs in."""
    make_tool("wipe", "function run() { return 'wiped'; }")
    templates = project / "config" / "templates"
    (templates / "admin.yaml").write_text("name: admin\ninstructions: x\ntools: [wipe]\n", encoding="utf-8")
    (templates / "helper.yaml").write_text(
        "name: helper\ninstructions: x\ntools: [probe]\n", encoding="utf-8"
    )
    make_tool("probe", probe_source(".js", js(job(interval_secs=60, template="admin"))))
    agent = kernel.spawn("helper", user_id="anna")
    result = kernel.run_tool("probe", {}, agent)
    assert result.data == {
        "error": "schedule_cron: template: 'admin' may use tools the calling agent may not (wipe); "
        "a job can do no more than the agent that schedules it"
    }
    assert statuses(kernel) == []
    at_the_terminal = kernel.run_tool("probe", {}, kernel.caller(user_id="anna"))
    assert at_the_terminal.data == {"value": {"name": "watch", "ok": True}}


def test_agentkernel_check_reports_a_static_job_with_a_mistake(project: Path, llm: FakeLLMServer) -> None:
    bad = "cron:\n  jobs:\n    - {name: n, template: watcher, schedule: '0 9 * * *', prompt: p}\n"
    with make_kernel(project, llm, bad) as kernel:
        (problem,) = kernel.problems()
    assert problem.path == project / "config" / "kernel.yaml"
    assert problem.reason.startswith("cron.jobs[0].schedule: must be a cron expression of six fields")
