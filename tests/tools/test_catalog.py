"""The script catalog's listings between edits (S1.4, S2.4): a watch of the folders lets a listing skip
its scan while nothing changed, and never hides a change made before the listing starts."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentkernel.config import ToolSpec
from agentkernel.helpers import default_helper_table
from agentkernel.scripting.host import ScriptHost
from agentkernel.tools import catalog as catalog_module
from agentkernel.tools.catalog import ScriptCatalog
from agentkernel.util.file_stamps import Stamp, stamp_of
from agentkernel.util.folder_watch import RESCAN_SECS

TOOL_YAML = "kind: script_tool\nname: {name}\nscript: {script}\ndescription: {description}\n"


def write(path: Path, text: str) -> None:
    """Write `text` so the file's stamp surely changes (a new time even within the clock's grain)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    before = path.stat().st_mtime_ns if path.exists() else None
    path.write_text(text, encoding="utf-8")
    if before is not None and path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def tool(folder: Path, name: str, description: str = "v1", script: str | None = None) -> None:
    write(
        folder / f"{name}.yaml",
        TOOL_YAML.format(name=name, script=script or f"{name}.js", description=description),
    )
    if script is None:
        write(folder / f"{name}.js", "function run() { return 1; }")


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[ScriptCatalog]:
    folder = tmp_path / "tools"
    tool(folder, "alpha")
    catalog = ScriptCatalog([folder], ScriptHost(default_helper_table()))
    for _ in range(4):  # past the first scans: from here the watch vouches for the folders
        assert list(catalog.tools()) == ["alpha"]
    yield catalog
    catalog.close()


def described(catalog: ScriptCatalog) -> dict[str, str | None]:
    return {name: spec.description for name, spec in catalog.tools().items()}


