"""schemathesis over `/openapi.json`, through the real server on 127.0.0.1 (issue 11 sections 5, 6).

Every operation in the spec gets generated requests, both ones that fit the
schema and ones that break it, and every answer must be: never a 5xx, never
a traceback, an error body whose request id is the header's, and a status,
content type and body the spec documents (schemathesis' own checks).

Random session ids and tool names only ever meet a 404, so the session
routes also get a real session of the caller, and the tool run a real tool:
the streamed turn (SSE) runs for real against the scripted LLM, which calls
a tool whose result is a visual table, then answers.

schemathesis 4 drives hypothesis here through `APIOperation.as_strategy`
(its API for plain hypothesis tests) rather than its pytest plugin: the
server is a fixture, and the plugin's `from_fixture` does not run under
pytest 9. The examples are few and derandomized, so a run is short and
the same every time.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, BaseSchema, Case, GenerationMode
from schemathesis.checks import positive_data_acceptance
from schemathesis.core.result import Ok

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.fakes.openai_server import RecordedRequest
from tests.server.conftest import LiveServer, make_project

Operation = APIOperation[Any, Any, Any, Any]
EXAMPLES = 30  # per operation and mode: the whole spec, twice, well under a minute
# a name that fits the schema may still name no template, a block be no chart, a conversation not end
# with the user's message, two days be more than a year apart: each a 422 by design (docs/server.md, Errors)
MAY_REFUSE_WHAT_FITS = {
    "POST /v1/sessions",
    "POST /v1/charts/svg",
    "POST /v1/chat/completions",
    "GET /v1/usage",
}
EVERY_OPERATION = {
    "GET /healthz",
    "POST /v1/sessions",
    "GET /v1/sessions",
    "GET /v1/sessions/{session_id}/messages",
    "POST /v1/sessions/{session_id}/messages",
    "POST /v1/sessions/{session_id}/stop",
    "GET /v1/tools",
    "POST /v1/tools/{name}/run",
    "POST /v1/continuations",
    "GET /v1/templates",
    "POST /v1/charts/svg",
    "POST /v1/chat/completions",
    "GET /v1/models",
    "GET /v1/models/{model_id}",
    "GET /v1/files/{download_id}",
    "DELETE /v1/memory",
}


@dataclass(frozen=True)
class Api:
    schema: BaseSchema
    url: str
    session: str  # a session of the caller's, with template `tester`


def answer(request: RecordedRequest) -> Reply:
    """A user message gets a tool call with a visual table; the tool's result, a short answer."""
    if request.body["messages"][-1]["role"] == "user":
        return Reply(tool_calls=(FakeToolCall("table", '{"n": 3}'),))
    return Reply(text="three rows, see the table")


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    root: Path = tmp_path_factory.mktemp("schemathesis")
    with FakeLLMServer(max_requests=100_000) as llm:
        llm.respond_with(answer)
        # a state store, so the built-in memory hook's DELETE /v1/memory can forget for real
        config = make_project(root, llm, "scripts:\n  builtins: true\nstate:\n  db_path: data/state.db\n")
        with LiveServer(Kernel(load_kernel_config(config))) as live:
            made = httpx.post(f"{live.url}/v1/sessions", json={"template": "tester"}, timeout=60)
            assert made.status_code == 201, made.text
            schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
            yield Api(schema, live.url, made.json()["id"])


def real_model(case: Case[Any]) -> Case[Any]:
    """An OpenAI request to a template that loads, its conversation ending with the user's message."""
    body: Any = case.body
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        question: dict[str, Any] = {"role": "user", "content": "and now?"}
        case.body = {**body, "model": "tester", "messages": [*body["messages"], question]}
    return case


def cases(operation: Operation, mode: GenerationMode, api: Api) -> st.SearchStrategy[Case[Any]]:
    """Generated requests, and as many again naming the caller's real session, a real tool or model."""
    generated = operation.as_strategy(mode)
    if "{session_id}" in operation.path:
        return generated | operation.as_strategy(mode, path_parameters={"session_id": api.session})
    if "{name}" in operation.path:
        return generated | operation.as_strategy(mode, path_parameters={"name": "upper"})
    if operation.path == "/v1/chat/completions":
        return generated | generated.map(real_model)
    return generated


def check(case: Case[Any]) -> None:
    """schemathesis' checks, then ours: no traceback, and an error's request id is the header's."""
    excluded = [positive_data_acceptance] if case.operation.label in MAY_REFUSE_WHAT_FITS else []
    response = case.call_and_validate(excluded_checks=excluded, timeout=60)
    assert "Traceback" not in response.text, response.text
    if response.status_code >= 400:
        assert json.loads(response.text)["request_id"] == response.headers["x-request-id"][0]


def explore(operation: Operation, mode: GenerationMode, api: Api) -> None:
    @given(case=cases(operation, mode, api))
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    def run(case: Case[Any]) -> None:
        check(case)

    run()


def test_every_operation_answers_as_documented_and_never_500(api: Api) -> None:
    operations = []
    for result in api.schema.get_all_operations():
        assert isinstance(result, Ok), f"the spec does not load: {result}"
        operations.append(result.ok())
    assert {op.label for op in operations} >= EVERY_OPERATION  # the spec lists the API (new routes join)
    failures: list[str] = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                explore(operation, mode, api)
            except Unsatisfiable:
                # an operation without parameters or body has nothing to get wrong
                assert mode is GenerationMode.NEGATIVE, operation.label
            except Exception as exc:  # every operation is explored; all that fail are reported at once
                failures.append(f"{operation.label} ({mode.value}):\n{exc}")
    assert not failures, "\n\n".join(failures)
    # the streamed turn ran for real with the caller's session: the transcript has its turns
    records = httpx.get(f"{api.url}/v1/sessions/{api.session}/messages", timeout=60).json()
    assert {"user", "tool_call", "tool_result", "agent", "end"} <= {r["kind"] for r in records}


def test_the_coverage_phase_finds_nothing(api: Api, tmp_path: Path) -> None:
    """schemathesis' CLI, its coverage phase alone: boundary values, every wrong type, unlisted methods.

    That phase is the CLI's (not `as_strategy`'s); it found the 405 whose
    `Allow` left out methods (test_fuzz_findings.py). Every check but
    positive_data_acceptance, which the test above runs where it applies.
    """
    st = Path(sys.executable).parent / "st"
    options = ["--phases", "coverage", "--checks", "all", "--exclude-checks", "positive_data_acceptance"]
    run = subprocess.run(
        [str(st), "run", f"{api.url}/openapi.json", *options, "--seed", "1", "--no-color"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # where it keeps its own files (.schemathesis/); and no schemathesis.toml above it
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert re.search(r"(\d+) generated, \1 passed", run.stdout), run.stdout[-3000:]
