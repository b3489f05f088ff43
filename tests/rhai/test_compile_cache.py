"""The on-disk cache of compiled Rhai scripts (issue 14 §4; compile_cache.py).

A restarted server loads an unchanged script from the cache instead of
compiling it; the cache can only save time: a missing, truncated, corrupted,
forged, foreign or out-of-date entry is a miss (the script compiles afresh,
as before), and nothing in a file the kernel did not sign ever runs. A hit is
shown by what it skips (the parser is made to fail), never by timing it.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import marshal
import os
import pickle
import time
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.stores import RHAI_CACHE_FOLDER
from agentkernel.errors import ConfigError
from agentkernel.rhai import Engine, Limits, RhaiSyntaxError, compile_cache
from agentkernel.rhai._version import __version__
from agentkernel.rhai.compile_cache import (
    FORMAT,
    SECRET_FILE,
    UNUSED_DAYS,
    CachedModule,
    CompileCache,
    compiler_fingerprint,
)
from agentkernel.rhai.syntax import parser
from tests.conftest import write_kernel_yaml

SOURCE = """
fn total(items) { let t = 0; for x in items { t += x.n } t }
fn label(m) { `${m.name}: ${total(m.items)}` }
let m = #{ name: "sum", items: [#{n: 1}, #{n: 2}, #{n: 39}] };
label(m)
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def cached_engine(folder: Path, **limits: int) -> Engine:
    return Engine(limits=Limits(**limits), compile_cache=CompileCache(folder))


def entries(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name != SECRET_FILE]


def test_the_cache_is_off_unless_asked_for(folder: Path) -> None:
    assert Engine().compile_cache is None
    assert Engine().run(Engine().compile(SOURCE)) == "sum: 42"


def test_an_unchanged_script_is_loaded_not_compiled(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = cached_engine(folder).compile(SOURCE)
    assert len(entries(folder)) == 1
    monkeypatch.setattr(parser, "parse", _refuse)
    later = cached_engine(folder).compile(SOURCE)  # a new engine: as after a restart
    assert isinstance(later.module, CachedModule)
    assert cached_engine(folder).run(later) == "sum: 42"
    assert cached_engine(folder).call_fn(later, "total", [[{"n": 5}]]) == 5
    assert later.functions.keys() == first.functions.keys()
    assert later.module.positions == first.module.positions
    assert later.module.source == first.module.source


def test_a_hit_parses_its_functions_again_only_when_asked(folder: Path) -> None:
    """The trees serve a failed call's hint (rhai_hints.py); they are the same trees."""
    first = cached_engine(folder).compile(SOURCE)
    later = cached_engine(folder).compile(SOURCE)
    assert isinstance(later.module, CachedModule) and later.module._functions is None
    assert later.module.functions == first.module.functions


def test_errors_keep_their_positions_from_a_cached_script(folder: Path) -> None:
    broken = 'fn f(x) {\n  x.len() - "a"\n}\nlet a = 1;\nf([])'
    fresh = _error(cached_engine(folder), broken)
    assert _error(cached_engine(folder), broken) == fresh
    assert "(line 2, position 11)" in fresh


def _error(rhai: Engine, source: str) -> str:
    compiled = rhai.compile(source)
    with pytest.raises(Exception) as caught:
        rhai.run(compiled)
    return str(caught.value)


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("compiled: the cache was not used")


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: data[:10],
        lambda data: data[: len(FORMAT) + 5],
        lambda data: data[:-1],
        lambda data: data[: len(data) // 2],
        lambda data: data[:-7] + bytes(b ^ 0xFF for b in data[-7:]),
        # a byte of the signature, flipped (set to a constant, it is already that one time in 256)
        lambda data: (
            data[: len(FORMAT) + 3] + bytes([data[len(FORMAT) + 3] ^ 0xFF]) + data[len(FORMAT) + 4 :]
        ),
        lambda data: b"garbage" + data,
        lambda data: data + b"more",
    ],
)
def test_a_damaged_entry_is_compiled_afresh_and_replaced(folder: Path, damage: object) -> None:
    cached_engine(folder).compile(SOURCE)
    (entry,) = entries(folder)
    entry.write_bytes(damage(entry.read_bytes()))  # type: ignore[operator]
    again = cached_engine(folder).compile(SOURCE)
    assert not isinstance(again.module, CachedModule)
    assert cached_engine(folder).run(again) == "sum: 42"
    assert isinstance(cached_engine(folder).compile(SOURCE).module, CachedModule)  # written again


def test_a_forged_entry_never_runs(folder: Path, tmp_path: Path) -> None:
    """An entry made without the secret (here: code that would write a file) is not executed."""
    cached_engine(folder).compile(SOURCE)
    (entry,) = entries(folder)
    marker = tmp_path / "pwned"
    evil = compile(f"open({str(marker)!r}, 'w').write('x')\ndef main(rt, d, th): return 666\n", "e", "exec")
    forged: tuple[Any, ...] = (entry.name, [""], {}, set(), [], [], [marshal.dumps(evil)])
    for payload in (b"M" + marshal.dumps(forged), b"P" + pickle.dumps(forged)):
        for signature in (b"\0" * 32, os.urandom(32)):
            entry.write_bytes(FORMAT + signature + payload)
            compiled = cached_engine(folder).compile(SOURCE)
            assert cached_engine(folder).run(compiled) == "sum: 42"
            assert not marker.exists()


