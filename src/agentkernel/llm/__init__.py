"""LLM providers: the `Provider` contract, the OpenAI-compatible HTTP provider,
the kernel-wide concurrency limit, and the `llm:` section of kernel.yaml (S23.4, S9.2).
"""

from agentkernel.llm.base import (
    ChatMessage,
    Completion,
    CompletionRequest,
    Provider,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSchema,
    Usage,
)
from agentkernel.llm.config import LLMConfig, build_provider, parse_llm_config
from agentkernel.llm.limited import LimitedProvider
from agentkernel.llm.openai_compat import OpenAICompatProvider, RetryPolicy

__all__ = [
    "ChatMessage",
    "Completion",
    "CompletionRequest",
    "LLMConfig",
    "LimitedProvider",
    "OpenAICompatProvider",
    "Provider",
    "ProviderError",
    "RetryPolicy",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "build_provider",
    "parse_llm_config",
]
