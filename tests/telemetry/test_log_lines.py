"""`--log-format json` (S26): one JSON object a line; every line of a run names the run and its trace.

A unit of the formatter (a real OpenTelemetry SDK span made current, not a
global provider), the script pool carrying its submitter's context into the
worker thread, and a real `agentkernel --log-format json -v serve`
subprocess whose agent calls a tool that writes `console.log`: that line,
written on a script worker thread, names the run the server announced.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
from opentelemetry.sdk.trace import TracerProvider

from agentkernel.telemetry.log_lines import RUN_ID, JsonLines, logged_as
from agentkernel.util.fair_pool import FairPool
from tests.conftest import ctrl_c_default
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import make_project, script_tool, sse_events

BIN = Path(sys.executable).parent
WAIT_SECS = 120.0  # an upper bound for one thing to happen, never a measured time


def record(message: str, exc: bool = False) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise ValueError("broken")
        except ValueError:
            info = sys.exc_info()
    return logging.LogRecord("agentkernel.x", logging.WARNING, __file__, 1, message, None, info)


def test_a_line_names_its_run_and_the_current_span() -> None:
    tracer = TracerProvider().get_tracer("test")
    with logged_as("run-7"), tracer.start_as_current_span("work") as span:
        line = json.loads(JsonLines().format(record("hello «мир»")))
    context = span.get_span_context()
    assert line["run_id"] == "run-7" and line["message"] == "hello «мир»"
    assert line["trace_id"] == format(context.trace_id, "032x")
    assert line["span_id"] == format(context.span_id, "016x")
    assert (line["level"], line["logger"]) == ("WARNING", "agentkernel.x")


def test_a_line_outside_a_run_says_neither_and_keeps_its_traceback() -> None:
    line = json.loads(JsonLines().format(record("failed", exc=True)))
    assert "run_id" not in line and "trace_id" not in line
    assert "ValueError: broken" in line["exception"]


def test_the_script_pool_runs_a_call_in_its_submitter_s_context() -> None:
    pool = FairPool(2, name="test")
    try:
        with logged_as("run-9"):
            future = pool.submit("alice", RUN_ID.get)
        assert future.result(timeout=WAIT_SECS) == "run-9"
        assert pool.submit("alice", RUN_ID.get).result(timeout=WAIT_SECS) is None
    finally:
        pool.shutdown()


def test_a_served_run_s_lines_are_json_and_a_script_s_line_names_its_run(
    tmp_path: Path,
) -> None:
    with FakeLLMServer() as llm:
        llm.add(Reply(tool_calls=(FakeToolCall("noisy", "{}"),)), Reply(text="done"))
        make_project(tmp_path, llm)
        tools = tmp_path / "config" / "scripts" / "tools"
        script_tool(tools, "noisy", "function run(args) { console.log('from the script'); return 'ok'; }")
        template = tmp_path / "config" / "templates" / "tester.yaml"
        template.write_text(template.read_text().replace("[upper, table]", "[noisy]"))
        log = tmp_path / "serve.log"
        run_id, lines = _one_turn(tmp_path, log)
    parsed = [json.loads(line) for line in lines]  # every line is one JSON object
    said = [p for p in parsed if "from the script" in p["message"]]
    assert said and said[0]["run_id"] == run_id, parsed


def _one_turn(root: Path, log: Path) -> tuple[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
    with log.open("ab") as stderr:
        process = subprocess.Popen(
            [str(BIN / "agentkernel"), "--log-format", "json", "-v", "serve", "--port", "0"],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            preexec_fn=ctrl_c_default,
        )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[3]
        with httpx.Client(base_url=url, timeout=WAIT_SECS) as client:
            session = client.post("/v1/sessions", json={"template": "tester"}).json()["id"]
            answer = client.post(f"/v1/sessions/{session}/messages", json={"content": "go"})
        events = sse_events(answer.text, runs=True)
        run_id = next(data["id"] for kind, data in events if kind == "run")
        assert ("done", {"reason": "job_done"}) in [(k, {"reason": d.get("reason")}) for k, d in events], (
            events
        )
    finally:
        process.terminate()
        process.wait(timeout=WAIT_SECS)
    return run_id, [line for line in log.read_text().splitlines() if line.strip()]
