"""agentkernel — an agent runtime whose tools and hooks are scripts.

The public surface is what this module exports: the `Kernel` and what its
verbs take and return, and the extension seams — a helper (`HelperTable`,
`ScriptCall`, `default_helper_table`), a service (`Services`: your own are
handed to the kernel as `extensions`, the kernel's replaced as
`extra_services`) and an LLM backend (`Provider`; its value types are in
`agentkernel.llm`). The engine room (`assembly`, `agent`, `tools`,
`scripting`) is importable but not promised; docs/architecture.md draws it.

Names are imported on first use (PEP 562): `import agentkernel` — which every
command line entry point does, and the Rhai library's import too — loads
nothing else of agentkernel, so `agentkernel --version` and `agentkernel rhai
run` never pay for the kernel, its services or their libraries.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms at start-up)


# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AgentKernelError": "agentkernel.errors",
    "Caller": "agentkernel.identity",
    "ChatSession": "agentkernel.agent.session",
    "ConfigError": "agentkernel.errors",
    "HelperError": "agentkernel.errors",
    "HelperTable": "agentkernel.helpers.table",
    "HookRecord": "agentkernel.agent.hooks",
    "HookRun": "agentkernel.agent.hooks",
    "HookSpec": "agentkernel.config",
    "Kernel": "agentkernel.kernel",
    "KernelConfig": "agentkernel.config",
    "KernelLimits": "agentkernel.config",
    "LoadProblem": "agentkernel.errors",
    "Process": "agentkernel.agent.processes",
    "Provider": "agentkernel.llm.base",
    "ScriptCall": "agentkernel.helpers.table",
    "ScriptError": "agentkernel.errors",
    "ScriptLimitError": "agentkernel.errors",
    "ScriptSyntaxError": "agentkernel.errors",
    "Services": "agentkernel.bundle",
    "TemplateSpec": "agentkernel.config.templates",
    "ToolResult": "agentkernel.tools.results",
    "ToolSpec": "agentkernel.config",
    "__version__": "agentkernel.version",
    "default_helper_table": "agentkernel.helpers",
    "load_kernel_config": "agentkernel.config",
}

__all__ = [
    "AgentKernelError",
    "Caller",
    "ChatSession",
    "ConfigError",
    "HelperError",
    "HelperTable",
    "HookRecord",
    "HookRun",
    "HookSpec",
    "Kernel",
    "KernelConfig",
    "KernelLimits",
    "LoadProblem",
    "Process",
    "Provider",
    "ScriptCall",
    "ScriptError",
    "ScriptLimitError",
    "ScriptSyntaxError",
    "Services",
    "TemplateSpec",
    "ToolResult",
    "ToolSpec",
    "__version__",
    "default_helper_table",
    "load_kernel_config",
]  # literal, so type checkers see what is exported

if TYPE_CHECKING:  # the static view of the same names, for type checkers and IDEs
    from agentkernel.agent.hooks import HookRecord, HookRun
    from agentkernel.agent.processes import Process
    from agentkernel.agent.session import ChatSession
    from agentkernel.bundle import Services
    from agentkernel.config import (
        HookSpec,
        KernelConfig,
        KernelLimits,
        ToolSpec,
        load_kernel_config,
    )
    from agentkernel.config.templates import TemplateSpec
    from agentkernel.errors import (
        AgentKernelError,
        ConfigError,
        HelperError,
        LoadProblem,
        ScriptError,
        ScriptLimitError,
        ScriptSyntaxError,
    )
    from agentkernel.helpers import default_helper_table
    from agentkernel.helpers.table import HelperTable, ScriptCall
    from agentkernel.identity import Caller
    from agentkernel.kernel import Kernel
    from agentkernel.llm.base import Provider
    from agentkernel.tools.results import ToolResult
    from agentkernel.version import __version__


def __getattr__(name: str) -> object:
    """A public name, imported on first use and kept (PEP 562). Written out here rather than
    imported: importing any subpackage (the Rhai library, `agentkernel.rhai`) runs this
    module, which must load nothing else of agentkernel."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
