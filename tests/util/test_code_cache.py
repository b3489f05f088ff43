"""The table of compiled dataclass methods (agentkernel/util/code_cache.py): a class made through
it is the class `dataclasses` makes, a later process compiles nothing it saw, and a bad table or
folder is only a miss."""

from __future__ import annotations

import dataclasses
import marshal
import os
import subprocess
import sys
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentkernel.rhai.syntax import records
from agentkernel.util import code_cache
from tests.conftest import REPO

METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__lt__", "__ge__", "__setattr__", "__delattr__")


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test's own, an empty table, and `dataclasses` as it was afterwards."""
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.setattr(code_cache, "_table", {})
    monkeypatch.setattr(code_cache, "_added", {})
    monkeypatch.setattr(code_cache, "_name", [])
    monkeypatch.delattr(dataclasses, "exec", raising=False)  # a command run in this process installed it
    monkeypatch.delattr(records, "exec", raising=False)
    return home / "agentkernel" / "code"


def through_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, `dataclasses` compiles through the table (undone after the test)."""
    monkeypatch.setattr(dataclasses, "exec", code_cache.cached_exec, raising=False)


def make() -> type:
    """A class using most of what `@dataclass` generates: frozen, slots, order, defaults, a factory,
    a keyword-only field and a `__post_init__`."""

    @dataclass(frozen=True, slots=True, order=True)
    class Point:
        x: int
        y: float = 1.5
        tags: tuple[str, ...] = field(default_factory=tuple)
        _: KW_ONLY
        label: str = "p"

        def __post_init__(self) -> None:
            if self.x < 0:
                raise ValueError(f"x={self.x} is negative")

    return Point


def behaviour(kind: Any) -> list[object]:
    """What instances of a `make()` class do, as values to compare."""
    a, b = kind(1, tags=("t",), label="a"), kind(2, 0.5)
    seen: list[object] = [
        repr(a),
        a == kind(1, tags=("t",), label="a"),
        a < b,
        hash(a) == hash(kind(1, 1.5, ("t",))),
    ]
    for attempt in (lambda: setattr(a, "x", 3), lambda: kind(-1), lambda: kind(1, 2.0, (), "positional")):
        try:
            attempt()
        except Exception as error:  # the error itself is what is compared
            seen.append(f"{type(error).__name__}: {error}")
    return seen


def test_a_class_made_through_the_table_is_the_one_dataclasses_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = make()
    through_table(monkeypatch)
    before = code_cache.compiled()
    compiled_now = make()
    assert code_cache.compiled() > before  # a miss: compiled and kept
    after_miss = code_cache.compiled()
    from_table = make()
    assert code_cache.compiled() == after_miss  # a hit: nothing compiled
    for kind in (compiled_now, from_table):
        for name in METHODS:
            assert getattr(kind, name).__code__ == getattr(plain, name).__code__, name
        assert behaviour(kind) == behaviour(plain)
    assert [repr(f) for f in dataclasses.fields(from_table)] == [repr(f) for f in dataclasses.fields(plain)]


def test_what_a_process_compiled_is_read_back_by_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    through_table(monkeypatch)
    plain = make()
    code_cache.save()
    assert code_cache.table_path() is not None
    monkeypatch.setattr(code_cache, "_table", {})
    code_cache._table.update(code_cache._read(str(code_cache.table_path())))
    before = code_cache.compiled()
    assert behaviour(make()) == behaviour(plain)
    assert code_cache.compiled() == before


PROBE = """
import contextlib, io, sys
from agentkernel.cli.main import main
from agentkernel.rhai.syntax import records
from agentkernel.util import code_cache
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(code_cache.compiled())
"""


def compiled_twice(argv: list[str], cache: Path) -> list[int]:
    """How many sources each of two runs of the command `argv` compiled, with `cache` as the
    user's cache folder (the first run fills it)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    counts = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", PROBE, *argv],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        counts.append(int(done.stdout.split()[-1]))
    return counts


def test_a_second_command_compiles_no_dataclass_method(tmp_path: Path) -> None:
    script = tmp_path / "one.rhai"
    script.write_text("print(1)")
    counts = compiled_twice(["rhai", "run", str(script)], tmp_path / "cache")
    assert counts[0] > 20 and counts[1] == 0, counts


def test_each_command_and_action_has_a_table_of_its_own(tmp_path: Path) -> None:
    """`tool run` reads only what a tool run compiled, not what `tool list` did too."""
    counts = compiled_twice(["tool", "list"], tmp_path / "cache")
    folder = tmp_path / "cache" / "agentkernel" / "code"
    assert [p.name.split("-cpython")[0] for p in folder.iterdir()] == ["tool-list"]
    assert counts[0] > 20 and counts[1] == 0, counts


@pytest.mark.parametrize(
    "data", [b"not marshal", marshal.dumps((code_cache.FORMAT + 1, {})), marshal.dumps({"a": 1})]
)
def test_a_damaged_or_foreign_table_is_a_miss(
    data: bytes, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = make()
    cache_home.mkdir(parents=True, mode=0o700)
    Path(str(code_cache.table_path())).write_bytes(data)
    assert code_cache._read(str(code_cache.table_path())) == {}
    through_table(monkeypatch)
    assert behaviour(make()) == behaviour(plain)


def test_a_folder_others_may_write_is_not_used(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache_home.mkdir(parents=True, mode=0o700)
    cache_home.chmod(0o777)
    assert code_cache.table_path() is None
    through_table(monkeypatch)
    make()
    code_cache.save()
    assert list(cache_home.iterdir()) == []


def test_a_full_table_starts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    through_table(monkeypatch)
    make()
    code_cache.save()
    path = str(code_cache.table_path())
    kept = len(code_cache._read(path))
    monkeypatch.setattr(code_cache, "MAX_ENTRIES", kept)

    @dataclass
    class Other:
        z: bytes

    code_cache.save()
    assert 0 < len(code_cache._read(path)) < kept  # Other's methods alone


def make_record() -> type:
    @records.record
    class Node:
        name: str
        line: int = 0

    return Node


def test_a_record_made_through_the_table_is_the_one_records_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = make_record()
    monkeypatch.setattr(records, "exec", code_cache.cached_exec, raising=False)
    make_record()
    before = code_cache.compiled()
    from_table = make_record()
    assert code_cache.compiled() == before
    for name in ("__init__", "__eq__", "__hash__"):
        assert getattr(from_table, name).__code__ == getattr(plain, name).__code__, name
    a, b = from_table("x", 2), plain("x", 2)
    assert (repr(a), a == from_table("x", 2), hash(a) == hash(from_table("x", 2))) == (
        repr(b).replace(plain.__qualname__, from_table.__qualname__),
        True,
        True,
    )
