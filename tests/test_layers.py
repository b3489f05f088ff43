"""The layers hold (docs/architecture.md, .importlinter): no layer imports upward, in any form.

import-linter reads the source (it imports nothing), so an import inside a
function counts, and so does one under `TYPE_CHECKING` (the contracts keep
its default, `exclude_type_checking_imports = False`). The second test plants
each kind of upward import in a copy of the package and shows the contracts
catch it: a contract that passes only because it looks at less would pass
there too.

And the tests mirror the package: a test module sits in the folder of
tests/ that has the path of the folder of src/agentkernel/ it tests, so a
reader finds a module's tests where the module is, and a test dropped
elsewhere fails saying where it belongs.
"""

from __future__ import annotations

import ast
import configparser
import os
import pkgutil
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import agentkernel
from tests.conftest import REPO

CONTRACTS = REPO / ".importlinter"
LINT = Path(sys.executable).parent / "lint-imports"
PACKAGE = Path(agentkernel.__file__).parent

# Tests of the package as a whole sit at the root of tests/, beside the tests of the modules at the
# package root (test_kernel.py for kernel.py); every other test sits where its module is.
WHOLE_PACKAGE = {
    "test_benchmarks.py",  # every benchmark's --smoke
    "test_docs.py",  # the guides' examples, executed
    "test_docs_links.py",  # every link of the docs
    "test_examples.py",  # the shipped example tools
    "test_layers.py",  # the layers, and this layout
    "test_quality.py",  # ruff, mypy, the public surface
    "test_shipped_config.py",  # the shipped config/ through the command line
}


