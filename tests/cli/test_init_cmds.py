"""`agentkernel init [DIR]`: a project that `check`, `tool test`, `serve` and `chat` accept at once.

Each command runs as a real subprocess in the new project, the chat and the
server against the scripted LLM on 127.0.0.1. The wheel ships the starter it
copies (built here with pip, as `.ci/run` builds it), and a project with an
empty kernel.yaml loads with the state store off, saying so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentkernel.cli.init_cmds import STARTER_TEMPLATE, starter_files
from tests.conftest import REPO
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import sse_events

BIN = Path(sys.executable).parent
STARTER = {p.as_posix() for p in starter_files()}
ASK = "Сколько слов: Привет, мир"


def agentkernel(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
    return subprocess.run(
        [str(BIN / "agentkernel"), *args], cwd=cwd, env=env, input=stdin, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip


def files_below(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def made(tmp_path: Path) -> Path:
    """A project made by `agentkernel init my-agents` in an empty folder."""
    done = agentkernel("init", "my-agents", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path / "my-agents"


def test_the_starter_holds_a_js_tool_a_rhai_tool_a_hook_a_template_and_tests() -> None:
    assert {
        ".gitignore",
        "config/kernel.yaml",
        "config/scripts/tools/word_count.yaml",
        "config/scripts/tools/word_count.js",
        "config/scripts/tools/word_count_rhai.yaml",
        "config/scripts/tools/word_count.rhai",
        "config/scripts/hooks/audit.yaml",
        "config/scripts/hooks/audit.rhai",
        f"config/templates/{STARTER_TEMPLATE}.yaml",
    } == STARTER
    kernel_yaml = (REPO / "src/agentkernel/cli/starter/config/kernel.yaml").read_text(encoding="utf-8")
    assert kernel_yaml.count("#") > 20  # a commented file to learn from


def test_the_starters_hook_is_the_shipped_one() -> None:
    """The starter's audit hook is config/'s, byte for byte: the docs show that one."""
    for name in ("audit.yaml", "audit.rhai"):
        starter = REPO / "src/agentkernel/cli/starter/config/scripts/hooks" / name
        assert starter.read_bytes() == (REPO / "config/scripts/hooks" / name).read_bytes()


def test_init_makes_a_project_that_check_tool_test_and_hook_test_accept(made: Path, tmp_path: Path) -> None:
    assert files_below(made) == STARTER
    checked = agentkernel("check", cwd=made)
    assert (checked.returncode, checked.stdout, checked.stderr) == (
        0,
        "ok: 2 tools, 1 hook, 1 template; built-in: 4 tools, 2 hooks\n",
        "",
    )
    tested = agentkernel("tool", "test", "word_count", "word_count_rhai", cwd=made)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.splitlines()[:4] == [
        "PASS  word_count: считает",
        "PASS  word_count: пустой текст",
        "PASS  word_count_rhai: считает",
        "PASS  word_count_rhai: пустой текст",
    ]
    hooks = agentkernel("hook", "test", "audit", cwd=made)
    assert hooks.returncode == 0 and hooks.stdout.startswith("PASS  audit: "), hooks.stdout + hooks.stderr
    ran = agentkernel("tool", "run", "word_count_rhai", '{"text": "Привет, мир"}', cwd=made)
    assert json.loads(ran.stdout)["content"] == "Слов: 2"


def test_init_says_what_it_made_and_what_to_type_next(tmp_path: Path) -> None:
    done = agentkernel("init", "my-agents", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert lines[0] == "made a project in my-agents:"
    assert "  config/scripts/tools/word_count.js" in lines
    assert lines[lines.index("next:") + 1] == "  cd my-agents"
    assert any(line.startswith(f"  agentkernel chat --template {STARTER_TEMPLATE}") for line in lines)
    assert "--llm-url URL" in done.stdout and "agentkernel dev llm" in done.stdout


def test_init_defaults_to_the_working_directory(tmp_path: Path) -> None:
    done = agentkernel("init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("made a project in this folder:\n") and "cd " not in done.stdout
    assert files_below(tmp_path) == STARTER


def test_init_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    done = agentkernel("init", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        f"agentkernel init: this folder ({tmp_path}) is not empty (notes.txt); give a new or empty folder"
        " (agentkernel init my-agents), or --force to add the project's files beside these\n"
    )
    assert files_below(tmp_path) == {"notes.txt"}


def test_a_fresh_git_repository_counts_as_empty(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    assert agentkernel("init", cwd=tmp_path).returncode == 0
    assert files_below(tmp_path) == STARTER | {".git/HEAD"}


def test_force_adds_the_files_beside_others_but_never_replaces_one(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    assert agentkernel("init", "--force", cwd=tmp_path).returncode == 0
    assert files_below(tmp_path) == STARTER | {"notes.txt"}
    (tmp_path / "config/kernel.yaml").write_text("{}\n", encoding="utf-8")
    again = agentkernel("init", ".", "--force", cwd=tmp_path)
    assert again.returncode == 1
    assert "already holds .gitignore, config/kernel.yaml," in again.stderr
    assert again.stderr.endswith("; init never replaces a file\n")
    assert (tmp_path / "config/kernel.yaml").read_text(encoding="utf-8") == "{}\n"


def test_init_refuses_a_file_in_place_of_the_folder(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("", encoding="utf-8")
    done = agentkernel("init", "taken", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, "agentkernel init: taken exists and is not a folder\n")


def test_the_readmes_init_line_makes_a_project_check_accepts(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (line,) = [x for x in readme.splitlines() if x.startswith("agentkernel init ")]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("AGENTKERNEL_CONFIG", None)
    done = subprocess.run(
        ["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    summary = "ok: 2 tools, 1 hook, 1 template; built-in: 4 tools, 2 hooks"
    assert done.stdout.endswith(f"\n{summary}\n")
    assert f"`{summary}`" in " ".join(readme.split())  # what the README says check answers


# -- serve and chat on the new project, with the scripted LLM --------------------------------------------


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        server.add(
            Reply(tool_calls=(FakeToolCall("word_count", '{"text": "Привет, мир"}'),)),
            Reply(text="В тексте два слова."),
        )
        yield server


def test_the_new_project_serves_a_turn(made: Path, llm: FakeLLMServer) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
    argv = [str(BIN / "agentkernel"), "serve", "--port", "0", "--llm-url", llm.base_url]
    server = subprocess.Popen(
        argv, cwd=made, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[3]
        with httpx.Client(base_url=url, timeout=60) as client:
            session = client.post("/v1/sessions", json={"template": STARTER_TEMPLATE}).json()["id"]
            answer = client.post(f"/v1/sessions/{session}/messages", json={"content": ASK})
        events = sse_events(answer.text)
        assert ("notice", {"text": f"🔍 audit: {len(ASK)} символов"}) in events
        results = [data for kind, data in events if kind == "tool_result"]
        assert [(r["tool"], r["content"]) for r in results] == [("word_count", "Слов: 2")]
        assert ("reply", {"content": "В тексте два слова.", "streamed": True}) in events
        assert events[-1] == ("done", {"reason": "job_done"})
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=120) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert llm.remaining == 0


def test_the_new_project_chats_from_a_pipe(made: Path, llm: FakeLLMServer) -> None:
    done = agentkernel(
        "chat", "--template", STARTER_TEMPLATE, "--llm-url", llm.base_url, cwd=made, stdin=f"{ASK}\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"ℹ 🔍 audit: {len(ASK)} символов",
        '→ word_count({"text": "Привет, мир"})',
        "✓ word_count: Слов: 2",
        "В тексте два слова.",
        f"ℹ ✅ audit: {len(ASK)} → 19 символов",
    ]
    assert llm.remaining == 0


# -- an empty kernel.yaml, and no project at all -------------------------------------------------------


def test_an_empty_kernel_yaml_works_with_the_state_store_off(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config/kernel.yaml").write_text("", encoding="utf-8")
    assert agentkernel("check", cwd=tmp_path).returncode == 0
    ran = agentkernel("tool", "run", "state_tool", '{"op": "set", "key": "k", "value": 1}', cwd=tmp_path)
    assert json.loads(ran.stdout)["error"] == (
        "state_set: the state store is off: kernel.yaml sets no state.db_path"
        " (set it, e.g. data/state.db, to turn it on)"
    )


def test_outside_a_project_tool_run_says_how_to_make_one(tmp_path: Path) -> None:
    done = agentkernel("tool", "run", "word_count", "{}", cwd=tmp_path)
    assert done.returncode == 1
    assert "to make a project, run `agentkernel init` (here) or `agentkernel init DIR`" in done.stderr


# -- the wheel ships the starter -----------------------------------------------------------------------


def test_the_wheel_ships_the_starter_and_init_runs_from_it(tmp_path: Path) -> None:
    """Build the wheel as `.ci/run` does, then run `init` from its unpacked files alone."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(REPO)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("agentkernel-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {f"agentkernel/cli/starter/{p}" for p in STARTER} <= names
        archive.extractall(tmp_path / "site")
    project = tmp_path / "from-wheel"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "PYTHONSAFEPATH": "1"}
    argv = [sys.executable, "-m", "agentkernel.cli.main", "init", str(project)]
    done = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert files_below(project) == STARTER
