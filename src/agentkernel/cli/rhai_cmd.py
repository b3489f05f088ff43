"""`agentkernel rhai run [--print-result] [--no-cache] [--max-… N] FILE|-`: the reference runner's
contract.

Exit 0 on success, 1 on a runtime error, 2 on a syntax error or an
unreadable file. The interpreter is imported when the command runs, never to
build the parser. A compiled script is kept in the user's cache folder
(`$XDG_CACHE_HOME/agentkernel/rhai`, else `~/.cache/agentkernel/rhai`;
rhai/compile_cache.py), so running the same text again neither parses nor
generates code: `--no-cache` compiles afresh and keeps nothing.
"""

from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from agentkernel.rhai.compile_cache import CompileCache

# flag -> (Limits attribute, help); runner.LIMIT_FLAGS holds the same flags (a test keeps them equal)
LIMITS_HELP: dict[str, tuple[str, str]] = {
    "--max-operations": ("max_operations", "stop after N operations (0 = no limit, the default)"),
    "--max-array-size": ("max_array_size", "largest array allowed, in elements (0 = no limit)"),
    "--max-string-size": ("max_string_size", "longest string allowed, in characters (0 = no limit)"),
    "--max-map-size": ("max_map_size", "largest object map allowed, in properties (0 = no limit)"),
    "--max-call-levels": ("max_call_levels", "deepest function-call nesting (default 64)"),
    "--max-variables": ("max_variables", "most variables in scope at once (0 = no limit)"),
    "--max-functions": ("max_functions", "most script functions defined (0 = no limit)"),
    "--max-modules": ("max_modules", "most `import` statements run (0 = no limit)"),
}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rhai = commands.add_parser("rhai", help="the Rhai interpreter").add_subparsers(
        dest="action", required=True, metavar="{run}"
    )
    run = rhai.add_parser(
        "run",
        help="run a Rhai script (FILE, or - for stdin)",
        description="Run a Rhai script like the reference runner: exit 1 on a runtime error, 2 on a syntax"
        " error.",
    )
    run.add_argument("file", metavar="FILE", help="the script, or - to read standard input")
    run.add_argument(
        "--print-result", action="store_true", help="print `<type_of>: <value>` of the result last"
    )
    run.add_argument(
        "--no-cache",
        action="store_true",
        help="compile afresh and keep nothing (else compiled scripts are kept in"
        " $XDG_CACHE_HOME/agentkernel/rhai)",
    )
    for flag, (attribute, text) in LIMITS_HELP.items():
        run.add_argument(flag, dest=attribute, type=int, metavar="N", help=text)


def run_command(options: argparse.Namespace) -> int:
    from agentkernel.util.collector import collector_paused

    with collector_paused():  # start-up (util/collector.py); on again for the script's run
        from agentkernel.rhai.runner import limits_from_flags, run_source
        from agentkernel.scripting.rhai_modules import module_resolver

    flags: list[str] = []
    for flag, (attribute, _) in LIMITS_HELP.items():
        value = getattr(options, attribute)
        if value is not None:
            flags += [flag, str(value)]
    try:
        source = sys.stdin.read() if options.file == "-" else _read_text(options.file)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"agentkernel rhai: cannot read {options.file}: {exc}", file=sys.stderr)
        return 2
    path = None if options.file == "-" else options.file
    # imports are relative to the script's own folder, links resolved; stdin's script imports nothing
    resolver = module_resolver(os.path.dirname(os.path.realpath(path))) if path is not None else None
    outcome = run_source(
        source,
        limits_from_flags(flags),
        echo=lambda line: print(line, flush=False),
        path=path,
        module_resolver=resolver,
        compile_cache=_compile_cache(options.no_cache),
    )
    if outcome.error is not None:
        sys.stdout.flush()
        print(outcome.error, file=sys.stderr)
    elif options.print_result:
        print(outcome.result)
    return outcome.exit_code


def _compile_cache(off: bool) -> CompileCache | None:
    """The user's cache of compiled scripts (util/cache_folder.py); None when off or unusable."""
    from agentkernel.rhai.compile_cache import CompileCache
    from agentkernel.util.cache_folder import cache_folder

    folder = None if off else cache_folder("rhai")
    return CompileCache(folder) if folder is not None else None


def _read_text(name: str) -> str:
    """The file's text, as `Path(name).read_text(encoding="utf-8")` reads it; pathlib only when that
    fails, so the error names the file as before (`./a.rhai` as `a.rhai`). A script that imports
    nothing then runs without pathlib, which costs about 6 % of `rhai run`'s start-up."""
    try:
        with open(name, encoding="utf-8") as file:
            return file.read()
    except OSError:
        from pathlib import Path

        return Path(name).read_text(encoding="utf-8")
