"""LLM providers: the `Provider` contract, the OpenAI-compatible HTTP provider,
the kernel-wide concurrency limit, and the `llm:` section of kernel.yaml (S23.4, S9.2).

Names are imported on first use (PEP 562): importing `agentkernel.llm.base`
for its types must not pull in httpx, which only a kernel that talks to an
LLM needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkernel.util.lazy_exports import lazy_getattr

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        (
            "ChatMessage",
            "Completion",
            "CompletionRequest",
            "Provider",
            "ProviderError",
            "StreamDone",
            "StreamEvent",
            "TextDelta",
            "ToolCall",
            "ToolSchema",
            "Usage",
        ),
        "agentkernel.llm.base",
    ),
    **dict.fromkeys(("LLMConfig", "build_provider", "parse_llm_config"), "agentkernel.llm.config"),
    "LimitedProvider": "agentkernel.llm.limited",
    **dict.fromkeys(("OpenAICompatProvider", "RetryPolicy"), "agentkernel.llm.openai_compat"),
}

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
]  # literal, so type checkers see what is exported

if TYPE_CHECKING:
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
    from agentkernel.llm.config import (
        LLMConfig,
        build_provider,
        parse_llm_config,
    )
    from agentkernel.llm.limited import LimitedProvider
    from agentkernel.llm.openai_compat import (
        OpenAICompatProvider,
        RetryPolicy,
    )


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
