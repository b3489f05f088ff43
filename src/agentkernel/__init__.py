"""agentkernel — an agent runtime whose tools and hooks are scripts.

The public surface is what this module exports; the engine room
(`scripting`, `tools.dispatch`, `catalog`) is importable but not promised.

Names are imported on first use (PEP 562): `import agentkernel` — which every
command line entry point does — costs nothing, so `agentkernel --version` and
`agentkernel rhai run` never pay for the kernel, its services or their
libraries (issue 8: start-up time).
"""

from __future__ import annotations

from agentkernel.lazy_exports import lazy_getattr

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms at start-up)

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AgentKernelError": "agentkernel.errors",
    "Caller": "agentkernel.process",
    "ConfigError": "agentkernel.errors",
    "HelperError": "agentkernel.errors",
    "HookSpec": "agentkernel.config",
    "Kernel": "agentkernel.kernel",
    "KernelConfig": "agentkernel.config",
    "Limits": "agentkernel.config",
    "ScriptError": "agentkernel.errors",
    "ScriptLimitError": "agentkernel.errors",
    "ScriptSyntaxError": "agentkernel.errors",
    "ToolResult": "agentkernel.tools.results",
    "ToolSpec": "agentkernel.config",
    "load_kernel_config": "agentkernel.config",
}

__all__ = [
    "AgentKernelError",
    "Caller",
    "ConfigError",
    "HelperError",
    "HookSpec",
    "Kernel",
    "KernelConfig",
    "Limits",
    "ScriptError",
    "ScriptLimitError",
    "ScriptSyntaxError",
    "ToolResult",
    "ToolSpec",
    "__version__",
    "load_kernel_config",
]  # literal, so type checkers see what is exported

if TYPE_CHECKING:  # the static view of the same names, for type checkers and IDEs
    from agentkernel.config import (
        HookSpec,
        KernelConfig,
        Limits,
        ToolSpec,
        load_kernel_config,
    )
    from agentkernel.errors import (
        AgentKernelError,
        ConfigError,
        HelperError,
        ScriptError,
        ScriptLimitError,
        ScriptSyntaxError,
    )
    from agentkernel.kernel import Kernel
    from agentkernel.process import Caller
    from agentkernel.tools.results import ToolResult


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
