"""agentkernel — an agent runtime whose tools and hooks are scripts.

The public surface is what this module exports; the engine room
(`scripting`, `tools.dispatch`, `catalog`) is importable but not promised.
"""

from agentkernel.config import HookSpec, KernelConfig, Limits, ToolSpec, load_kernel_config
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

__version__ = "0.1.0"

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
]