def lint(package_parent: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the `agentkernel` package found first on the path from `package_parent`."""
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo", str(CONTRACTS)],
        cwd=package_parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_contracts_hold_on_the_tree() -> None:
    done = lint(REPO / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 4 kept, 0 broken." in done.stdout, done.stdout


def plant(path: Path, after: str, lines: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert after in text, f"{path}: {after!r} not found"
    path.write_text(text.replace(after, after + lines, 1), encoding="utf-8")


def test_an_upward_import_in_a_function_or_under_type_checking_breaks_the_contracts(tmp_path: Path) -> None:
    copy = tmp_path / "agentkernel"
    shutil.copytree(Path(agentkernel.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    # services may not reach the agent runtime, not even from inside a function...
    plant(
        copy / "services" / "scratch.py",
        "from __future__ import annotations\n",
        "\n\ndef _planted() -> object:\n    from agentkernel.agent import loop\n\n    return loop\n",
    )
    # ...nor the dispatch path for an annotation only
    plant(
        copy / "helpers" / "cron.py",
        "from __future__ import annotations\n",
        "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from agentkernel.tools.dispatch import Dispatcher\n",
    )
    # the Rhai interpreter imports nothing of the kernel, however small
    plant(
        copy / "rhai" / "runtime" / "values.py",
        "from __future__ import annotations\n",
        "\n\ndef _planted() -> object:\n    from agentkernel.util import short_text\n\n"
        "    return short_text\n",
    )
    # the interpreter's first stage knows none of the stages after it
    plant(
        copy / "rhai" / "syntax" / "lexer.py",
        "from __future__ import annotations\n",
        "\n\ndef _planted() -> object:\n    from agentkernel.rhai.runtime import values\n\n"
        "    return values\n",
    )
    # an engine adapter knows the contract, not the host
    plant(
        copy / "scripting" / "js" / "hints.py",
        "from __future__ import annotations\n",
        "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from agentkernel.scripting.host import ScriptHost\n",
    )
    done = lint(tmp_path)
    assert done.returncode != 0, done.stdout
    assert "Contracts: 0 kept, 4 broken." in done.stdout, done.stdout
    for broken in (
        "agentkernel.services is not allowed to import agentkernel.agent",
        "agentkernel.services.scratch -> agentkernel.agent.loop",
        "agentkernel.helpers is not allowed to import agentkernel.tools",
        "agentkernel.helpers.cron -> agentkernel.tools.dispatch",
        "agentkernel.rhai.runtime.values -> agentkernel.util.short_text",
        "agentkernel.scripting.js.hints -> agentkernel.scripting.host",
        "agentkernel.rhai.syntax.lexer -> agentkernel.rhai.runtime.values",
    ):
        assert broken in done.stdout, f"{broken!r} not reported:\n{done.stdout}"


def test_the_rhai_contract_forbids_every_other_part_of_the_package() -> None:
    """A new top-level unit is forbidden to the interpreter too: the list names every one."""
    contracts = configparser.ConfigParser()
    contracts.read(CONTRACTS, encoding="utf-8")
    forbidden = set(contracts["importlinter:contract:rhai"]["forbidden_modules"].split())
    units = {f"agentkernel.{m.name}" for m in pkgutil.iter_modules(agentkernel.__path__)}
    assert forbidden == units - {"agentkernel.__main__", "agentkernel.rhai"}


def test_every_folder_of_the_package_is_a_package() -> None:
    """import-linter reads packages only: a folder of modules without `__init__.py` would go unchecked."""
    root = Path(agentkernel.__file__).parent
    folders = {p.parent for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    assert [str(f.relative_to(root)) for f in sorted(folders) if not (f / "__init__.py").is_file()] == []


def _imported_folders(test: Path, package: Path) -> Counter[str]:
    """How often `test` imports from each folder of the package ("" for its root), read from the source."""
    folders: Counter[str] = Counter()
    for node in ast.walk(ast.parse(test.read_text(encoding="utf-8"))):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        for parts in (name.split(".") for name in names):
            if parts[0] == "agentkernel" and len(parts) > 1:
                below = package.joinpath(*parts[1:])
                folder = below if below.is_dir() else below.parent
                folders[folder.relative_to(package).as_posix().strip(".")] += 1
    return folders


def belongs(test: Path, package: Path) -> str:
    """Where `test` goes: beside the module (or in the folder) its name names, else where it imports most."""
    stem = test.stem.removeprefix("test_")
    named = [p for p in package.rglob(stem) if p.is_dir()] + [p.parent for p in package.rglob(f"{stem}.py")]
    named = sorted((p for p in named if "__pycache__" not in p.parts), key=lambda p: (len(p.parts), p))
    if named:
        folder = named[0].relative_to(package).as_posix().strip(".")
    else:
        imported = _imported_folders(test, package).most_common(1)
        folder = imported[0][0] if imported else "<the folder of the module it tests>"
    return "/".join(part for part in ("tests", folder, test.name) if part)


def misplaced(tests: Path, package: Path) -> list[str]:
    """What is wrong with where each test module of `tests` sits, as the mirror of `package` sees it."""
    problems = []
    for test in sorted(tests.rglob("test_*.py")):
        folder = test.parent.relative_to(tests)
        shown = test.relative_to(tests.parent).as_posix()
        if not (test.parent / "__init__.py").is_file():
            problems.append(f"{shown}: its folder has no __init__.py (the suite imports tests as packages)")
        if not folder.parts:
            module = package / f"{test.stem.removeprefix('test_')}.py"
            if test.name not in WHOLE_PACKAGE and not module.is_file():
                problems.append(
                    f"{shown}: the root of tests/ holds only tests of a module at the package root and of"
                    f" the whole package (WHOLE_PACKAGE); it belongs in {belongs(test, package)}"
                )
        elif not (package / folder / "__init__.py").is_file():  # a folder left with only __pycache__ is none
            problems.append(
                f"{shown}: there is no src/agentkernel/{folder.as_posix()}/ for it to mirror;"
                f" it belongs in {belongs(test, package)}"
            )
    return problems


def test_the_tests_mirror_the_package() -> None:
    assert misplaced(REPO / "tests", PACKAGE) == []


def test_a_test_dropped_outside_the_mirror_is_told_where_it_belongs(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    files = {
        "test_kernel.py": "",  # kernel.py is at the package root, and so are its tests
        "test_docs.py": "",  # a test of the whole package
        "util/test_fair_pool.py": "",  # where it belongs
        "test_fair_pool.py": "",  # named after util/fair_pool.py
        "test_builtins.py": "",  # named after the builtins/ package
        "test_hostile.py": (  # named after nothing: what it imports says
            "from agentkernel.scripting.host import ScriptHost\nimport agentkernel.scripting.js.engine\n"
            "from agentkernel import Kernel\nfrom agentkernel.scripting import contract\n"
        ),
        "mcp_bridge/test_consume.py": "from agentkernel.tools.sources.mcp import outside\n",
        "helpers/test_state.py": "",  # a folder without __init__.py
    }
    for name, text in files.items():
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text(text, encoding="utf-8")
    for folder in ("", "util", "mcp_bridge"):
        (tests / folder / "__init__.py").write_text("", encoding="utf-8")
    root_rule = "the root of tests/ holds only tests of a module at the package root and of the whole package"
    assert misplaced(tests, PACKAGE) == [
        "tests/helpers/test_state.py: its folder has no __init__.py (the suite imports tests as packages)",
        "tests/mcp_bridge/test_consume.py: there is no src/agentkernel/mcp_bridge/ for it to mirror;"
        " it belongs in tests/tools/sources/mcp/test_consume.py",
        f"tests/test_builtins.py: {root_rule} (WHOLE_PACKAGE); it belongs in tests/builtins/test_builtins.py",
        f"tests/test_fair_pool.py: {root_rule} (WHOLE_PACKAGE); it belongs in tests/util/test_fair_pool.py",
        f"tests/test_hostile.py: {root_rule} (WHOLE_PACKAGE); it belongs in tests/scripting/test_hostile.py",
    ]
