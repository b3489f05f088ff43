"""A project whose templates use the built-in hooks, a kernel on it, and one turn at a time.

The kernel loads the package's built-in hooks by itself (origin `builtin`);
`variant` copies one into the project under another name with other
settings, as a user would to tune one.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent, LoopResult
from agentkernel.agent.session import ChatSession
from agentkernel.builtins import HOOKS_FOLDER as BUILTIN_HOOKS
from agentkernel.config import load_kernel_config
from agentkernel.services.state import Namespace, SqliteStateStore
from tests import deployed
from tests.conftest import write_kernel_yaml
from tests.fakes import FakeLLMServer

if TYPE_CHECKING:
    from agentkernel.services.state_pg import PostgresStateStore

UPPER_TOOL = {
    "kind": "script_tool",
    "name": "upper",
    "description": "Upper-case a text.",
    "script": "upper.js",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_project(root: Path, llm: FakeLLMServer, templates: dict[str, list[str]]) -> Path:
    """kernel.yaml (the LLM, a state store, the built-in hooks), tool `upper`, `templates` (name: hooks)."""
    write_kernel_yaml(
        root,
        "scripts:\n  builtins: true\n"
        f"llm:\n  base_url: {llm.base_url}\n  model: fake\n  max_retries: 0\n  timeout_secs: 10\n"
        "state:\n  db_path: data/state.db\n",
    )
    tools = root / "config" / "scripts" / "tools"
    write(tools / "upper.yaml", yaml.safe_dump(UPPER_TOOL))
    write(tools / "upper.js", "function run(args) { return args.text.toUpperCase(); }\n")
    for name, hooks in templates.items():
        template = {"name": name, "instructions": f"You are {name}.", "tools": ["upper"], "hooks": hooks}
        write(root / "config" / "templates" / f"{name}.yaml", yaml.safe_dump(template, allow_unicode=True))
    return root / "config" / "kernel.yaml"


def variant(root: Path, builtin: str, name: str, **settings: Any) -> None:
    """The built-in hook `builtin` copied into the project as `name`, with `settings` changed."""
    spec = yaml.safe_load((BUILTIN_HOOKS / f"{builtin}.yaml").read_text(encoding="utf-8"))
    script = Path(spec["script"])
    hooks = root / "config" / "scripts" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    shutil.copy(BUILTIN_HOOKS / script, hooks / f"{name}{script.suffix}")
    spec |= {"name": name, "script": f"{name}{script.suffix}", **settings}
    write(hooks / f"{name}.yaml", yaml.safe_dump(spec, allow_unicode=True, sort_keys=False))


@dataclass
class Turn:
    result: LoopResult
    events: list[LoopEvent]

    @property
    def answer(self) -> str | None:
        return self.result.answer

    @property
    def notices(self) -> list[str]:
        return [str(e.data["text"]) for e in self.events if e.kind == "notice"]


def send(chat: ChatSession, text: str) -> Turn:
    """One user message through the agent loop; every event it emitted."""
    events: list[LoopEvent] = []

    async def collect(event: LoopEvent) -> None:
        events.append(event)

    return Turn(asyncio.run(chat.send(text, collect)), events)


def ask(kernel: Kernel, template: str, text: str, user: str = "anna") -> Turn:
    """`text` as the first message of a new session of `user` with `template`."""
    return send(kernel.chat(template, user_id=user, session_id=str(uuid.uuid4()), stream=False), text)


def state_store(kernel: Kernel) -> SqliteStateStore | PostgresStateStore:
    """The project's state store, opened beside the kernel's (as another process would): its file, or
    the store database under the postgres deployment (tests/deployed.py)."""
    return deployed.state_store(kernel.config.root / "data" / "state.db")


def kernel_on(config: Path) -> Kernel:
    return Kernel(load_kernel_config(config))


AGENT = "agent"
USER = "user"

__all__ = [
    "AGENT",
    "BUILTIN_HOOKS",
    "USER",
    "Namespace",
    "Turn",
    "ask",
    "kernel_on",
    "make_project",
    "send",
    "state_store",
    "variant",
    "write",
]