def test_an_edit_between_two_listings_is_in_the_second(catalog: ScriptCatalog, tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    tool(folder, "alpha", "v2")
    assert described(catalog) == {"alpha": "v2"}
    assert described(catalog) == {"alpha": "v2"}
    write(folder / "alpha.js", "function run( {")  # its script broken: the tool is not offered
    assert described(catalog) == {}
    write(folder / "alpha.js", "function run() { return 2; }")
    assert described(catalog) == {"alpha": "v2"}


def test_files_and_folders_added_or_removed_are_seen_at_once(catalog: ScriptCatalog, tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    tool(folder / "more" / "deeper", "beta")  # a new folder, and one in it
    assert described(catalog) == {"alpha": "v1", "beta": "v1"}
    tool(folder / "more" / "deeper", "beta", "v2")  # in a folder the watch has just taken up
    assert described(catalog) == {"alpha": "v1", "beta": "v2"}
    tool(folder / "more" / "deeper", "beta", "v3")
    assert described(catalog) == {"alpha": "v1", "beta": "v3"}
    tool(folder / "more" / "other", "delta")  # a folder made in one that holds no file of its own
    assert described(catalog) == {"alpha": "v1", "beta": "v3", "delta": "v1"}
    (folder / "more" / "other" / "delta.yaml").unlink()
    (folder / "more").rename(folder / "moved")
    assert described(catalog) == {"alpha": "v1", "beta": "v3"}
    tool(folder / "moved" / "deeper", "beta", "v4")  # the moved folder is still watched
    assert described(catalog) == {"alpha": "v1", "beta": "v4"}
    (folder / "moved" / "deeper" / "beta.yaml").unlink()
    assert described(catalog) == {"alpha": "v1"}


def test_a_script_outside_the_folders_is_watched_too(catalog: ScriptCatalog, tmp_path: Path) -> None:
    library = tmp_path / "lib" / "gamma.js"
    write(library, "function run() { return 3; }")
    tool(tmp_path / "tools", "gamma", script="../lib/gamma.js")
    assert described(catalog) == {"alpha": "v1", "gamma": "v1"}
    assert described(catalog) == {"alpha": "v1", "gamma": "v1"}
    write(library, "function run( {")
    assert described(catalog) == {"alpha": "v1"}


def test_a_closed_catalog_still_sees_edits(catalog: ScriptCatalog, tmp_path: Path) -> None:
    catalog.close()
    tool(tmp_path / "tools", "alpha", "v2")
    assert described(catalog) == {"alpha": "v2"}


def test_a_folder_made_after_the_catalog_is_seen(tmp_path: Path) -> None:
    later = tmp_path / "later"
    catalog = ScriptCatalog([tmp_path / "tools", later], ScriptHost(default_helper_table()))
    tool(tmp_path / "tools", "alpha")
    for _ in range(4):
        assert list(catalog.tools()) == ["alpha"]
    tool(later, "beta")
    assert list(catalog.tools()) == ["alpha", "beta"]
    catalog.close()


def test_tool_specs_are_what_the_files_say(catalog: ScriptCatalog) -> None:
    spec = catalog.tools()["alpha"]
    assert isinstance(spec, ToolSpec) and spec.script.name == "alpha.js"


def described_tool(catalog: ScriptCatalog, name: str) -> str | None:
    spec = catalog.tool(name)
    return None if spec is None else spec.description


@pytest.fixture
def stats(monkeypatch: pytest.MonkeyPatch) -> list[Path | None]:
    """The files the catalog asks the file system about, in order (the real `stat_of` answers)."""
    asked: list[Path | None] = []

    def counted(path: Path | None) -> Stamp:
        asked.append(path)
        return stamp_of(path)

    monkeypatch.setattr(catalog_module, "stamp_of", counted)
    return asked


def test_a_lookup_the_watch_vouches_for_asks_no_file(
    catalog: ScriptCatalog, stats: list[Path | None]
) -> None:
    for _ in range(3):
        assert described_tool(catalog, "alpha") == "v1"
    assert stats == []


def test_an_edit_is_seen_by_the_next_lookup(
    catalog: ScriptCatalog, tmp_path: Path, stats: list[Path | None]
) -> None:
    folder = tmp_path / "tools"
    assert described_tool(catalog, "alpha") == "v1"
    tool(folder, "alpha", "v2")
    assert described_tool(catalog, "alpha") == "v2"
    write(folder / "alpha.js", "function run( {")  # its script broken: the tool is not offered
    assert catalog.tool("alpha") is None
    write(folder / "alpha.js", "function run() { return 2; }")
    assert described_tool(catalog, "alpha") == "v2"
    tool(folder, "beta")  # another file changed: the lookup asks its own two files, and scans no more
    asked = len(stats)
    assert described_tool(catalog, "alpha") == "v2"
    assert stats[asked:] == [folder / "alpha.yaml", folder / "alpha.js"]


def test_a_change_the_watch_cannot_see_is_seen_after_rescan_secs(
    catalog: ScriptCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit through a hard link in a folder nobody watches reaches no watch (util/folder_watch.py):
    lookups find it once the last scan is RESCAN_SECS old, by when they scan again."""
    linked = tmp_path / "elsewhere" / "alpha.yaml"
    linked.parent.mkdir()
    os.link(tmp_path / "tools" / "alpha.yaml", linked)
    assert described_tool(catalog, "alpha") == "v1"
    write(linked, TOOL_YAML.format(name="alpha", script="alpha.js", description="v2"))
    assert described_tool(catalog, "alpha") == "v1"  # the watch vouched, and saw nothing
    later = time.monotonic() + RESCAN_SECS
    monkeypatch.setattr(catalog_module, "time", SimpleNamespace(monotonic=lambda: later))
    assert described_tool(catalog, "alpha") == "v2"


def test_with_a_folder_missing_a_lookup_asks_only_its_own_files(
    tmp_path: Path, stats: list[Path | None]
) -> None:
    """A configured folder that does not exist cannot be watched: lookups ask their two files, and
    do not scan every time."""
    folder = tmp_path / "tools"
    tool(folder, "alpha")
    catalog = ScriptCatalog([folder, tmp_path / "missing"], ScriptHost(default_helper_table()))
    for _ in range(4):
        assert list(catalog.tools()) == ["alpha"]
    asked = len(stats)
    for _ in range(3):
        assert described_tool(catalog, "alpha") == "v1"
    assert stats[asked:] == [folder / "alpha.yaml", folder / "alpha.js"] * 3


def test_a_tool_by_name_loads_only_the_files_that_claim_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`tool(name)` checks whole only the files whose YAML claims `name` (a file that then does not
    load claims nothing, as when every file is loaded); the other files' problems are found by the
    listings, which load every file."""
    folder = tmp_path / "tools"
    tool(folder, "alpha")
    tool(folder, "beta", script="missing.js")  # loads nowhere: its script is not there
    write(folder / "gamma.yaml", "kind: script_tool\nname: alpha\nscript: alpha.js\ntimeout_secs: 0\n")
    catalog = ScriptCatalog([folder], ScriptHost(default_helper_table()))
    with caplog.at_level("WARNING", logger="agentkernel.tools.catalog"):
        spec = catalog.tool("alpha")
        assert spec is not None and spec.yaml_path == folder / "alpha.yaml"
        assert [r.getMessage().split(": ")[1] for r in caplog.records] == [str(folder / "gamma.yaml") + ":4"]
        assert catalog.tool("beta") is None
        problems = [(p.path.name, p.line) for p in catalog.problems()]
    assert problems == [("beta.yaml", 3), ("gamma.yaml", 4)]
    assert sorted(r.getMessage().split(": ")[1] for r in caplog.records) == [
        str(folder / "beta.yaml") + ":3",
        str(folder / "gamma.yaml") + ":4",
    ]
    write(folder / "gamma.yaml", "kind: script_tool\nname: alpha\nscript: alpha.js\n")  # now it loads
    assert [(p.path.name, p.line) for p in catalog.problems()] == [
        ("alpha.yaml", 2),
        ("beta.yaml", 3),
        ("gamma.yaml", 2),
    ]
    assert catalog.tool("alpha") is None  # two files claim it: both refused
    catalog.close()
