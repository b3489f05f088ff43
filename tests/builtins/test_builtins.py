"""Built-in tools and hooks: loaded after the project's, named clashes, `overrides: builtin`, python_tool.

Issue 15 §1. The package's folders are replaced here by temporary ones
(`builtin_folders`), so each rule is tested on files the test controls; the
shipped built-ins have their own tests.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel import Kernel, builtins
from agentkernel.cli.main import main
from agentkernel.config import load_kernel_config, load_script_spec
from agentkernel.errors import ConfigError
from tests.conftest import BUILTINS_ON, write_kernel_yaml

TOOL_JS = "function run(args) { return '{said}'; }\n"
MODULE = "agentkernel.builtins.test_only_tool"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def js_tool(folder: Path, name: str, said: str, extra: str = "") -> Path:
    write(folder / f"{name}.js", TOOL_JS.replace("{said}", said))
    return write(folder / f"{name}.yaml", f"kind: script_tool\nname: {name}\nscript: {name}.js\n{extra}")


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Temporary built-in folders in place of the package's: tools/ and hooks/ under the returned folder."""
    folder = tmp_path / "package"
    (folder / "tools").mkdir(parents=True)
    (folder / "hooks").mkdir(parents=True)
    monkeypatch.setattr(builtins, "FOLDERS", (folder / "tools", folder / "hooks"))
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write_kernel_yaml(root, BUILTINS_ON)
    return root


def open_kernel(project: Path) -> Kernel:
    return Kernel(load_kernel_config(project / "config" / "kernel.yaml"))


def said(kernel: Kernel, name: str) -> str:
    result = kernel.run_tool(name, {})
    assert result.success, result.error
    return str(result.content)


def problems(kernel: Kernel) -> list[str]:
    return [f"{p.path.name}:{p.line}: {p.reason}" for p in kernel.problems(templates=False)]


def test_a_builtin_loads_after_the_project_with_its_origin(shipped: Path, project: Path) -> None:
    js_tool(shipped / "tools", "greeter", "from the package")
    js_tool(project / "config/scripts/tools", "mine", "from the project")
    with open_kernel(project) as kernel:
        origins = {spec.name: spec.origin for spec in kernel.list_tools()}
        assert origins == {"greeter": "builtin", "mine": "project"}
        assert said(kernel, "greeter") == "from the package"
        assert problems(kernel) == []


def test_scripts_builtins_false_leaves_them_out(shipped: Path, tmp_path: Path) -> None:
    js_tool(shipped / "tools", "greeter", "from the package")
    root = tmp_path / "off"
    write_kernel_yaml(root, "scripts:\n  builtins: false\n")
    with open_kernel(root) as kernel:
        assert kernel.list_tools() == []
        assert not kernel.run_tool("greeter", {}).success


def test_a_project_tool_with_a_builtins_name_is_refused_naming_both(shipped: Path, project: Path) -> None:
    js_tool(shipped / "tools", "greeter", "from the package")
    js_tool(project / "config/scripts/tools", "greeter", "from the project")
    with open_kernel(project) as kernel:
        assert problems(kernel) == [
            "greeter.yaml:2: name: 'greeter' is also a built-in tool"
            " (agentkernel/builtins/tools/greeter.yaml); rename yours,"
            " or add `overrides: builtin` to this file to replace the built-in"
        ]
        # neither is served: the name must not quietly mean one of the two
        result = kernel.run_tool("greeter", {})
        assert not result.success
        assert kernel.list_tools() == []


def test_overrides_builtin_serves_the_projects_file_alone(shipped: Path, project: Path) -> None:
    js_tool(shipped / "tools", "greeter", "from the package")
    js_tool(project / "config/scripts/tools", "greeter", "from the project", "overrides: builtin\n")
    with open_kernel(project) as kernel:
        assert problems(kernel) == []
        assert said(kernel, "greeter") == "from the project"
        assert [(s.name, s.origin) for s in kernel.list_tools()] == [("greeter", "project")]


