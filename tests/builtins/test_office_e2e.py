"""make_docx and fill_contract as built-ins, end to end (issue 15, S6.2, S16).

Through the one dispatch path (`Kernel.run_tool`), from a JS script with
`call_tool` forwarding the file block in its own visual (the manual's
example), and through the real server: the download URL gives the .docx
to its owner and a 404 to anyone else, in a tool run and in a streamed
turn where the LLM calls the tool.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from docx import Document as open_docx

from agentkernel import Kernel
from agentkernel.builtins.office import DOCX_MIME
from agentkernel.config import load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.server.routes.files import NOT_FOUND
from agentkernel.types import JSONObject
from tests.conftest import BUILTINS_ON, write_kernel_yaml
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import LiveServer, make_project, script_tool, sse_events, write

REPORT = "# Отчёт\n\n- один\n- два\n\n| A | B |\n|---|---|\n| 1 | 2 |\n\n```\ncode()\n```\n"
FORWARD_JS = """
function run(args) {
  const r = call_tool("make_docx", { name: "report.docx", content: args.content });
  return { content: "готово: " + r.content, success: r.success, visual: r.visual };
}
"""


@pytest.fixture
def kernel(project: Path) -> Iterator[Kernel]:
    write_kernel_yaml(project, BUILTINS_ON)
    tools = project / "config" / "scripts" / "tools"
    script_tool(tools, "forward", FORWARD_JS, description="make_docx through call_tool")
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as built:
        yield built


def headings_and_tables(path: Path) -> tuple[list[str], list[list[str]]]:
    document = open_docx(str(path))
    headings = [p.text for p in document.paragraphs if p.style is not None and p.style.name == "Heading 1"]
    cells = [[cell.text for cell in row.cells] for table in document.tables for row in table.rows]
    return headings, cells


def test_run_tool_writes_the_docx_in_the_callers_scratch_folder(kernel: Kernel) -> None:
    caller = kernel.caller(user_id="u-1", session_id="s-1")
    result = kernel.run_tool("make_docx", {"name": "report.docx", "content": REPORT}, caller)
    assert result.success is True, result.error
    assert caller.temp_dir is not None
    path = Path(caller.temp_dir) / "report.docx"
    assert result.visual == [{"type": "file", "name": "report.docx", "mime": DOCX_MIME, "path": str(path)}]
    assert headings_and_tables(path) == (["Отчёт"], [["A", "B"], ["1", "2"]])
    assert kernel.tool("make_docx").origin == "builtin"


def test_bad_input_is_a_failed_result_through_dispatch(kernel: Kernel, project: Path) -> None:
    caller = kernel.caller(user_id="u-1", session_id="s-1")
    kernel.run_tool("make_docx", {"name": "../x.docx", "content": "# x"}, caller)  # the results' store made
    before = sorted(project.rglob("*"))
    named = kernel.run_tool("make_docx", {"name": "../x.docx", "content": "# x"}, caller)
    assert named.success is False and "has a path in it" in str(named.error)
    huge = kernel.run_tool("make_docx", {"name": "x.docx", "content": "x" * (50 << 20)}, caller)
    assert huge.success is False and "over the 1,000,000-character limit" in str(huge.error)
    not_object = kernel.run_tool("fill_contract", {"name": "d.docx", "data": [1]}, caller)
    assert not_object.success is False and "data" in str(not_object.error)
    missing = kernel.run_tool("fill_contract", {"name": "d.docx", "data": {"client": "x"}}, caller)
    assert missing.success is False and "field(s): date, amount" in str(missing.error)
    assert sorted(project.rglob("*")) == before


def test_a_script_forwards_the_file_block_from_call_tool(kernel: Kernel) -> None:
    caller = kernel.caller(user_id="u-1", session_id="s-1")
    result = kernel.run_tool("forward", {"content": REPORT}, caller)
    assert result.success is True, result.error
    assert str(result.content).startswith("готово: report.docx is ready")
    assert caller.temp_dir is not None
    path = Path(caller.temp_dir) / "report.docx"
    assert result.visual == [{"type": "file", "name": "report.docx", "mime": DOCX_MIME, "path": str(path)}]
    assert headings_and_tables(path)[0] == ["Отчёт"]


def test_fill_contract_is_filled_through_dispatch(kernel: Kernel) -> None:
    caller = kernel.caller(user_id="u-1", session_id="s-1")
    data: JSONObject = {"client": "ООО Ромашка", "date": "1 марта 2026", "amount": 150000}
    result = kernel.run_tool("fill_contract", {"name": "dogovor.docx", "data": data}, caller)
    assert result.success is True, result.error
    assert caller.temp_dir is not None
    document = open_docx(str(Path(caller.temp_dir) / "dogovor.docx"))
    assert "2.1. Стоимость услуг составляет 150000 рублей." in [p.text for p in document.paragraphs]


# -- through the server ----------------------------------------------------------------------------

TOKENS = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}


@pytest.fixture
def live(tmp_path: Path, llm_server: FakeLLMServer) -> Iterator[LiveServer]:
    extra = (
        BUILTINS_ON + "server:\n  tokens:\n" + "".join(f'    "{h}": {user}\n' for h, user in TOKENS.items())
    )
    kernel_yaml = make_project(tmp_path, llm_server, extra)
    write(
        tmp_path / "config" / "templates" / "office.yaml",
        "name: office\ninstructions: You write documents.\ntools: [make_docx, fill_contract]\nmax_turns: 4\n",
    )
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as server:
        yield server


def client(live: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=live.url, timeout=60, headers={"Authorization": f"Bearer {token}"})


def download_url(result: dict[str, Any]) -> str:
    (block,) = result["visual"]
    assert block["type"] == "file" and block["mime"] == DOCX_MIME and "path" not in block
    url: str = block["download"]["url"]
    return url


def test_the_server_offers_the_docx_to_its_owner_alone(live: LiveServer, tmp_path: Path) -> None:
    with client(live, "alice-token") as alice, client(live, "bob-token") as bob:
        session = alice.post("/v1/sessions", json={"template": "office"}).json()["id"]
        ran = alice.post(
            "/v1/tools/make_docx/run",
            json={"args": {"name": "отчёт.docx", "content": REPORT}, "session": session},
        )
        assert ran.status_code == 200, ran.text
        assert str(tmp_path) not in ran.text and '"path"' not in ran.text
        url = download_url(ran.json())
        got = alice.get(url)
        assert got.status_code == 200
        assert got.headers["content-type"] == DOCX_MIME
        assert "filename*=UTF-8''%D0%BE%D1%82%D1%87%D1%91%D1%82.docx" in got.headers["content-disposition"]
        document = open_docx(io.BytesIO(got.content))
        assert document.paragraphs[0].text == "Отчёт"
        theirs = bob.get(url)
        assert theirs.status_code == 404 and theirs.json()["detail"] == NOT_FOUND


def test_a_turn_where_the_llm_fills_a_contract_offers_the_file(
    live: LiveServer, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    data = {"name": "dogovor.docx", "data": {"client": "ООО Ромашка", "date": "1 марта", "amount": 5}}
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("fill_contract", json.dumps(data, ensure_ascii=False), id="c1"),)),
        Reply(text="Договор готов."),
    )
    with client(live, "alice-token") as alice, client(live, "bob-token") as bob:
        session = alice.post("/v1/sessions", json={"template": "office"}).json()["id"]
        stream = alice.post(f"/v1/sessions/{session}/messages", json={"content": "договор, пожалуйста"})
        assert stream.status_code == 200
        assert str(tmp_path) not in stream.text
        result = dict(sse_events(stream.text))["tool_result"]
        assert result["success"] is True
        url = download_url(result)
        document = open_docx(io.BytesIO(alice.get(url).content))
        assert any("ООО Ромашка" in p.text for p in document.paragraphs)
        assert bob.get(url).status_code == 404
        assert '"path"' not in json.dumps(llm_server.bodies)  # the LLM saw the summary only (S6.1)


def test_without_builtins_the_office_tools_are_gone(tmp_path: Path) -> None:
    config = load_kernel_config(write_kernel_yaml(tmp_path, "scripts:\n  builtins: false\n"))
    with Kernel(config) as kernel:
        assert "make_docx" not in {spec.name for spec in kernel.list_tools()}