def test_an_entry_is_signed_with_hmac_sha256_by_the_secret(folder: Path) -> None:
    """The signature is RFC 2104's HMAC-SHA256, as the standard library computes it."""
    cached_engine(folder).compile(SOURCE)
    (entry,) = entries(folder)
    data, secret = entry.read_bytes(), (folder / SECRET_FILE).read_bytes()
    signature, payload = data[len(FORMAT) : len(FORMAT) + 32], data[len(FORMAT) + 32 :]
    assert signature == hmac.new(secret, payload, hashlib.sha256).digest()
    for key in (b"", b"k" * 32, b"x" * 64, b"y" * 65, os.urandom(100)):
        for message in (b"", b"abc", os.urandom(1000)):
            assert compile_cache._sign(message, key) == hmac.new(key, message, hashlib.sha256).digest()


def test_a_constant_marshal_cannot_write_is_pickled(folder: Path) -> None:
    """Most entries are marshalled (a hit then never imports pickle); one whose constants hold a
    value of a type of ours (here a range) is pickled, and loads the same."""

    def written_as(script: str) -> bytes:
        cached_engine(folder).compile(script)
        (entry,) = (p for p in entries(folder) if p.name == key_of(script))
        return entry.read_bytes()[len(FORMAT) + 32 : len(FORMAT) + 33]

    def key_of(script: str) -> str:
        return CompileCache(folder).key(script, cached_engine(folder).parse_options(), None)

    ranged = "let r = 1..3; r.end + r.start"
    assert (written_as(ranged), written_as(SOURCE)) == (b"P", b"M")
    later = cached_engine(folder).compile(ranged)
    assert isinstance(later.module, CachedModule)
    assert cached_engine(folder).run(later) == 4


def test_another_scripts_entry_under_this_name_is_a_miss(folder: Path) -> None:
    other = "let x = 40; x + 2"
    cached_engine(folder).compile(other)
    (other_entry,) = entries(folder)
    key = CompileCache(folder).key(SOURCE, cached_engine(folder).parse_options(), None)
    (folder / key).write_bytes(other_entry.read_bytes())  # validly signed, but not for SOURCE
    compiled = cached_engine(folder).compile(SOURCE)
    assert cached_engine(folder).run(compiled) == "sum: 42"