def test_overrides_builtin_without_such_a_builtin_is_refused(shipped: Path, project: Path) -> None:
    js_tool(project / "config/scripts/tools", "greeter", "from the project", "overrides: builtin\n")
    with open_kernel(project) as kernel:
        assert problems(kernel) == [
            "greeter.yaml:4: overrides: builtin, but there is no built-in tool named 'greeter' to replace"
        ]
        assert not kernel.run_tool("greeter", {}).success


def test_a_hook_clashes_with_a_builtin_hook_but_not_with_a_tool(shipped: Path, project: Path) -> None:
    js_tool(shipped / "tools", "audit", "a tool")
    write(shipped / "hooks/audit.rhai", "fn after_turn(ctx, q, a) { () }\n")
    write(shipped / "hooks/audit.yaml", "kind: script_hook\nname: audit\nscript: audit.rhai\n")
    write(project / "config/scripts/hooks/audit.rhai", "fn after_turn(ctx, q, a) { () }\n")
    hook = "kind: script_hook\nname: audit\nscript: audit.rhai\n"
    write(project / "config/scripts/hooks/audit.yaml", hook)
    with open_kernel(project) as kernel:
        assert [p.split(";")[0] for p in problems(kernel)] == [
            "audit.yaml:2: name: 'audit' is also a built-in hook (agentkernel/builtins/hooks/audit.yaml)"
        ]
        assert [s.name for s in kernel.list_tools()] == ["audit"]  # the tool of that name is another matter
    write(project / "config/scripts/hooks/audit.yaml", hook + "overrides: builtin\n")
    with open_kernel(project) as kernel:
        assert problems(kernel) == []
        assert [(h.name, h.origin) for h in kernel.list_hooks()] == [("audit", "project")]


