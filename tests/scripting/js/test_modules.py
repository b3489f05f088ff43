"""ES module imports (S1.1) are confined to the script's own folder and below (issue 9).

The loader used to read any `.js`/`.mjs` file QuickJS named, so a tool could
import a file anywhere the kernel could read. These are the escapes: `..`,
an absolute path, a symbolic link out (and in), a file too big or not a
module, both as a static `import` (the tool fails to load) and as a dynamic
`import()` from a classic script (the call fails).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.scripting.contract import MAX_SCRIPT_SIZE
from tests.conftest import ToolFactory

ONLY_HERE = "modules are imported only from the script's own folder and below"


@pytest.fixture
def secret(project: Path) -> Path:
    """A module outside the tools folder that an attacker wants to import."""
    path = project / "data" / "keys.mjs"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("export const x = 'the secret';\n")
    return path


def static_import(kernel: Kernel, make_tool: ToolFactory, name: str, spec: str) -> str:
    """The result of a tool that imports `spec` at its top: its content (the value or the error)."""
    name = f"static_{name}"  # never the name of a module the test imports
    make_tool(name, f"import {{ x }} from {spec!r};\nexport function run() {{ return x; }}\n", ext=".mjs")
    return kernel.run_tool(name, {}).content


def dynamic_import(kernel: Kernel, make_tool: ToolFactory, name: str, spec: str) -> str:
    """The same through `import()` in a classic script, which loads the module at call time."""
    name = f"dynamic_{name}"
    make_tool(name, f"async function run() {{ return (await import({spec!r})).x; }}\n", ext=".js")
    return kernel.run_tool(name, {}).content


IMPORTERS = [static_import, dynamic_import]


@pytest.mark.parametrize("load", IMPORTERS)
def test_modules_in_the_folder_and_below_still_import(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path, load: object
) -> None:
    (tools_dir / "lib").mkdir()
    (tools_dir / "lib" / "ok.mjs").write_text("export { x } from '../util.mjs';\n")
    (tools_dir / "util.mjs").write_text("export const x = 'fine';\n")
    assert callable(load)
    assert load(kernel, make_tool, "deep", "./lib/ok.mjs") == "fine"  # lib/ok.mjs climbs back to util.mjs
    assert load(kernel, make_tool, "inside", "./lib/../util.mjs") == "fine"
    assert load(kernel, make_tool, "absolute_inside", str(tools_dir / "util.mjs")) == "fine"


@pytest.mark.parametrize("load", IMPORTERS)
def test_dotdot_out_of_the_folder_is_refused(
    kernel: Kernel, make_tool: ToolFactory, secret: Path, load: object
) -> None:
    assert callable(load)
    for i, spec in enumerate(["../../../data/keys.mjs", "./lib/../../../../data/keys.mjs"]):
        content = load(kernel, make_tool, f"dotdot{i}", spec)
        assert ONLY_HERE in content and "the secret" not in content


@pytest.mark.parametrize("load", IMPORTERS)
def test_an_absolute_path_elsewhere_is_refused(
    kernel: Kernel, make_tool: ToolFactory, secret: Path, load: object
) -> None:
    assert callable(load)
    content = load(kernel, make_tool, "absolute", str(secret))
    assert ONLY_HERE in content and "the secret" not in content


@pytest.mark.parametrize("load", IMPORTERS)
def test_a_symbolic_link_is_never_followed(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path, secret: Path, load: object
) -> None:
    assert callable(load)
    (tools_dir / "keys.mjs").symlink_to(secret)
    (tools_dir / "data").symlink_to(secret.parent)
    (tools_dir / "util.mjs").write_text("export const x = 'fine';\n")
    (tools_dir / "alias.mjs").symlink_to(tools_dir / "util.mjs")  # even a link that stays inside
    for i, (spec, where) in enumerate(
        [("./keys.mjs", "keys.mjs"), ("./data/keys.mjs", "data"), ("./alias.mjs", "alias.mjs")]
    ):
        content = load(kernel, make_tool, f"link{i}", spec)
        assert f"{where!r} is a symbolic link, and reads never follow links" in content, content
        assert "the secret" not in content


@pytest.mark.parametrize("load", IMPORTERS)
def test_what_is_not_a_small_module_is_refused(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path, load: object
) -> None:
    assert callable(load)
    (tools_dir / "big.mjs").write_text("//" + "x" * MAX_SCRIPT_SIZE)
    assert f"module is {MAX_SCRIPT_SIZE + 2:,} bytes, more than {MAX_SCRIPT_SIZE:,}" in load(
        kernel, make_tool, "big", "./big.mjs"
    )
    (tools_dir / "notes.txt").write_text("export const x = 1;\n")
    assert "only .js and .mjs files can be imported" in load(kernel, make_tool, "text", "./notes.txt")
    (tools_dir / "folder.mjs").mkdir()
    assert "not a regular file" in load(kernel, make_tool, "folder", "./folder.mjs")
    (tools_dir / "latin1.mjs").write_bytes(b"export const x = '\xe9';\n")
    assert "not UTF-8 text" in load(kernel, make_tool, "latin1", "./latin1.mjs")
    assert "module '" in load(kernel, make_tool, "missing", "./missing.mjs")  # QuickJS's own "not found"


def test_a_refused_import_fails_its_tool_alone(kernel: Kernel, make_tool: ToolFactory, secret: Path) -> None:
    static_import(kernel, make_tool, "bad", "../../../data/keys.mjs")
    make_tool("good", "export function run() { return 'still here'; }", ext=".mjs")
    assert kernel.run_tool("good", {}).content == "still here"
    problems = [str(p) for p in kernel.problems()]
    assert len(problems) == 1 and "static_bad.yaml" in problems[0] and ONLY_HERE in problems[0]
