"""agentkernel.testing — test your tools and agents without a real LLM.

- `FakeLLMServer`: a scripted OpenAI-compatible server on 127.0.0.1 (a real
  HTTP server, so the kernel talks to it through its real provider); script
  it turn by turn (`add(Reply(...))`) or by rules (`Rule`, `RuleBook`,
  `load_rules`: reply with text, a tool call, JSON, fail N times).
- `kernel_for_tests`: a kernel on your project whose data (stores, scratch
  folders, transcript) lives in a throw-away folder, its `llm:` optionally
  pointed at the scripted server.
- pytest fixtures, registered by the package's `pytest11` entry point
  (pytest_plugin.py): `scripted_llm`, `agentkernel_project`,
  `agentkernel_kernel`, `agentkernel_factory`.
- The `tests:` blocks of tool and hook YAML (`read_cases`,
  `read_hook_cases`) and their runner (`run_cases`), which `agentkernel
  tool test` and `agentkernel hook test` drive.

Names are imported on first use, as in the package root: importing this
module costs nothing until a name is used.
"""

from __future__ import annotations

from agentkernel.util.lazy_exports import lazy_getattr

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing

_SERVER = "agentkernel.testing.openai_server"
_EXPORTS: dict[str, str] = {
    "Drop": _SERVER,
    "FakeLLMServer": _SERVER,
    "FakeToolCall": _SERVER,
    "HttpError": _SERVER,
    "RawResponse": _SERVER,
    "RecordedRequest": _SERVER,
    "Reply": _SERVER,
    "Rule": "agentkernel.testing.rules",
    "RuleBook": "agentkernel.testing.rules",
    "RulesError": "agentkernel.testing.rules",
    "load_rules": "agentkernel.testing.rules",
    "kernel_for_tests": "agentkernel.testing.project",
    "throwaway_config": "agentkernel.testing.project",
    "read_cases": "agentkernel.testing.cases",
    "read_hook_cases": "agentkernel.testing.hook_cases",
    "run_cases": "agentkernel.testing.runner",
}

__all__ = [
    "Drop",
    "FakeLLMServer",
    "FakeToolCall",
    "HttpError",
    "RawResponse",
    "RecordedRequest",
    "Reply",
    "Rule",
    "RuleBook",
    "RulesError",
    "kernel_for_tests",
    "load_rules",
    "read_cases",
    "read_hook_cases",
    "run_cases",
    "throwaway_config",
]  # literal, so type checkers see what is exported

if TYPE_CHECKING:
    from agentkernel.testing.cases import read_cases
    from agentkernel.testing.hook_cases import read_hook_cases
    from agentkernel.testing.openai_server import (
        Drop,
        FakeLLMServer,
        FakeToolCall,
        HttpError,
        RawResponse,
        RecordedRequest,
        Reply,
    )
    from agentkernel.testing.project import kernel_for_tests, throwaway_config
    from agentkernel.testing.rules import Rule, RuleBook, RulesError, load_rules
    from agentkernel.testing.runner import run_cases

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
