"""What every command shares: exit codes, global flags, logging, finding the project, quiet pipes.

Nothing here imports the kernel at module level: `agentkernel --version` and
`agentkernel rhai run` load this module and must stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator

from agentkernel.util.after_import import after_import
from agentkernel.util.lazy_log import DEBUG, ERROR, INFO, WARNING, plan_levels

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms at start-up)

if TYPE_CHECKING:
    from pathlib import Path

    from agentkernel.config import KernelConfig
    from agentkernel.errors import ConfigError
    from agentkernel.kernel import Kernel

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what `cmd | head` reports for C tools too

VERBOSE_HELP = "more logging: -v shows INFO (console.log lines), -vv DEBUG"
CONFIG_HELP = (
    "the project's kernel.yaml (default: $AGENTKERNEL_CONFIG, else the nearest config/kernel.yaml "
    "in the working directory or above it)"
)


def add_global_flags(parser: argparse.ArgumentParser, *, inherited: bool) -> None:
    """`-v` and `--config`, accepted before or after the subcommand.

    On subcommands (`inherited`) they default to SUPPRESS, so a flag given
    before the subcommand is not reset by the subcommand's own default.
    """
    absent: object = argparse.SUPPRESS if inherited else None
    options = parser._option_string_actions  # an existing --config (a command's own) is reused
    if "-v" not in options:
        count_default: object = argparse.SUPPRESS if inherited else 0
        parser.add_argument("-v", "--verbose", action="count", default=count_default, help=VERBOSE_HELP)
    if "--log-format" not in options:
        parser.add_argument(
            "--log-format",
            choices=("text", "json"),
            default=argparse.SUPPRESS if inherited else "text",
            help="log lines as text (default) or as JSON objects naming each line's run and trace",
        )
    if "--config" in options:
        options["--config"].default = absent
    else:
        parser.add_argument("--config", type=path_argument, default=absent, metavar="FILE", help=CONFIG_HELP)


def path_argument(text: str) -> Path:
    """argparse's `type=` for a path: pathlib is imported when a path is given, not to build parsers."""
    from pathlib import Path

    return Path(text)


def port_number(text: str) -> int:
    """argparse's `type=` for `--port`: 0 (a free port) to 65535, or a usage error naming the value."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0-65535 (0: a free one), got {text!r}")
    return port


def leaf_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser of a subcommand that has no subcommands of its own."""
    children = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not children:
        yield parser
        return
    for action in children:
        for child in dict.fromkeys(action.choices.values()):
            yield from leaf_parsers(child)


def setup_logging(verbosity: int, log_format: str = "text") -> None:
    """Log to stderr: warnings by default; scripts' console.log lines with -v; one JSON object a line
    with `json` (telemetry/log_lines.py: each line of a run names the run and its trace).

    Applied when `logging` is first imported (util/after_import.py), which is before anything can
    log: a command that logs nothing (`rhai run`), or only below these levels (`tool run`'s debug
    line), never imports it (util/lazy_log.py is told the levels now).
    """
    levels = log_levels(verbosity)
    plan_levels(levels)
    after_import("logging", lambda: _configure_logging(levels, log_format))


def log_levels(verbosity: int) -> dict[str, int]:
    """The level of each logger the set-up sets ("" the root) at `verbosity` (`-v` counted)."""
    levels = {
        "": WARNING if verbosity == 0 else INFO if verbosity == 1 else DEBUG,
        # console.log output is what a script author runs the CLI to see; debug with -vv.
        "agentkernel.script": DEBUG if verbosity >= 2 else INFO,
    }
    if verbosity == 0:  # the commands print load problems themselves, once
        levels["agentkernel.tools.catalog"] = ERROR
    return levels


def _configure_logging(levels: dict[str, int], log_format: str) -> None:
    import logging

    logging.basicConfig(stream=sys.stderr, level=levels[""], format="%(levelname)s %(name)s: %(message)s")
    if log_format == "json":
        from agentkernel.telemetry.log_lines import JsonLines

        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonLines())
    for name, level in levels.items():
        if name:
            logging.getLogger(name).setLevel(level)


def load_kernel(
    prog: str,
    config: Path | str | None,
    *,
    start: Path | None = None,
    live: bool = True,
    llm_url: str | None = None,
    model: str | None = None,
    kept_contexts: bool = True,
) -> Kernel:
    """The project's kernel, or exit 1 with the reason (where it looked, which field is wrong).

    `llm_url` and `model` override kernel.yaml's `llm:` (`--llm-url`, `--model`);
    `kept_contexts=False` for a command that makes a call or two (`Kernel`).

    The caller closes it: `with load_kernel(...) as kernel:`.
    """
    from pathlib import Path

    from agentkernel.util.collector import collector_paused

    with collector_paused():  # start-up (util/collector.py)
        from agentkernel.config import find_kernel_config, load_kernel_config
        from agentkernel.errors import ConfigError
        from agentkernel.kernel import Kernel

    try:
        found = load_kernel_config(find_kernel_config(Path(config) if config is not None else None, start))
        return Kernel(with_llm(found, llm_url, model), live=live, kept_contexts=kept_contexts)
    except ConfigError as exc:
        raise config_exit(prog, exc) from exc


def load_project_config(prog: str, config: Path | str | None) -> KernelConfig:
    """The project's kernel.yaml, loaded; or exit 1 saying why, as `load_kernel` does."""
    from pathlib import Path

    from agentkernel.config import find_kernel_config, load_kernel_config
    from agentkernel.errors import ConfigError

    try:
        return load_kernel_config(find_kernel_config(Path(config) if config is not None else None))
    except ConfigError as exc:
        raise config_exit(prog, exc) from exc


def config_exit(prog: str, exc: ConfigError) -> SystemExit:
    """Print a kernel.yaml problem (file, line, field) on stderr; the exit (1) to raise."""
    from agentkernel.cli.problems import config_problem, problem_text  # pathlib, YAML: on a failure only

    shown = problem_text(config_problem(exc)) if exc.path is not None else str(exc)
    print(f"{prog}: {shown}", file=sys.stderr)
    return SystemExit(EXIT_NOT_FOUND)


def with_llm(config: KernelConfig, llm_url: str | None, model: str | None) -> KernelConfig:
    """`config` with `llm.base_url` and/or `llm.model` replaced; ConfigError naming a bad value."""
    if not llm_url and not model:
        return config
    from dataclasses import replace

    from agentkernel.config.sections import parse_llm_config

    llm = {**config.llm.as_section(), "max_concurrency": config.llm.max_concurrency} if config.llm else {}
    if llm_url:
        llm["base_url"] = llm_url
    if model:
        llm["model"] = model
    return replace(config, llm=parse_llm_config(llm, config.path))


def quiet_broken_pipe(command: Callable[[], int]) -> int:
    """Run a command; a reader that went away (`… | head -3`) ends it quietly, no traceback.

    Output is flushed inside the guard so the error surfaces here; then
    stdout is pointed at /dev/null so the interpreter's own final flush
    cannot complain either.
    """
    try:
        code = command()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def names_a_file(name_or_path: str) -> bool:
    """Whether a command's TOOL/HOOK argument is a YAML file's path rather than a name in the project."""
    return name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path


__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "add_global_flags",
    "config_exit",
    "leaf_parsers",
    "load_kernel",
    "load_project_config",
    "names_a_file",
    "path_argument",
    "quiet_broken_pipe",
    "setup_logging",
    "with_llm",
]
