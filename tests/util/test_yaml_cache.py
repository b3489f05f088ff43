"""The parse cache of YAML texts (agentkernel/util/yaml_cache.py): a hit gives what PyYAML would, an
edited file is parsed anew, and what would not read back alike is never kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentkernel.errors import ConfigError
from agentkernel.util import yaml_cache, yaml_parse
from agentkernel.util.yaml_source import load_yaml
from tests.conftest import REPO


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "agentkernel" / "yaml"


def no_pyyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, a parse by PyYAML fails the test: only the cache can answer."""

    def refuse(path: Path, text: str) -> object:
        raise AssertionError(f"{path} was parsed again")

    monkeypatch.setattr(yaml_parse, "parse_yaml", refuse)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_text_read_again_comes_from_the_cache_as_pyyaml_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "t.yaml", "a: 1\nb: [true, 1.0, null, 'x']\nc:\n  d: -0.5\n")
    first = load_yaml(path)
    no_pyyaml(monkeypatch)
    again = load_yaml(write(tmp_path / "other.yaml", path.read_text()))  # keyed by text, not by path
    assert repr(again) == repr(first)
    assert again[1].of("c", "d") == 4


@pytest.mark.parametrize(
    "path", sorted(p.relative_to(REPO) for p in (REPO / "config").rglob("*.yaml")), ids=str
)
def test_every_shipped_file_reads_back_from_the_cache_alike(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Types included (repr tells `1` from `1.0` and from `true`), and every key's line."""
    parsed = yaml_parse.parse_yaml(REPO / path, (REPO / path).read_text(encoding="utf-8"))
    assert load_yaml(REPO / path)[0] == parsed[0]
    no_pyyaml(monkeypatch)
    value, lines = load_yaml(REPO / path)
    assert repr(value) == repr(parsed[0])
    assert dict(lines.by_path) == parsed[1]


def test_an_edited_file_is_read_anew_though_its_stamp_is_unchanged(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "limit: 10\n")
    before = os.stat(path)
    assert load_yaml(path)[0] == {"limit": 10}
    write(path, "limit: 99\n")  # the same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size
    assert load_yaml(path)[0] == {"limit": 99}


@pytest.mark.parametrize(
    "text",
    [
        "when: 2024-01-01\n",  # a date: marshal does not write it
        "base: &b [1, 2]\nagain: *b\n",  # one list twice: read back it would be two
        "s: !!set {a, b}\n",
        "b: !!binary aGVsbG8=\n",
    ],
)
def test_what_would_not_read_back_alike_is_parsed_each_time(
    tmp_path: Path, text: str, cache_home: Path
) -> None:
    path = write(tmp_path / "t.yaml", text)
    value = load_yaml(path)[0]
    assert load_yaml(path)[0] == value
    assert yaml_cache.lookup(text) is None
    assert not cache_home.exists() or not [p for p in cache_home.iterdir() if not p.name.startswith(".")]


def test_an_error_is_never_kept(tmp_path: Path, cache_home: Path) -> None:
    path = write(tmp_path / "t.yaml", "a: 1\na: 2\n")
    for _ in range(2):
        with pytest.raises(ConfigError, match="key given twice"):
            load_yaml(path)
    assert yaml_cache.lookup(path.read_text()) is None


def test_a_damaged_entry_is_a_miss(tmp_path: Path, cache_home: Path) -> None:
    path = write(tmp_path / "t.yaml", "a: 1\n")
    load_yaml(path)
    (entry,) = cache_home.iterdir()
    entry.write_bytes(entry.read_bytes()[:-3])
    assert yaml_cache.lookup("a: 1\n") is None
    entry.write_bytes(b"\x00not marshal")
    assert load_yaml(path)[0] == {"a": 1}


def test_an_entry_of_another_parser_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = write(tmp_path / "yaml_parse.py", "# one version\n")
    monkeypatch.setattr(yaml_cache, "_PARSER", parser)
    path = write(tmp_path / "t.yaml", "a: 1\n")
    load_yaml(path)
    assert yaml_cache.lookup("a: 1\n") is not None
    write(parser, "# another version\n")
    assert yaml_cache.lookup("a: 1\n") is None


def test_a_folder_others_may_write_is_not_used(tmp_path: Path, cache_home: Path) -> None:
    path = write(tmp_path / "t.yaml", "a: 1\n")
    load_yaml(path)
    assert yaml_cache.lookup("a: 1\n") is not None
    cache_home.chmod(0o777)
    assert yaml_cache.folder() is None
    assert yaml_cache.lookup("a: 1\n") is None
    assert load_yaml(path)[0] == {"a": 1}


def test_the_oldest_entries_go_past_the_bound(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(yaml_cache, "MAX_ENTRIES", 4)
    for n in range(9):
        load_yaml(write(tmp_path / "t.yaml", f"n: {n}\n"))
    assert len(list(cache_home.iterdir())) <= 4
    assert yaml_cache.lookup("n: 8\n") is not None
