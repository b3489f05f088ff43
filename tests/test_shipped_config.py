"""The shipped config/kernel.yaml (issue 8 §4, §5): every helper area works through `agentkernel tool run`.

The project's own `config/` is copied into tmp_path, so the commands run on
exactly what a clean clone has and never write into the repository. One
tool, in JS and in Rhai, touches every helper area: `caller()`, the state
store (S11), DuckDB (S12), files (S14), HTTP to a real server on 127.0.0.1
(S8) and programs (S13). As shipped, the last two are refused — loopback is
private and the shell is off — with messages naming the switch; with the
two switches turned on in the copy, they work.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.ports import DUCKDB, MESSAGES, STATE
from agentkernel.services.duck import DuckService
from agentkernel.services.state import SqliteStateStore
from agentkernel.testing.parts import kernel_parts
from tests.conftest import REPO
from tests.helpers.http_server import LocalHTTPServer

BIN = Path(sys.executable).parent
SHELL_SWITCH = "  enabled: false             # true lets scripts run any command"
HTTP_SWITCH = "  allow_private: false       # true lets scripts reach 127.0.0.1"

EVERY_AREA_BODY = """
    let out = #{ caller: caller() };
    state_set("user", "name", "Алиса");
    state_push("session", "log", 1);
    out.state = [
        state_get("user", "name"), state_push("session", "log", 2.5), state_range("session", "log", 0, -1),
        state_sadd("global", "tags", "a"), state_smembers("global", "tags"), state_keys("user"),
    ];
    db_execute("{user}/notes.duckdb", "CREATE OR REPLACE TABLE notes (id INTEGER, text VARCHAR)");
    db_execute("{user}/notes.duckdb", "INSERT INTO notes VALUES (1, 'привет')");
    out.db = db_query("{user}/notes.duckdb", "SELECT * FROM notes", 10).rows;
    let note = fs_write("note.txt", "текст");
    out.fs = [fs_read(note), fs_read_bytes(fs_write_bytes("b.bin", "AAE=")), fs_list(caller().temp_dir)];
    out.http = http_get(args.url + "/status/418", 5);
    out.shell = shell("echo hi");
    out.exec = exec("printf", ["%s", "x y"]);
"""
"""One program in the syntax JS and Rhai share (`#{` is Rhai's object literal, `{` in JS)."""
EVERY_AREA = {
    ".js": "function run(args) {"
    + EVERY_AREA_BODY.replace("#{", "{")
    + "    return JSON.stringify(out);\n}\n",
    ".rhai": "fn run(args) {" + EVERY_AREA_BODY + "    out.to_json()\n}\n",
}


@pytest.fixture(scope="module")
def server() -> Iterator[LocalHTTPServer]:
    with LocalHTTPServer() as running:
        yield running


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """A project holding a copy of the repository's config/, nothing else."""
    project = tmp_path / "project"
    shutil.copytree(REPO / "config", project / "config")
    return project


def turn_on(project: Path, switch: str) -> None:
    """Flip one of the shipped kernel.yaml's switches to true, in the copy, as an operator would."""
    path = project / "config" / "kernel.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.count(switch) == 1, f"the shipped kernel.yaml no longer has {switch.strip()!r}"
    path.write_text(text.replace(switch, switch.replace("false", "true ", 1)), encoding="utf-8")


def run_every_area(project: Path, engine: str, url: str) -> dict[str, Any]:
    """`agentkernel tool run every_area` in the project, as a user types it; what the tool gathered."""
    tools = project / "config" / "scripts" / "tools"
    (tools / f"every_area{engine}").write_text(EVERY_AREA[engine], encoding="utf-8")
    (tools / "every_area.yaml").write_text(
        f"kind: script_tool\nname: every_area\ndescription: every helper area\nscript: every_area{engine}\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [
            str(BIN / "agentkernel"),
            "tool",
            "run",
            "every_area",
            json.dumps({"url": url}),
            "--user",
            "alice",
            "--session",
            "chat-1",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["success"], result
    data: dict[str, Any] = json.loads(result["content"])
    return data


def check_embedded_stores(data: dict[str, Any], project: Path) -> None:
    """caller(), state, DuckDB and files all answered, with their files under the project's data/."""
    temp_dir = data["caller"]["temp_dir"]
    assert (data["caller"]["user_id"], data["caller"]["session_id"]) == ("alice", "chat-1")
    assert Path(temp_dir).parent == (project / "data" / "tmp").resolve()
    assert data["state"] == ["Алиса", 2, [1, 2.5], True, ["a"], ["name"]]
    assert data["db"] == [{"id": 1, "text": "привет"}]
    assert data["fs"] == ["текст", "AAE=", ["b.bin", "note.txt"]]
    assert (project / "data" / "state.db").is_file()
    assert list((project / "data" / "duckdb").glob("u@alice-*/notes.duckdb"))


@pytest.mark.parametrize("engine", [".js", ".rhai"])
def test_as_shipped_stores_work_and_the_switches_say_how_to_open(
    shipped: Path, server: LocalHTTPServer, engine: str
) -> None:
    """§5: `state_set` no longer fails with "no state store attached"; §4: http and shell stay closed."""
    data = run_every_area(shipped, engine, server.base)
    check_embedded_stores(data, shipped)
    assert data["http"]["status"] == 0
    assert data["http"]["error"].endswith(
        "address 127.0.0.1 is a loopback address, denied unless http.allow_private: true"
    ), data["http"]
    for helper in ("shell", "exec"):
        assert data[helper]["exit_code"] == -1
        assert data[helper]["stderr"].startswith(f"{helper}: disabled in kernel.yaml (shell.enabled: false)")
    assert server.requests.get("/status/418", 0) == 0


@pytest.mark.parametrize("engine", [".js", ".rhai"])
def test_with_both_switches_on_http_and_shell_work(
    shipped: Path, server: LocalHTTPServer, engine: str
) -> None:
    turn_on(shipped, SHELL_SWITCH)
    turn_on(shipped, HTTP_SWITCH)
    data = run_every_area(shipped, engine, server.base)
    check_embedded_stores(data, shipped)
    assert data["http"] == {"status": 418, "body": "status 418", "error": ""}
    assert data["shell"] == {"ok": True, "exit_code": 0, "stdout": "hi\n", "stderr": ""}
    assert data["exec"] == {"ok": True, "exit_code": 0, "stdout": "x y", "stderr": ""}


def test_every_store_is_attached_and_nothing_is_created_before_use(shipped: Path) -> None:
    """The state store, DuckDB, the transcript and the scratch folders, all under data/, made lazily."""
    kernel = Kernel(load_kernel_config(shipped / "config" / "kernel.yaml"))
    data = shipped / "data"
    state = kernel_parts(kernel).services.get(STATE)
    duck = kernel_parts(kernel).services.get(DUCKDB)
    assert isinstance(state, SqliteStateStore) and state.path == data / "state.db"
    assert isinstance(duck, DuckService) and duck.root == (data / "duckdb").resolve()
    assert (
        kernel_parts(kernel).services.get(MESSAGES) is not None
        and kernel.config.messages_db == data / "messages.db"
    )
    assert kernel.config.temp_root == data / "tmp"
    assert not data.exists()
