"""The one reader of the kernel's YAML (config/yaml_files.py): every file is parsed once per change.

Counted by the reader's own tally (`YamlFiles.parses`), on real files: the
kernel, its template folder, the tool catalog, the registry asking why a
tool failed to load and `agentkernel check` all ask for the same files, and
each is parsed once until it changes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.cli.project_view import check, config_problem
from agentkernel.config import load_kernel_config
from agentkernel.config.yaml_files import YAML_FILES, YamlFiles
from agentkernel.errors import ConfigError


def aged(*paths: Path) -> None:
    """Date the files an hour back: older than a tick of any file system's clock, so their stamps hold."""
    past = time.time() - 3600
    for path in paths:
        os.utime(path, (past, past))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    aged(path)
    return path


def test_a_file_is_parsed_again_only_when_it_changed(tmp_path: Path) -> None:
    files = YamlFiles()
    path = write(tmp_path / "a.yaml", "name: first\n")
    value, lines = files.read(path)
    assert files.read(path)[0] is value and files.parses(path) == 1
    assert lines.of("name") == 1
    write(path, "name: second one\n")
    assert files.read(path)[0] == {"name": "second one"} and files.parses(path) == 2
    assert files.read(tmp_path / "." / "a.yaml")[0] == {"name": "second one"} and files.parses(path) == 2


def test_a_file_that_does_not_parse_keeps_its_error_until_it_changes(tmp_path: Path) -> None:
    files = YamlFiles()
    path = write(tmp_path / "bad.yaml", "a: 1\na: 2\n")
    for _ in range(2):
        with pytest.raises(ConfigError) as caught:
            files.read(path)
        assert str(caught.value) == f"{path}:2: a: key given twice (first on line 1)"
    assert files.parses(path) == 1
    write(path, "a: 1\n")
    assert files.read(path)[0] == {"a": 1} and files.parses(path) == 2


def test_a_change_within_the_clocks_tick_is_not_missed(tmp_path: Path) -> None:
    """Rewritten in place, same size, same time to the nanosecond: the stamp is the same, the text is not."""
    files = YamlFiles()
    path = tmp_path / "racy.yaml"
    path.write_text("value: 1\n", encoding="utf-8")  # just written: within the reader's recent window
    before = path.stat()
    assert files.read(path)[0] == {"value": 1}
    path.write_text("value: 2\n", encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_ino == before.st_ino
    assert files.read(path)[0] == {"value": 2}


def test_a_missing_file_is_named_and_not_kept(tmp_path: Path) -> None:
    files = YamlFiles()
    with pytest.raises(ConfigError, match=r"gone\.yaml: cannot read: "):
        files.read(tmp_path / "gone.yaml")
    assert files.parses(tmp_path / "gone.yaml") == 0


def test_the_least_recently_read_files_go_first_when_room_runs_out(tmp_path: Path) -> None:
    files = YamlFiles(max_kept_bytes=3 * 1024 + 60)  # three small files fit, a fourth does not
    paths = [write(tmp_path / f"{n}.yaml", f"n: {n}\n") for n in range(4)]
    for path in paths[:3]:
        files.read(path)
    files.read(paths[0])  # read again: now the most recent
    files.read(paths[3])
    assert [files.parses(p) for p in paths] == [1, 0, 1, 1]  # the second, least recently read, went


def project(root: Path) -> dict[str, Path]:
    """kernel.yaml, a template, a tool and a tool whose YAML does not load, all dated an hour back."""
    tools = root / "config" / "scripts" / "tools"
    return {
        "kernel": write(
            root / "config" / "kernel.yaml",
            "scripts: {tools: [config/scripts/tools], hooks: [config/scripts/hooks], builtins: false}\n",
        ),
        "template": write(
            root / "config" / "templates" / "helper.yaml", "name: helper\ninstructions: x\ntools: [echo]\n"
        ),
        "tool": write(tools / "echo.yaml", "kind: script_tool\nname: echo\nscript: echo.js\n"),
        "script": write(tools / "echo.js", "function run(args) { return 'ok'; }\n"),
        "broken": write(
            tools / "broken.yaml", "kind: script_tool\nname: broken\nscript: echo.js\nmax_operations: 0\n"
        ),
        "hooks": (root / "config" / "scripts" / "hooks"),
    }


def test_the_kernel_the_registry_and_the_cli_parse_each_file_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = project(tmp_path)
    files["hooks"].mkdir(parents=True)
    yaml_files = [files[k] for k in ("kernel", "template", "tool", "broken")]
    with Kernel(load_kernel_config(files["kernel"])) as kernel:
        for _ in range(2):
            assert [t.name for t in kernel.list_templates()] == ["helper"]
            assert [p.path.name for p in kernel.problems()] == ["broken.yaml"]
            with pytest.raises(ConfigError, match="tool 'broken' is not available"):
                kernel.tool("broken")  # the registry reads the broken file for the name it meant to declare
            assert kernel.load_spec(files["tool"]).name == "echo"  # `agentkernel tool run PATH.yaml`
        assert check(files["kernel"], as_json=False) == 1  # `agentkernel check`: a kernel of its own
        assert "broken.yaml:4: max_operations" in capsys.readouterr().out
        assert config_problem(ConfigError(files["kernel"], "scripts.tools: why")).line == 1
        assert [YAML_FILES.parses(path) for path in yaml_files] == [1, 1, 1, 1]
        write(files["template"], "name: helper\ninstructions: a new text\ntools: [echo]\n")
        assert kernel.list_templates()[0].instructions == "a new text"
        assert [YAML_FILES.parses(path) for path in yaml_files] == [1, 2, 1, 1]
