"""The layers hold (docs/architecture.md, .importlinter): no layer imports upward, in any form.

import-linter reads the source (it imports nothing), so an import inside a
function counts, and so does one under `TYPE_CHECKING` (the contracts keep
its default, `exclude_type_checking_imports = False`). The second test plants
each kind of upward import in a copy of the package and shows the contracts
catch it: a contract that passes only because it looks at less would pass
there too.
"""

from __future__ import annotations

import configparser
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import agentkernel
from tests.conftest import REPO

CONTRACTS = REPO / ".importlinter"
LINT = Path(sys.executable).parent / "lint-imports"


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
