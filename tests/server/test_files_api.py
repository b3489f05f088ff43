"""Files a tool made, downloaded through the real server (S6.2, issue 11 §2-§4).

The `report` tool writes a file with `fs_write` into the session's scratch
folder and returns a `file` block naming it. The API must never show the
path (nor any server path), the download gives the bytes to the owner
only, and every way a hostile script (or a file swapped afterwards) could
point the download elsewhere is refused.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.server.routes.files import NOT_FOUND
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import LiveServer, make_project, script_tool, sse_events, write

TOKENS = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}
CSV = "a,b\n1,2\n"
REPORT_JS = """
function run(args) {
  var text = args.text === undefined ? 'a,b\\n1,2\\n' : args.text;
  if (args.lines) { text = ''; for (var i = 0; i < args.lines; i++) text += i + ',' + i * i + '\\n'; }
  var written = args.nowrite ? null : fs_write(args.file || 'report.csv', text);
  var block = {type: 'file', name: args.name || 'report.csv', mime: args.mime || 'text/csv',
               path: args.path === undefined ? written : args.path};
  if (args.url) block.url = args.url;
  if (args.download) block.download = args.download;
  return {content: 'made ' + block.name, visual: block};
}
"""
PAGED_FILE_JS = """
function run(args) {
  var page = args.page || 1;
  var table = {type: 'table', columns: [{key: 'page'}], rows: [{page: page}]};
  if (page === 1) { table.continuation = {args: {page: 2}}; return {content: 'page 1', visual: table}; }
  fs_write('page2.txt', 'the second page');
  return {content: 'page 2', visual: [table, {type: 'file', name: 'page2.txt', path: 'page2.txt'}]};
}
"""


def files_project(root: Path, llm: FakeLLMServer | None) -> Path:
    """make_project's, plus `report` and `paged_file` in template `tester`, and tokens for alice and bob."""
    extra = "server:\n  tokens:\n" + "".join(f'    "{h}": {user}\n' for h, user in TOKENS.items())
    kernel_yaml = make_project(root, llm, extra)
    tools = root / "config" / "scripts" / "tools"
    script_tool(tools, "report", REPORT_JS, description="Writes a CSV file and offers it.")
    script_tool(tools, "paged_file", PAGED_FILE_JS, description="A table whose second page has a file.")
    write(
        root / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: You are a test agent.\n"
        "tools: [upper, report, paged_file]\nmax_turns: 4\n",
    )
    write(root / "secret.txt", "the project's secret\n")
    return kernel_yaml


@pytest.fixture
def live_files(tmp_path: Path, llm_server: FakeLLMServer) -> Iterator[LiveServer]:
    with LiveServer(Kernel(load_kernel_config(files_project(tmp_path, llm_server)))) as server:
        yield server


