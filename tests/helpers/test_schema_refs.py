"""A schema's `$ref` to a URL is refused, never fetched (S9, S2.5, S23.7): no SSRF through JSON Schema.

jsonschema, left to itself, fetches such a reference with urllib, past the
HTTP helpers' address rules (S8). Schemas come from scripts (`llm_json`'s
`output_schema`), from tool YAML and from outside MCP servers. Each test
points the `$ref` at a real HTTP server on 127.0.0.1 that counts requests,
and checks that it counted none.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel.config import ToolSpec
from agentkernel.schemas.bounds import ValidationStopped, bounded_errors, bounded_validator
from agentkernel.schemas.refs import remote_refs
from agentkernel.types import JSONObject
from tests.conftest import ToolFactory
from tests.fakes import FakeLLMServer
from tests.helpers.test_llm import error, llm_kernel, obj, probe


class Counted:
    """An HTTP server on 127.0.0.1 that answers every GET with a schema and counts the requests."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"type": "string"}')

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/meta-data/iam.json"


@pytest.fixture
def counted() -> Iterator[Counted]:
    served = Counted()
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    yield served
    served.server.shutdown()
    served.server.server_close()


def test_llm_json_refuses_a_remote_ref_before_asking_anything(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer, counted: Counted
) -> None:
    schema = obj(
        engine, type='"object"', properties=obj(engine, a=obj(engine, **{'"$ref"': f'"{counted.url}"'}))
    )
    expr = "llm_json(" + obj(engine, user='"q"', output_schema=schema) + ")"
    with llm_kernel(project, llm_server) as kernel:
        message = error(kernel.run_tool(probe(make_tool, engine, expr), {}))
    assert message == (
        f"llm_json: output_schema cannot be used: $ref '{counted.url}' points outside the schema; "
        "the kernel never fetches schemas (put the definition under $defs and refer to it as '#/$defs/…')"
    )
    assert llm_server.requests == [] and counted.hits == []


def test_a_tool_whose_parameters_refer_to_a_url_does_not_load(
    project: Path, make_tool: ToolFactory, counted: Counted
) -> None:
    yaml_extra = f'parameters:\n  type: object\n  properties:\n    a: {{$ref: "{counted.url}"}}\n'
    make_tool("fetchy", "function run(args) { return 'ran'; }", yaml_extra=yaml_extra)
    with llm_kernel(project, None) as kernel:
        result = kernel.run_tool("fetchy", {"a": "x"})
        (problem,) = kernel.problems()
    assert not result.success and "failed to load" in result.content
    assert f"parameters: $ref '{counted.url}' points outside the schema" in problem.reason
    assert counted.hits == []


def test_validators_never_fetch_even_when_a_schema_skipped_the_check(counted: Counted) -> None:
    """The second wall: a validator built from such a schema fails to resolve, without a request."""
    schema: JSONObject = {"type": "object", "properties": {"a": {"$ref": counted.url}}}
    spec = ToolSpec(name="t", script=Path("t.js"), yaml_path=Path("t.yaml"), raw={}, parameters=schema)
    with pytest.raises(ValidationStopped, match="does not point to a part of the schema"):
        bounded_errors(spec.validator, {"a": 1}, None, 10)
    with pytest.raises(ValidationStopped, match="does not point to a part of the schema"):
        bounded_errors(bounded_validator(schema), {"a": 1}, None, 10)
    assert counted.hits == []


@pytest.mark.parametrize(
    ("schema", "remote"),
    [
        ({"$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}, []),
        ({"$ref": "https://json-schema.org/draft/2020-12/schema"}, []),  # a metaschema: the kernel holds it
        (
            {
                "$id": "https://example.com/root",
                "$defs": {"b": {"$id": "https://example.com/b", "type": "integer"}},
                "properties": {"abs": {"$ref": "https://example.com/b"}, "rel": {"$ref": "b#"}},
            },
            [],  # documents the schema declares itself, named absolutely or relatively
        ),
        (
            {"properties": {"x": {"$ref": "http://169.254.169.254/latest/meta-data/"}}},
            ["http://169.254.169.254/latest/meta-data/"],
        ),
        ({"$id": "https://example.com/root", "items": {"$ref": "other.json"}}, ["other.json"]),
        ({"items": {"$dynamicRef": "file:///etc/passwd#x"}}, ["file:///etc/passwd#x"]),
    ],
)
def test_remote_refs_tells_a_reference_inside_the_schema_from_one_outside(
    schema: dict[str, object], remote: list[str]
) -> None:
    assert remote_refs(schema) == remote
