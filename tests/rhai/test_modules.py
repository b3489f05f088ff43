"""Rhai modules at the engine level and through `agentkernel rhai run` (issue 14 §3; S1.3).

`import "lib" as m;` reads `lib.rhai` relative to the importing script, through
`FileModuleResolver` and the reader its host hands it (here the kernel's, which
reads nothing outside its folder: scripting/rhai_modules.py); an Engine without
a resolver reads no file at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError
from agentkernel.rhai.runner import run_source
from agentkernel.rhai.runtime.module_files import FileModuleResolver, ModuleRefused, SourceFile
from agentkernel.scripting.rhai_modules import module_resolver

LIB = """
import "sub/util" as u;
export const X = 40;
let counter = 1;
counter += 1;            // exports take the value the top level ends with
export counter as count;
let hidden = 5;          // not exported
fn add(a, b) { a + b + helper() }
private fn helper() { 0 }
fn twice(x) { u::double(x) }
fn secret() { global::X }
fn call_back(f) { call(f) }
"""

UTIL = """
fn double(x) { x * 2 }
export let name = "util";
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "lib.rhai").write_text(LIB)
    (tmp_path / "sub" / "util.rhai").write_text(UTIL)
    return tmp_path


def run_in(folder: Path, source: str, **limits: int) -> object:
    engine = Engine(module_resolver=module_resolver(folder), limits=Limits(**limits))
    main = folder / "main.rhai"
    main.write_text(source)
    return engine.run(engine.compile_file(main))


def error_of(folder: Path, source: str, **limits: int) -> RhaiRuntimeError:
    with pytest.raises(RhaiRuntimeError) as caught:
        run_in(folder, source, **limits)
    return caught.value


def test_functions_constants_and_exported_variables(folder: Path) -> None:
    assert run_in(folder, 'import "lib" as m; m::add(1, 2) + m::X') == 43
    assert run_in(folder, 'import "lib" as m; m::count') == 2
    assert run_in(folder, 'import "lib" as m; m::twice(21)') == 42  # the module's own import
    assert run_in(folder, 'import "lib" as m; m::secret()') == 40  # global::X is the module's
    assert run_in(folder, 'import "lib" as m; m::u::double(4) + m::u::name.len') == 12  # sub-module


def test_private_and_unexported_names_are_not_visible(folder: Path) -> None:
    assert str(error_of(folder, 'import "lib" as m;\nm::helper()')) == (
        "Function not found: m::helper () (line 2, position 4)"
    )
    assert (
        str(error_of(folder, 'import "lib" as m;\nm::hidden'))
        == "Variable not found: m::hidden (line 2, position 1)"
    )


def test_top_level_imports_are_seen_by_functions(folder: Path) -> None:
    source = 'import "lib" as m; fn f(x) { m::add(x, 1) } fn g() { Fn("f") } m::call_back(curry(g(), 41))'
    assert run_in(folder, source) == 42  # a pointer to the caller's function still calls it


def test_import_without_alias_runs_the_top_level(folder: Path) -> None:
    (folder / "noisy.rhai").write_text('print("loaded");')
    lines: list[str] = []
    engine = Engine(module_resolver=module_resolver(folder))
    engine.run(engine.compile('import "noisy"; import "noisy" as n; 1'), stdout=lines.append)
    assert lines == ["loaded"]  # evaluated once per run, however often imported


def test_a_module_not_imported_is_not_found(folder: Path) -> None:
    assert str(error_of(folder, "x::f()")) == "Module not found: x (line 1, position 4)"  # reference: 1
    assert str(error_of(folder, '{ import "lib" as m; }\nm::X')) == "Module not found: m (line 2, position 1)"


def test_an_engine_without_a_resolver_reads_no_file(folder: Path) -> None:
    engine = Engine()
    with pytest.raises(RhaiRuntimeError) as caught:
        engine.run(engine.compile_file(folder / "lib.rhai"))
    assert str(caught.value) == "Module not found: sub/util (line 2, position 8)"


def test_errors_in_a_module_say_which_module(folder: Path) -> None:
    (folder / "bad.rhai").write_text("let x = ;")
    (folder / "boom.rhai").write_text("fn f() { 1 }\nlet y = nope;")
    assert str(error_of(folder, 'import "bad" as b;')) == (
        "Syntax error: Unexpected ';' (line 1, position 9)\nin module 'bad' (line 1, position 8)"
    )
    assert str(error_of(folder, '\nimport "boom";')) == (
        "Variable not found: nope (line 2, position 9)\nin module 'boom' (line 2, position 8)"
    )
    caught = run_in(folder, 'try { import "boom"; } catch (e) { return e.error + " " + e["module"] }')
    assert caught == "ErrorInModule boom"
    assert str(error_of(folder, 'import "missing" as m;')) == "Module not found: missing (line 1, position 8)"
    assert (
        str(error_of(folder, "import 1;"))
        == "Data type incorrect: i64 (expecting string) (line 1, position 8)"
    )


def test_an_import_cycle_is_an_error_naming_it(folder: Path) -> None:
    (folder / "a.rhai").write_text('import "b" as b;')
    (folder / "b.rhai").write_text('import "a" as a;')
    error = error_of(folder, 'import "a" as a;')
    assert str(error).splitlines()[0] == "Cyclic import: a -> b -> a (line 1, position 8)"
    (folder / "selfish.rhai").write_text('import "main";')
    assert str(error_of(folder, 'import "selfish";')).startswith("Cyclic import: main -> selfish -> main")