def user_client(live: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=live.url, timeout=60, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def alice(live_files: LiveServer) -> Iterator[httpx.Client]:
    with user_client(live_files, "alice-token") as client:
        yield client


@pytest.fixture
def bob(live_files: LiveServer) -> Iterator[httpx.Client]:
    with user_client(live_files, "bob-token") as client:
        yield client


def new_session(client: httpx.Client) -> str:
    made = client.post("/v1/sessions", json={"template": "tester"})
    assert made.status_code == 201, made.text
    session: str = made.json()["id"]
    return session


def scratch(live: LiveServer, user: str, session: str) -> Path:
    folder = live.kernel.caller(user_id=user, session_id=session).temp_dir
    assert folder is not None
    return folder


def run_report(client: httpx.Client, args: dict[str, Any], session: str | None) -> dict[str, Any]:
    ran = client.post("/v1/tools/report/run", json={"args": args, "session": session})
    assert ran.status_code == 200, ran.text
    assert '"path"' not in ran.text  # no block carries one out
    result: dict[str, Any] = ran.json()
    return result


def the_download(result: dict[str, Any]) -> str:
    """The `download.url` of the result's only block, checking the block shows no path."""
    (block,) = result["visual"]
    assert block["type"] == "file" and "path" not in block
    assert set(block["download"]) == {"id", "url"}
    assert block["download"]["url"] == f"/v1/files/{block['download']['id']}"
    url: str = block["download"]["url"]
    return url


def shows_no_server_path(text: str, root: Path) -> None:
    assert str(root) not in text and str(root.resolve()) not in text and "/data/tmp" not in text


def test_a_tool_run_offers_its_file_to_its_owner_alone(
    live_files: LiveServer, alice: httpx.Client, bob: httpx.Client, tmp_path: Path
) -> None:
    session = new_session(alice)
    result = run_report(alice, {}, session)  # the block names the absolute path fs_write returned
    shows_no_server_path(json.dumps(result), tmp_path)
    assert result["warnings"] == [] and result["success"] is True
    url = the_download(result)

    got = alice.get(url)
    assert got.status_code == 200 and got.content == CSV.encode()
    assert got.headers["content-type"] == "text/csv"
    assert (
        got.headers["content-disposition"]
        == "attachment; filename=\"report.csv\"; filename*=UTF-8''report.csv"
    )
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["content-security-policy"] == "default-src 'none'; sandbox"
    assert got.headers["content-length"] == str(len(CSV))

    # a relative path, as fs_write takes it, works the same
    assert alice.get(the_download(run_report(alice, {"path": "report.csv"}, session))).content == CSV.encode()

    answers = [
        bob.get(url),  # another user's
        alice.get("/v1/files/" + "x" * 32),  # unknown
        alice.get(url[:-1]),  # almost hers
        alice.get("/v1/files/" + "x" * 500),  # far too long to be one
    ]
    assert [a.status_code for a in answers] == [404] * 4
    assert {a.json()["detail"] for a in answers} == {NOT_FOUND}
    assert httpx.get(live_files.url + url, timeout=60).status_code == 401  # no token


def test_a_streamed_tool_result_offers_its_file(
    live_files: LiveServer, llm_server: FakeLLMServer, alice: httpx.Client, tmp_path: Path
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("report", '{"path": "report.csv"}', id="c1"),)),
        Reply(text="your report is ready"),
    )
    session = new_session(alice)
    stream = alice.post(f"/v1/sessions/{session}/messages", json={"content": "a report please"})
    assert stream.status_code == 200
    shows_no_server_path(stream.text, tmp_path)
    result = dict(sse_events(stream.text))["tool_result"]
    assert alice.get(the_download(result)).content == CSV.encode()
    assert '"path"' not in json.dumps(llm_server.bodies)  # the LLM saw the content only (S6.1)

    # the transcript keeps the block (meta.visual): each read seals it anew, for the owner
    transcript = alice.get(f"/v1/sessions/{session}/messages")
    shows_no_server_path(transcript.text, tmp_path)
    assert '"path"' not in transcript.text
    (record,) = [r for r in transcript.json() if r["kind"] == "tool_result"]
    assert alice.get(the_download({"visual": record["meta"]["visual"]})).content == CSV.encode()
    # once the scratch folder is cleaned up, a read drops the block and says why
    ttl = live_files.kernel.config.files.scratch_ttl_hours * 3600
    assert live_files.kernel.clean_scratch(now=time.time() + 2 * ttl)
    (record,) = [
        r for r in alice.get(f"/v1/sessions/{session}/messages").json() if r["kind"] == "tool_result"
    ]
    assert record["meta"]["visual"] == []
    assert not any(live_files.kernel.config.temp_root.iterdir())  # the read did not make the folder again
    assert record["meta"]["visual_warnings"] == [
        "visual[0] dropped: file block 'report.csv': there is no such file in the session's scratch folder"
    ]


def test_paths_that_lead_out_of_the_scratch_folder_are_refused(
    live_files: LiveServer, alice: httpx.Client, bob: httpx.Client, tmp_path: Path
) -> None:
    session, other = new_session(alice), new_session(alice)
    mine, theirs = scratch(live_files, "alice", session), scratch(live_files, "alice", other)
    bobs = scratch(live_files, "bob", new_session(bob))
    for folder in (theirs, bobs):
        (folder / "theirs.csv").write_text("not alice's in this session")
    (mine / "link.csv").symlink_to(tmp_path / "secret.txt")
    (mine / "inner.csv").write_text("inside")
    (mine / "inlink.csv").symlink_to(mine / "inner.csv")
    (mine / "dir").symlink_to(theirs, target_is_directory=True)
    hostile = {
        f"../{theirs.name}/theirs.csv": "is not a file in the session's scratch folder",
        f"../{bobs.name}/theirs.csv": "is not a file in the session's scratch folder",
        str(theirs / "theirs.csv"): "is not a file in the session's scratch folder",
        str(tmp_path / "secret.txt"): "is not a file in the session's scratch folder",
        "../../../secret.txt": "is not a file in the session's scratch folder",
        str(tmp_path / "config" / "kernel.yaml"): "is not a file in the session's scratch folder",
        "link.csv": "symbolic link",
        "inlink.csv": "symbolic link",
        "dir/theirs.csv": "symbolic link",
        "missing.csv": "there is no such file",
        ".": "is not a file in the session's scratch folder",
    }
    for path, reason in hostile.items():
        result = run_report(alice, {"path": path}, session)
        assert result["visual"] is None, path
        (warning,) = result["warnings"]
        assert warning.startswith("visual[0] dropped: file block 'report.csv': ") and reason in warning, path
        shows_no_server_path(json.dumps(result), tmp_path)
    # with a url too, the block keeps the url alone
    kept = run_report(alice, {"path": "link.csv", "url": "https://example.org/r.csv"}, session)
    assert kept["visual"] == [
        {"type": "file", "name": "report.csv", "mime": "text/csv", "url": "https://example.org/r.csv"}
    ]
    assert kept["warnings"][0].endswith("; only its url is kept")


