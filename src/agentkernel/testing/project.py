"""A kernel on a real project whose data lives in a throw-away folder: what tests run tools against.

A tool test must see the project's tools, hooks, templates and settings as
they are, and none of its data: a test that wrote into `data/state.db` would
pass or fail by what the last run left there, and could clobber real data.
So everything the kernel writes — the data folder (and the Rhai compile
cache in it), session scratch folders, the transcript, the state store, the
DuckDB folder, the cron store — moves under one folder the caller owns and
throws away. The state store is always attached there, even when the
project's kernel.yaml sets none, so a tool over `state_*` can be tested
anywhere. `llm` points the kernel's `llm:` at a scripted server instead
of the project's (no API key is sent to it).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkernel.config import KernelConfig
    from agentkernel.kernel import Kernel
    from agentkernel.testing.openai_server import FakeLLMServer

SCRIPTED_MODEL = "scripted"  # the model name a scripted server is asked for when the project names none


def project_config(project: Path | str | None = None) -> KernelConfig:
    """The project's kernel.yaml, loaded: `project` is its folder or the file; None: found as the CLI does."""
    from agentkernel.config import find_kernel_config, load_kernel_config
    from agentkernel.errors import ConfigError

    if project is None:
        return load_kernel_config(find_kernel_config())
    given = Path(project)
    path = given if given.is_file() else given / "config" / "kernel.yaml"
    if not path.is_file():
        raise ConfigError(path, f"no kernel.yaml here: {given} is neither a kernel.yaml nor a project folder")
    return load_kernel_config(path)


def throwaway_config(config: KernelConfig, data: Path, *, llm_url: str | None = None) -> KernelConfig:
    """`config` with every store under `data` (made if missing); `llm_url` replaces `llm.base_url`."""
    data = Path(data).resolve()
    data.mkdir(parents=True, exist_ok=True)
    moved = replace(
        config,
        data_dir=data / "data",
        temp_root=data / "scratch",
        messages_db=data / "messages.db",
        state=replace(config.state, db_path=data / "state.db"),
        cron=replace(config.cron, db_path=data / "cron.db"),
        duckdb=replace(config.duckdb, dir=Path(config.duckdb.dir).name),  # an absolute dir stays inside
    )
    return moved if llm_url is None else with_scripted_llm(moved, llm_url)


def with_scripted_llm(config: KernelConfig, base_url: str) -> KernelConfig:
    """`config` whose `llm:` talks to `base_url`, keyless; the project's other LLM settings kept."""
    from agentkernel.config.sections import parse_llm_config

    given: dict[str, Any] = (
        {**config.llm.as_section(), "max_concurrency": config.llm.max_concurrency}
        if config.llm is not None
        else {"model": SCRIPTED_MODEL}
    )
    # keyless, and no fallback: every call goes to the scripted server
    llm = {k: v for k, v in given.items() if k not in ("api_key_env", "fallback") and v is not None}
    llm["base_url"] = base_url
    return replace(config, llm=parse_llm_config(llm, config.path))


def kernel_for_tests(
    project: Path | str | KernelConfig | None, data: Path, *, llm: FakeLLMServer | str | None = None
) -> Kernel:
    """A Kernel on `project` (a folder, a kernel.yaml, a loaded config; None: found from the working
    directory) with its data under `data`; `llm` a started scripted server or a base URL. Close it
    (`with kernel_for_tests(...) as kernel:`)."""
    from agentkernel.config import KernelConfig
    from agentkernel.kernel import Kernel

    config = project if isinstance(project, KernelConfig) else project_config(project)
    url = llm if isinstance(llm, str) or llm is None else llm.base_url
    return Kernel(throwaway_config(config, data, llm_url=url))


__all__ = ["SCRIPTED_MODEL", "kernel_for_tests", "project_config", "throwaway_config", "with_scripted_llm"]