def test_tool_list_and_check_show_the_origin(
    shipped: Path, project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    js_tool(shipped / "tools", "greeter", "from the package")
    js_tool(project / "config/scripts/tools", "mine", "from the project")
    monkeypatch.chdir(project)
    assert main(["tool", "list"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "greeter  builtin  greeter.js",
        "mine     project  mine.js",
    ]
    assert main(["tool", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(t["name"], t["origin"]) for t in listed["tools"]] == [
        ("greeter", "builtin"),
        ("mine", "project"),
    ]
    assert main(["check"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "ok: 1 tool, 0 hooks, 0 templates; built-in: 1 tool, 0 hooks"
    ]


# -- python_tool ---------------------------------------------------------------------------------------------

PYTHON_TOOL = """
from agentkernel.errors import ScriptError

def shout(args, config, call, worker):
    if args.get("fail"):
        raise ScriptError("shout: nothing to shout")
    loud = worker(str.upper, args["text"])  # in a worker process, as a built-in's heavy part is
    return {"content": loud + config.get("suffix", ""), "user": call.caller.user_id}
"""


@pytest.fixture
def python_module(tmp_path: Path) -> Iterator[Path]:
    """A module imported as agentkernel.builtins.test_only_tool, as a built-in's would be."""
    path = write(tmp_path / "test_only_tool.py", PYTHON_TOOL)
    spec = importlib.util.spec_from_file_location(MODULE, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[MODULE] = module
    yield path
    del sys.modules[MODULE]


def python_yaml(folder: Path, function: str = "test_only_tool:shout") -> Path:
    return write(
        folder / "shout.yaml",
        f"""\
        kind: python_tool
        name: shout
        function: {function}
        suffix: "!"
        parameters:
          type: object
          required: [text]
          properties:
            text: {{type: string}}
            fail: {{type: boolean}}
        """,
    )


def test_a_python_tool_runs_through_the_one_dispatch_path(
    shipped: Path, project: Path, python_module: Path
) -> None:
    python_yaml(shipped / "tools")
    with open_kernel(project) as kernel:
        [spec] = kernel.list_tools()
        assert (spec.name, spec.origin, spec.script) == ("shout", "builtin", python_module.resolve())
        caller = kernel.caller(user_id="alice", session_id="s1")
        result = kernel.run_tool("shout", {"text": "привет"}, caller)
        assert result.success and result.content == "ПРИВЕТ!"
        refused = kernel.run_tool("shout", {"text": 5}, caller)  # the same argument check as scripts
        assert not refused.success and "invalid arguments for shout" in str(refused.error)
        failed = kernel.run_tool("shout", {"text": "x", "fail": True}, caller)
        assert not failed.success and failed.error == "shout: nothing to shout"


def test_a_python_tool_in_a_project_folder_is_refused(project: Path) -> None:
    path = python_yaml(project / "config/scripts/tools")
    with pytest.raises(
        ConfigError, match="python_tool' runs Python inside the kernel and is only for its built-in"
    ):
        load_script_spec(path)
    with open_kernel(project) as kernel:
        assert [p.split(":")[0] for p in problems(kernel)] == ["shout.yaml"]


def test_a_projects_copy_of_a_python_tool_with_overrides_builtin_changes_its_settings(
    shipped: Path, project: Path, python_module: Path
) -> None:
    """S2.1: a team may change a built-in python_tool's settings (fill_contract's templates_dir, …)."""
    python_yaml(shipped / "tools")
    copy = python_yaml(project / "config/scripts/tools")
    copy.write_text(copy.read_text().replace('suffix: "!"', 'suffix: "?!"\noverrides: builtin'))
    with open_kernel(project) as kernel:
        [spec] = kernel.list_tools()
        assert (spec.origin, problems(kernel)) == ("project", [])
        assert kernel.run_tool("shout", {"text": "эй"}).content == "ЭЙ?!"


@pytest.mark.parametrize(
    ("builtin", "reason"),
    [
        (
            "python",
            "shout.yaml:3: function: 'test_only_tool:whisper': a project's python_tool may only change the"
            " settings of the built-in 'shout', whose function is 'test_only_tool:shout'",
        ),
        (
            "script",
            "shout.yaml:3: function: 'test_only_tool:whisper': the built-in 'shout' is not a python_tool;"
            " write a script_tool",
        ),
    ],
)
def test_an_overriding_python_tool_may_not_call_another_function(
    shipped: Path, project: Path, python_module: Path, builtin: str, reason: str
) -> None:
    """Else a project YAML could reach any callable of the package: neither file is served."""
    python_module.write_text(PYTHON_TOOL + "\nwhisper = shout\n")
    sys.modules[MODULE].whisper = sys.modules[MODULE].shout  # type: ignore[attr-defined]
    if builtin == "python":
        python_yaml(shipped / "tools")
    else:
        js_tool(shipped / "tools", "shout", "built-in")
    copy = python_yaml(project / "config/scripts/tools", "test_only_tool:whisper")
    copy.write_text(copy.read_text() + "overrides: builtin\n")
    with open_kernel(project) as kernel:
        assert problems(kernel) == [reason]
        assert kernel.list_tools() == []


@pytest.mark.parametrize(
    ("function", "reason"),
    [
        ("os:system", "function: no module 'agentkernel.builtins.os'"),
        ("nothing_here:run", "function: no module 'agentkernel.builtins.nothing_here'"),
        ("../evil:run", "does not match"),
        ("agentkernel.cli:main", "no module 'agentkernel.builtins.agentkernel.cli'"),
    ],
)
def test_a_python_tools_function_is_only_ever_below_the_builtins_package(
    shipped: Path, project: Path, function: str, reason: str
) -> None:
    python_yaml(shipped / "tools", function)
    with open_kernel(project) as kernel:
        [problem] = problems(kernel)
        assert reason in problem
        assert kernel.list_tools() == []


def test_the_package_python_tools_are_found_in_is_the_builtins_package() -> None:
    """config/python_package.py names it for loading a YAML, which never imports the built-ins."""
    assert builtins.__name__ == builtins.PACKAGE


def test_a_python_tool_whose_function_is_missing_is_a_load_problem(
    shipped: Path, project: Path, python_module: Path
) -> None:
    python_yaml(shipped / "tools", "test_only_tool:whisper")
    with open_kernel(project) as kernel:
        assert problems(kernel) == [
            "shout.yaml:3: function 'test_only_tool:whisper': agentkernel.builtins.test_only_tool"
            " has no function 'whisper'"
        ]