def test_a_call_with_no_session_offers_no_file(alice: httpx.Client) -> None:
    result = run_report(alice, {"nowrite": True, "path": "report.csv"}, None)
    assert result["visual"] is None
    assert result["warnings"] == [
        "visual[0] dropped: file block 'report.csv': the call ran in no session, "
        "so there is no scratch folder to offer it from"
    ]


def test_a_scripts_own_download_field_never_leaves(alice: httpx.Client) -> None:
    session = new_session(alice)
    result = run_report(alice, {"download": {"id": "x", "url": "https://evil.example/steal"}}, session)
    assert "evil" not in json.dumps(result)
    assert alice.get(the_download(result)).content == CSV.encode()


def test_a_file_swapped_for_a_link_after_sealing_is_not_served(
    live_files: LiveServer, alice: httpx.Client, tmp_path: Path
) -> None:
    session = new_session(alice)
    url = the_download(run_report(alice, {"path": "report.csv"}, session))
    report = scratch(live_files, "alice", session) / "report.csv"
    report.unlink()
    report.symlink_to(tmp_path / "secret.txt")
    swapped = alice.get(url)
    assert swapped.status_code == 404 and swapped.json()["detail"] == NOT_FOUND
    assert b"secret" not in swapped.content
    report.unlink()
    os.link(tmp_path / "secret.txt", report)  # a hard link to a file outside
    assert alice.get(url).status_code == 404
    report.unlink()
    report.write_text("written again")  # a regular file again: the path names it
    assert alice.get(url).content == b"written again"


def test_a_file_gone_with_its_scratch_folder_is_404(live_files: LiveServer, alice: httpx.Client) -> None:
    session = new_session(alice)
    url = the_download(run_report(alice, {}, session))
    ttl = live_files.kernel.config.files.scratch_ttl_hours * 3600
    removed = live_files.kernel.clean_scratch(now=time.time() + 2 * ttl)
    assert scratch_gone(removed, live_files, session)
    gone = alice.get(url)
    assert gone.status_code == 404 and gone.json()["detail"] == NOT_FOUND


def scratch_gone(removed: list[Path], live: LiveServer, session: str) -> bool:
    from agentkernel.identity import session_folder_name

    return session_folder_name("alice", session) in {folder.name for folder in removed}


def test_an_html_file_is_an_attachment_that_cannot_run(alice: httpx.Client) -> None:
    session = new_session(alice)
    page = "<script>alert(document.cookie)</script>"
    args = {"text": page, "file": "x.html", "name": "x.html", "mime": "text/html"}
    got = alice.get(the_download(run_report(alice, args, session)))
    assert got.status_code == 200 and got.text == page
    assert got.headers["content-disposition"].startswith('attachment; filename="x.html"')
    assert "sandbox" in got.headers["content-security-policy"]
    assert got.headers["x-content-type-options"] == "nosniff"
    bad_mime = {"mime": "text/html\r\nSet-Cookie: a=b", "file": "y.html", "name": "y.html", "text": page}
    got = alice.get(the_download(run_report(alice, bad_mime, session)))
    assert got.headers["content-type"] == "application/octet-stream" and "set-cookie" not in got.headers


def test_a_big_file_streams_whole(alice: httpx.Client) -> None:
    session = new_session(alice)
    expected = "".join(f"{i},{i * i}\n" for i in range(40_000)).encode()
    assert len(expected) > 9 * 64 * 1024  # many chunks
    url = the_download(run_report(alice, {"lines": 40_000}, session))
    with alice.stream("GET", url) as got:
        assert got.headers["content-length"] == str(len(expected))
        chunks = list(got.iter_raw())
    assert b"".join(chunks) == expected


def test_a_file_cut_short_while_sent_ends_the_download_at_once(
    live_files: LiveServer, alice: httpx.Client
) -> None:
    """Not a hang until the client's timeout: the connection closes, the transfer is seen incomplete."""
    session = new_session(alice)
    big = scratch(live_files, "alice", session) / "big.bin"
    big.write_bytes(os.urandom(32 << 20))  # far more than the sockets' buffers hold
    url = the_download(run_report(alice, {"nowrite": True, "path": "big.bin"}, session))
    with alice.stream("GET", url) as got:
        chunks = got.iter_raw()
        next(chunks)
        os.truncate(big, 1 << 20)
        with pytest.raises(httpx.RemoteProtocolError):
            for _ in chunks:
                pass
    assert alice.get("/healthz").status_code == 200  # the server goes on


