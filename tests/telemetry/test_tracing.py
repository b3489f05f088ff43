"""Tracing on or off for a process (telemetry/tracing.py, S26.1): what turns it on, what off costs.

Off — no `telemetry:` and no OTEL_* endpoint — a kernel running a tool
imports no OpenTelemetry SDK or exporter at all. On from the standard
OTEL_EXPORTER_OTLP_ENDPOINT alone, spans reach a real OTLP receiver; a
written `enabled: false` keeps the variable off. Spans made on a pool's
worker are children of the span that submitted the call.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel.config.telemetry import TelemetrySettings, telemetry_settings
from agentkernel.telemetry import genai, tracing
from agentkernel.telemetry.context import current_traceparent, remote
from agentkernel.telemetry.spans import OFF, span
from agentkernel.util.fair_pool import FairPool
from tests.conftest import write_kernel_yaml
from tests.fakes.otlp import Received, http_receiver
from tests.server.conftest import script_tool

ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
OFF_CHECK = """
import sys
from agentkernel.kernel import Kernel
with Kernel.from_config_file() as kernel:
    assert kernel.run_tool("upper", {"text": "hi"}).content == "HI"
print(sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))))
"""


def test_without_telemetry_a_kernel_imports_no_sdk_nor_exporter(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path)
    script_tool(
        tmp_path / "config" / "scripts" / "tools", "upper", "function run(a) { return a.text.toUpperCase(); }"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTKERNEL_CONFIG"))}
    done = subprocess.run(
        [sys.executable, "-c", OFF_CHECK], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_off_a_span_is_nothing() -> None:
    assert tracing.active() is None
    with (
        span("anything", {"a": 1}) as traced,
        genai.invoke_agent("t", session_id="s", user_id="u", run_id="r"),
    ):
        assert traced is OFF and not traced.recording
        traced.set({"b": 2})
        traced.event("e")
        assert current_traceparent() is None
        assert remote("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01") is None
    assert genai.user_attributes("alice") == {} and genai.content("x") is None


@pytest.mark.parametrize(
    ("section", "environ", "on"),
    [
        (None, {}, False),
        (None, {ENDPOINT: "http://127.0.0.1:4318"}, True),
        (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({}, {}, True),
        ({"enabled": False}, {ENDPOINT: "http://127.0.0.1:4318"}, False),
    ],
)
def test_what_turns_traces_on(section: dict[str, object] | None, environ: dict[str, str], on: bool) -> None:
    assert tracing.wanted(telemetry_settings(section, None), environ) is on  # type: ignore[arg-type]


def test_the_protocol_is_the_section_s_else_the_variable_s_else_http() -> None:
    assert tracing.protocol(TelemetrySettings(), {}) == "http/protobuf"
    assert tracing.protocol(TelemetrySettings(), {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == "grpc"
    assert tracing.protocol(
        TelemetrySettings(protocol="http/protobuf"), {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    ) == ("http/protobuf")
    assert tracing.http_traces_url("http://c:4318/") == "http://c:4318/v1/traces"
    assert tracing.http_traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"


def inner() -> None:
    with span("inner") as traced:
        traced.event("ran")


@pytest.fixture
def traced_by_variable(monkeypatch: pytest.MonkeyPatch) -> Iterator[Received]:
    """Tracing on in this process from OTEL_EXPORTER_OTLP_ENDPOINT alone; off again at the end."""
    with http_receiver() as (endpoint, received):
        monkeypatch.setenv(ENDPOINT, endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "from-the-variable")
        assert tracing.start(TelemetrySettings())
        try:
            yield received
        finally:
            tracing.close()
    assert tracing.active() is None


def test_the_otel_variable_alone_exports_and_a_pool_s_worker_span_is_a_child(
    traced_by_variable: Received,
) -> None:
    pool = FairPool(2)
    try:
        with span("outer") as outer:
            assert outer.recording
            pool.submit("alice", inner).result(30)
    finally:
        pool.shutdown()
    assert tracing.flush()
    spans = traced_by_variable.wait_for(lambda s: {"outer", "inner"} <= {x.name for x in s}, "both spans")
    outer_span = next(s for s in spans if s.name == "outer")
    inner_span = next(s for s in spans if s.name == "inner")
    assert inner_span.parent_id == outer_span.span_id
    assert outer_span.resource["service.name"] == "from-the-variable"
