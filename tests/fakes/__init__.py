"""Test doubles speaking real protocols over loopback: the scripted LLM, a webhook receiver, an MCP server."""

from tests.fakes.openai_server import (
    Drop,
    FakeLLMServer,
    FakeToolCall,
    HttpError,
    RawResponse,
    RecordedRequest,
    Reply,
)

__all__ = ["Drop", "FakeLLMServer", "FakeToolCall", "HttpError", "RawResponse", "RecordedRequest", "Reply"]
