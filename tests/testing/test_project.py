"""`kernel_for_tests` and the pytest fixtures (issue 15 §2): the project's tools, none of its data.

The fixtures are checked as users meet them: a real pytest subprocess in a
project folder, the plugin loaded through the package's `pytest11` entry
point, nothing imported by hand.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import agentkernel.testing
from agentkernel.testing import FakeLLMServer, Rule, RuleBook, kernel_for_tests
from tests.conftest import write_kernel_yaml


def test_every_store_lives_in_the_data_folder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write_kernel_yaml(
        project, "duckdb:\n  dir: /var/lib/somewhere\nllm:\n  base_url: http://h:1/v1\n  model: m\n"
    )
    tool = project / "config" / "scripts" / "tools"
    (tool / "keep.js").write_text(
        'function run(a) { state_set("user", "k", 1); fs_write("f.txt", "x"); '
        'db_execute("main.duckdb", "CREATE TABLE t (x INT)"); return "ok"; }',
        encoding="utf-8",
    )
    (tool / "keep.yaml").write_text("kind: script_tool\nname: keep\nscript: keep.js\n", encoding="utf-8")
    data = tmp_path / "data"
    with kernel_for_tests(project, data) as kernel:
        assert kernel.config.llm is not None and kernel.config.llm.base_url == "http://h:1/v1"
        result = kernel.run_tool("keep", {}, kernel.caller(user_id="u", session_id="s"))
        assert result.success, result.content
    assert sorted(p.name for p in data.iterdir()) >= ["data", "scratch", "state.db"]
    assert list((data / "data" / "somewhere").glob("*")), "DuckDB files under the data folder"
    assert not (project / "data").exists()


def test_the_llm_points_at_the_scripted_server_without_a_key(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path, "llm:\n  base_url: http://h:1/v1\n  model: big\n  api_key_env: SOME_KEY\n")
    tool = tmp_path / "config" / "scripts" / "tools"
    (tool / "ask.js").write_text('function run() { return llm("q"); }', encoding="utf-8")
    (tool / "ask.yaml").write_text("kind: script_tool\nname: ask\nscript: ask.js\n", encoding="utf-8")
    with FakeLLMServer() as server:
        server.respond_with(RuleBook([Rule.text("answer")]))
        with kernel_for_tests(tmp_path / "config" / "kernel.yaml", tmp_path / "d", llm=server) as kernel:
            assert kernel.run_tool("ask", {}).content == "answer"
        assert server.bodies[0]["model"] == "big"
        assert "authorization" not in server.requests[0].headers


def test_the_fixtures_in_a_users_pytest(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path)
    tool = tmp_path / "config" / "scripts" / "tools"
    (tool / "ask.js").write_text(
        'function run(a) { state_set("user", "n", 1); return llm(a.q); }', encoding="utf-8"
    )
    (tool / "ask.yaml").write_text("kind: script_tool\nname: ask\nscript: ask.js\n", encoding="utf-8")
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent(
            """
            from pathlib import Path

            from agentkernel.testing import Rule, RuleBook


            def test_kernel(agentkernel_kernel, tmp_path):
                assert [t.name for t in agentkernel_kernel.list_tools()] == ["ask"]
                assert Path(agentkernel_kernel.config.data_dir).is_relative_to(tmp_path)


            def test_scripted(agentkernel_factory, scripted_llm):
                scripted_llm.respond_with(RuleBook([Rule.text("yes", contains="ok?")]))
                kernel = agentkernel_factory(llm=scripted_llm)
                assert kernel.run_tool("ask", {"q": "ok?"}, kernel.caller(user_id="u")).content == "yes"
            """
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert not (tmp_path / "data").exists()


def test_the_lazy_names_are_the_listed_ones() -> None:
    import importlib

    for name, module in agentkernel.testing._EXPORTS.items():
        assert getattr(agentkernel.testing, name) is getattr(importlib.import_module(module), name)
    assert sorted(agentkernel.testing.__all__) == sorted(agentkernel.testing._EXPORTS)