def test_limits_count_module_code(folder: Path) -> None:
    (folder / "spin.rhai").write_text("loop { }")
    error = error_of(folder, 'import "spin";', max_operations=1_000)
    assert error.message == "Too many operations" and not error.catchable  # not wrapped: a limit stays one
    error = error_of(folder, 'for i in 0..10 { import "lib" as m; }', max_modules=3)
    assert str(error) == "Too many modules imported (line 1, position 18)" and not error.catchable


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/etc/passwd", "an absolute path"),
        ("../outside", "outside the scripts' folder"),
        ("sub/../../outside", "outside the scripts' folder"),
        ("link", "is a symbolic link"),
        ("sub_link/util", "is a symbolic link"),
    ],
)
def test_nothing_outside_the_folder_is_read(folder: Path, path: str, reason: str) -> None:
    outside = folder.parent / "outside.rhai"
    outside.write_text("export const SECRET = 1;")
    (folder / "link.rhai").symlink_to(outside)
    (folder / "sub_link").symlink_to(folder / "sub")  # even a link that stays inside
    error = error_of(folder, f'import "{path}" as m; m::SECRET')
    assert error.kind == "ErrorModuleNotFound" and reason in error.message, error.message


def test_a_changed_module_is_compiled_again(folder: Path) -> None:
    engine = Engine(module_resolver=module_resolver(folder))
    script = engine.compile('import "lib" as m; m::X')
    assert engine.run(script) == 40
    lib = folder / "lib.rhai"
    lib.write_text(LIB.replace("export const X = 40;", "export const X = 41;"))
    os.utime(lib, ns=(lib.stat().st_atime_ns, lib.stat().st_mtime_ns + 1_000_000_000))
    assert engine.run(script) == 41  # the importer itself was not compiled again


def test_the_runner_resolves_relative_to_the_file(folder: Path, tmp_path: Path) -> None:
    main = folder / "main.rhai"
    main.write_text('import "lib" as m; print(m::add(2, 3));')
    outcome = run_source(main.read_text(), path=main, module_resolver=module_resolver(folder))
    assert outcome.stdout == ["5"] and outcome.exit_code == 0
    assert run_source('import "lib" as m;').error == "Module not found: lib (line 1, position 8)"  # stdin
    command = [sys.executable, "-m", "agentkernel", "rhai", "run", str(main)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path.parent, check=False)
    assert (done.returncode, done.stdout) == (0, "5\n"), done.stderr


def test_a_chain_of_imports_is_bounded_like_calls(folder: Path) -> None:
    for n in range(20):
        (folder / f"chain{n}.rhai").write_text(f'import "chain{n + 1}";')
    (folder / "chain20.rhai").write_text("export const END = 1;")
    assert run_in(folder, 'import "chain0";') is None
    error = error_of(folder, 'import "chain0";', max_call_levels=10)
    assert error.message == "Stack overflow" and not error.catchable


def test_the_data_limit_counts_what_modules_hold(folder: Path) -> None:
    for n in range(4):
        (folder / f"big{n}.rhai").write_text('let data = "x"; data.pad(300000, "x"); export data;')
    imports = "".join(f'import "big{n}";' for n in range(4))
    assert run_in(folder, imports, max_data_size=2_000_000) is None
    error = error_of(folder, imports, max_data_size=1_000_000)
    assert error.kind == "ErrorDataTooLarge" and not error.catchable


def test_an_error_in_a_module_function_names_its_source(folder: Path) -> None:
    """As the reference shows a script function's error when its AST has a source (the module's path)."""
    (folder / "err.rhai").write_text("fn f() { g() }\nfn g() { x }")
    assert str(error_of(folder, 'import "err" as m;\nm::f()')) == (
        "Variable not found: x @ 'err' (line 2, position 10)\n"
        "in call to function 'g' (from 'err') @ 'err' (line 1, position 10)\n"
        "in call to function 'f' (from 'err') (line 2, position 4)"
    )
    caught = run_in(folder, 'import "err" as m; try { m::f() } catch (e) { return [e.function, e.source] }')
    assert caught == ["f", "err"]


def test_the_host_reads_the_files_the_resolver_finds(tmp_path: Path) -> None:
    """The interpreter reads no file itself: it asks its host's reader, with the importer's folder."""
    files = {
        "/scripts/lib.rhai": "fn f() { 42 }",
        "/scripts/sub/util.rhai": 'import "../lib" as l; fn g() { l::f() }',
    }
    asked: list[tuple[Path, str]] = []

    def read(start: Path, name: str) -> SourceFile:
        asked.append((start, name))
        key = os.path.normpath(start / name)
        if key not in files:
            raise ModuleRefused("" if name.endswith("lost.rhai") else "not in the table")
        return SourceFile(key, 1, files[key])

    engine = Engine(module_resolver=FileModuleResolver("/scripts", read))
    assert engine.eval('import "sub/util" as u; u::g()') == 42
    assert asked == [(Path("/scripts"), "sub/util.rhai"), (Path("/scripts/sub"), "../lib.rhai")]
    with pytest.raises(RhaiRuntimeError, match=r"^Module not found: lost \(line"):
        engine.eval('import "lost";')
    with pytest.raises(RhaiRuntimeError, match=r"Module not found: elsewhere \(not in the table\)"):
        engine.eval('import "elsewhere";')


def test_a_modules_own_contains_wins_over_the_inline_native(folder: Path) -> None:
    """Compiled code runs a string's `contains` inline while no script function takes the
    name (`Runtime.natives_inline`); a module's functions bring their own in sight."""
    (folder / "own.rhai").write_text('fn contains(c) { "own " + c } fn probe() { "abc".contains("b") }')
    assert run_in(folder, 'import "own" as o; [o::probe(), "abc".contains("b")]') == ["own b", True]