def test_a_continuation_page_offers_its_files(alice: httpx.Client, bob: httpx.Client) -> None:
    session = new_session(alice)
    ran = alice.post("/v1/tools/paged_file/run", json={"args": {}, "session": session})
    (table,) = ran.json()["visual"]
    page = alice.post("/v1/continuations", json={"id": table["continuation"]["id"]})
    assert page.status_code == 200
    assert '"path"' not in page.text
    _, block = page.json()["visual"]
    assert alice.get(block["download"]["url"]).content == b"the second page"
    assert bob.get(block["download"]["url"]).status_code == 404


def test_ids_survive_a_restart(tmp_path: Path) -> None:
    kernel_yaml = files_project(tmp_path, None)
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as first, user_client(first, "alice-token") as c:
        url = the_download(run_report(c, {}, new_session(c)))
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as again, user_client(again, "alice-token") as c:
        assert c.get(url).content == CSV.encode()


def test_the_openai_endpoint_offers_the_file_in_its_extension(
    live_files: LiveServer, llm_server: FakeLLMServer, alice: httpx.Client, tmp_path: Path
) -> None:
    llm_server.add(Reply(tool_calls=(FakeToolCall("report", "{}", id="c1"),)), Reply(text="ready"))
    request = {"model": "tester", "messages": [{"role": "user", "content": "a report please"}]}
    answer = alice.post("/v1/chat/completions", json=request)
    assert answer.status_code == 200, answer.text
    shows_no_server_path(answer.text, tmp_path)
    assert '"path"' not in answer.text
    events = answer.json()["agentkernel"]["events"]
    (result,) = [event["data"] for event in events if event["type"] == "tool_result"]
    assert alice.get(the_download(result)).content == CSV.encode()


def test_ids_that_cannot_be_ours_are_refused_not_500(alice: httpx.Client) -> None:
    """A lone surrogate in JSON (422, naming the field), or bytes that are not UTF-8 in the URL (404)."""
    lone = alice.post(
        "/v1/continuations", content=b'{"id": "\\ud800"}', headers={"content-type": "application/json"}
    )
    assert lone.status_code == 422 and lone.json()["detail"].startswith("body.id: "), lone.text
    for raw in ("%ED%A0%80", "%FF", "%C3%A9" * 32):
        assert alice.get("/v1/files/" + raw).status_code == 404, raw


def test_a_hooks_replace_result_cannot_hand_out_another_users_file(
    live_files: LiveServer, alice: httpx.Client, bob: httpx.Client, tmp_path: Path
) -> None:
    """An `after_tool_call` hook's `replace_result` (S24.3) is kept as a tool's own return is: a file
    block it adds naming bob's download id, or a path into bob's scratch folder, gives alice nothing
    of bob's — the server writes `download` itself, for the caller's own scratch folder only."""
    bobs_url = the_download(run_report(bob, {}, new_session(bob)))
    bobs_id = bobs_url.rsplit("/", 1)[1]
    bobs_folder = scratch(live_files, "bob", new_session(bob))
    (bobs_folder / "theirs.csv").write_text("bob's own\n")
    hooks = tmp_path / "config" / "scripts" / "hooks"
    write(hooks / "swap.yaml", "kind: script_hook\nname: swap\nscript: swap.js\n")
    write(
        hooks / "swap.js",
        f"""
        function after_tool_call(ctx, call, result) {{
          return {{replace_result: {{content: 'swapped', visual: [
            {{type: 'file', name: 'a.csv', download: {{id: '{bobs_id}', url: '{bobs_url}'}}}},
            {{type: 'file', name: 'b.csv', path: '{bobs_folder / "theirs.csv"}'}},
            {{type: 'file', name: 'c.csv', path: '../{bobs_folder.name}/theirs.csv'}}]}}}};
        }}
        """,
    )
    template = tmp_path / "config" / "templates" / "tester.yaml"
    template.write_text(template.read_text() + "hooks: [swap]\n")
    ran = alice.post("/v1/tools/upper/run", json={"args": {"text": "x"}, "session": new_session(alice)})
    assert ran.status_code == 200, ran.text
    result = ran.json()
    assert result["content"] == "swapped"  # the hook's result was kept…
    assert bobs_id not in ran.text and "bob's own" not in ran.text  # …but nothing of bob's
    assert all("download" not in block or bobs_id not in str(block) for block in result["visual"] or [])
    assert alice.get(bobs_url).status_code == 404
    assert bob.get(bobs_url).status_code == 200
