"""`agentkernel init [DIR]`: a project of your own, ready for `check`, `tool test`, `serve` and `chat`.

    agentkernel init [DIR] [--force]

It copies the starter project shipped in the package (cli/starter/: a
commented kernel.yaml, a JavaScript tool and its Rhai twin, a hook, each
with `tests:` cases, and a template) into DIR, the working directory by default.
DIR must be empty (a `.git` folder aside) or new: with `--force` the
files go beside what is there, but an existing file is never replaced.
Only argparse is imported to build the parser; the copy imports pathlib
when it runs.
"""

from __future__ import annotations

import argparse
import sys

from agentkernel.cli.common import EXIT_NOT_FOUND, EXIT_OK, path_argument

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up)

if TYPE_CHECKING:
    from pathlib import Path

STARTER_TEMPLATE = "assistant"  # the template the starter ships, named in the next steps
MAX_SHOWN = 5  # entries of a non-empty folder named in the refusal
IGNORED = frozenset({".git"})  # a folder holding only these is empty: `git init && agentkernel init` works


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = commands.add_parser(
        "init", help="make a new project (kernel.yaml, a JS and a Rhai tool, a hook, a template) in DIR"
    )
    init.add_argument(
        "dir", nargs="?", type=path_argument, default=None, metavar="DIR", help="default: this folder"
    )
    init.add_argument(
        "--force",
        action="store_true",
        help="add the files to a folder that is not empty (never replacing one)",
    )


def starter_files() -> dict[Path, Path]:
    """The starter project's files: path inside the new project → the package's copy."""
    from pathlib import Path

    root = Path(__file__).resolve().parent / "starter"
    return {p.relative_to(root): p for p in sorted(root.rglob("*")) if p.is_file()}


def _refusal(target: Path, named: str, files: dict[Path, Path], force: bool) -> str | None:
    """Why the starter cannot go into `target` (`named` as the message shows it), or None."""
    if target.exists() and not target.is_dir():
        return f"{named} exists and is not a folder"
    present = sorted(p.name for p in target.iterdir() if p.name not in IGNORED) if target.is_dir() else []
    if present and not force:
        shown = ", ".join(present[:MAX_SHOWN]) + (", …" if len(present) > MAX_SHOWN else "")
        return (
            f"{named} is not empty ({shown}); give a new or empty folder (agentkernel init my-agents),"
            " or --force to add the project's files beside these"
        )
    clashes = [relative.as_posix() for relative in files if (target / relative).exists()]
    if clashes:
        return f"{named} already holds {', '.join(clashes)}; init never replaces a file"
    return None


def _copy(target: Path, files: dict[Path, Path]) -> None:
    for relative, source in files.items():
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        with destination.open("xb") as out:  # exclusive: a file that appeared meanwhile is kept
            out.write(source.read_bytes())


def _next_steps(shown: str, here: bool) -> list[str]:
    steps = [] if here else [f"  cd {shown}"]
    return [
        "next:",
        *steps,
        "  agentkernel check                          every file loads",
        "  agentkernel tool test                      the tools' tests: cases pass",
        "  agentkernel hook test                      and the hook's",
        f"  agentkernel chat --template {STARTER_TEMPLATE}      a chat in the terminal",
        "  agentkernel serve                          the web chat and HTTP API on http://127.0.0.1:8765",
        "chat and serve ask the LLM of llm: in config/kernel.yaml (or --llm-url URL);",
        "`agentkernel dev llm` starts a scripted one to try them without a model",
    ]


def run_command(options: argparse.Namespace) -> int:
    """Copy the starter project into DIR; exit 1 with the reason when DIR is not fit for it."""
    from pathlib import Path

    target = options.dir if options.dir is not None else Path(".")
    named = str(target) if options.dir is not None else f"this folder ({Path.cwd()})"
    files = starter_files()
    try:
        refused = _refusal(target, named, files, options.force)
        if refused is None:
            _copy(target, files)
    except OSError as exc:
        refused = f"cannot write into {target}: {exc.strerror or exc}" + (
            f" ({exc.filename})" if exc.filename else ""
        )
    if refused is not None:
        print(f"agentkernel init: {refused}", file=sys.stderr)
        return EXIT_NOT_FOUND
    here = target.resolve() == Path.cwd().resolve()
    shown = "this folder" if here else str(target)
    print(f"made a project in {shown}:")
    for relative in files:
        print(f"  {relative.as_posix()}")
    print("\n".join(_next_steps(str(target), here)))
    return EXIT_OK


__all__ = ["STARTER_TEMPLATE", "add_parser", "run_command", "starter_files"]
