"""How the commands show a problem: `file:line: field: what is wrong`, the file relative to the cwd."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkernel.config import read_yaml_file
from agentkernel.errors import ConfigError, LoadProblem


def shown_path(path: Path | str) -> str:
    """`path` relative to the working directory when it lies under it, else as it is."""
    absolute = Path(path).absolute()
    cwd = Path.cwd()
    return str(absolute.relative_to(cwd)) if absolute.is_relative_to(cwd) else str(path)


def problem_text(problem: LoadProblem) -> str:
    """`file:line: field: what is wrong`, the file relative to the working directory."""
    where = shown_path(problem.path) + (f":{problem.line}" if problem.line is not None else "")
    return f"{where}: {problem.reason}"


def problem_json(problem: LoadProblem) -> dict[str, Any]:
    return {"path": str(problem.path), "line": problem.line, "reason": problem.reason}


def config_problem(exc: ConfigError) -> LoadProblem:
    """A kernel.yaml error as a problem, with the line of its field found when the raiser had none."""
    path = Path(exc.path) if exc.path is not None else Path("kernel.yaml")
    line = exc.line
    if line is None and exc.path is not None:
        try:
            line = read_yaml_file(path)[1].of_reason(exc.reason)
        except ConfigError:
            line = None
    return LoadProblem(path, exc.reason, line)


__all__ = ["config_problem", "problem_json", "problem_text", "shown_path"]