def test_another_version_options_or_source_name_is_a_miss(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached_engine(folder).compile(SOURCE)
    assert not isinstance(cached_engine(folder, max_array_size=100).compile(SOURCE).module, CachedModule)
    assert not isinstance(cached_engine(folder).compile(SOURCE, source_name="a").module, CachedModule)
    assert not isinstance(cached_engine(folder).compile(SOURCE + " ").module, CachedModule)
    assert isinstance(cached_engine(folder).compile(SOURCE).module, CachedModule)
    compiler_fingerprint.cache_clear()
    monkeypatch.setattr(compile_cache, "__version__", "999.0.0")  # the interpreter's own version
    try:
        assert not isinstance(cached_engine(folder).compile(SOURCE).module, CachedModule)
    finally:
        monkeypatch.undo()
        compiler_fingerprint.cache_clear()
    assert len(entries(folder)) == 5


def test_the_fingerprint_is_of_every_module_of_the_interpreter_as_it_stands(tmp_path: Path) -> None:
    """Keyed by the path, size and time of each `.py` file below the package (in the order of
    their paths, as `rglob` would find them), so an edit of any module of the interpreter is a
    miss."""
    package = Path(compile_cache._COMPILER_PACKAGE)
    digest = hashlib.sha256(__version__.encode() + importlib.util.MAGIC_NUMBER)
    for path in sorted(package.rglob("*.py")):
        info = path.stat()
        digest.update(
            f"{path.relative_to(package).as_posix()}\0{info.st_size}\0{info.st_mtime_ns}\0".encode()
        )
    assert compiler_fingerprint() == digest.digest()
    (tmp_path / "a" / "b").mkdir(parents=True)
    for name in ("a/b/c.py", "a/z.py", "a.py", "a-b.py", "notes.txt", "a/b/c.pyc"):
        (tmp_path / name).write_text("")
    (tmp_path / "linked").symlink_to(tmp_path / "a", target_is_directory=True)  # not walked into
    found = sorted(compile_cache._modules_below(str(tmp_path)))
    assert found == sorted(path.relative_to(tmp_path).parts for path in tmp_path.rglob("*.py"))
    assert ["/".join(parts) for parts in found] == ["a/b/c.py", "a/z.py", "a-b.py", "a.py"]  # by parts


def test_the_folder_and_secret_are_owner_only_and_a_shared_secret_is_refused(folder: Path) -> None:
    cached_engine(folder).compile(SOURCE)
    secret = folder / SECRET_FILE
    assert folder.stat().st_mode & 0o777 == 0o700
    assert secret.stat().st_mode & 0o777 == 0o600
    assert all(p.stat().st_mode & 0o077 == 0 for p in entries(folder))
    secret.chmod(0o644)  # anyone may read it: it proves nothing any more
    assert not isinstance(cached_engine(folder).compile(SOURCE).module, CachedModule)
    secret.chmod(0o600)
    assert isinstance(cached_engine(folder).compile(SOURCE).module, CachedModule)


def test_a_secret_that_is_a_link_is_refused(folder: Path, tmp_path: Path) -> None:
    cached_engine(folder).compile(SOURCE)
    elsewhere = tmp_path / "elsewhere"
    (folder / SECRET_FILE).rename(elsewhere)
    (folder / SECRET_FILE).symlink_to(elsewhere)
    assert not isinstance(cached_engine(folder).compile(SOURCE).module, CachedModule)


def test_a_cache_that_cannot_be_written_only_costs_time(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    rhai = cached_engine(blocked / "cache")
    assert rhai.run(rhai.compile(SOURCE)) == "sum: 42"
    assert rhai.run(rhai.compile(SOURCE)) == "sum: 42"


def test_entries_unused_for_a_month_are_pruned_by_the_next_store(folder: Path) -> None:
    cached_engine(folder).compile(SOURCE)
    (old,) = entries(folder)
    long_ago = time.time() - (UNUSED_DAYS + 1) * 86_400
    os.utime(old, (long_ago, long_ago))
    cached_engine(folder).compile(SOURCE)  # a hit: used again, so kept
    assert old.stat().st_mtime > long_ago
    os.utime(old, (long_ago, long_ago))
    cached_engine(folder).compile("40 + 2")  # a store: prunes
    assert not old.exists() and len(entries(folder)) == 1
    assert (folder / SECRET_FILE).exists()


def test_syntax_errors_are_not_cached_and_still_reported(folder: Path) -> None:
    for _ in range(2):
        with pytest.raises(RhaiSyntaxError, match=r"Unexpected .;. \(line 1, position 9\)"):
            cached_engine(folder).compile("let x = ;")
    assert not folder.exists() or entries(folder) == []


# -- the kernel: data/cache/rhai ------------------------------------------------------------------


def _tool_project(root: Path) -> Path:
    config = write_kernel_yaml(root)
    tools = root / "config" / "scripts" / "tools"
    (tools / "adder.rhai").write_text("fn run(args) { args.a + args.b }\n", encoding="utf-8")
    (tools / "adder.yaml").write_text(
        "kind: script_tool\nname: adder\ndescription: adds\nscript: adder.rhai\n", encoding="utf-8"
    )
    return config


def test_a_restarted_kernel_loads_its_rhai_tools_from_data_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _tool_project(tmp_path)
    with Kernel(load_kernel_config(config)) as kernel:
        assert kernel.run_tool("adder", {"a": 1, "b": 2}).content == "3"
    assert len(entries(tmp_path / "data" / RHAI_CACHE_FOLDER)) == 1
    monkeypatch.setattr(parser, "parse", _refuse)
    with Kernel(load_kernel_config(config)) as kernel:  # restarted: nothing compiles
        assert kernel.run_tool("adder", {"a": 40, "b": 2}).content == "42"


def test_a_changed_tool_compiles_again_after_a_restart(tmp_path: Path) -> None:
    config = _tool_project(tmp_path)
    with Kernel(load_kernel_config(config)) as kernel:
        assert kernel.run_tool("adder", {"a": 1, "b": 2}).content == "3"
    (tmp_path / "config" / "scripts" / "tools" / "adder.rhai").write_text(
        "fn run(args) { args.a * args.b }\n"
    )
    with Kernel(load_kernel_config(config)) as kernel:
        assert kernel.run_tool("adder", {"a": 4, "b": 5}).content == "20"
    assert len(entries(tmp_path / "data" / RHAI_CACHE_FOLDER)) == 2


def test_no_read_root_may_hold_the_cache(tmp_path: Path) -> None:
    config = write_kernel_yaml(tmp_path, "files:\n  read_roots: [data/cache]\n")
    with pytest.raises(ConfigError, match="holds the Rhai compile cache"):
        load_kernel_config(config).read_roots  # noqa: B018


def test_no_cache_where_scripts_write(tmp_path: Path) -> None:
    """A `paths.temp_root` over the cache would let scripts write entries: no cache then."""
    config = _tool_project(tmp_path)
    config.write_text(config.read_text() + "paths:\n  temp_root: data/cache\n")
    with Kernel(load_kernel_config(config)) as kernel:
        assert kernel.run_tool("adder", {"a": 1, "b": 2}).content == "3"
    assert not (tmp_path / "data" / RHAI_CACHE_FOLDER).exists()
