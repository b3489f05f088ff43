"""The scripted OpenAI-compatible server, re-exported: it lives in `agentkernel.testing` (issue 15).

One fake, not two: the project's tests and users' own tests run against the
same server (src/agentkernel/testing/openai_server.py).
"""

from agentkernel.testing.openai_server import (
    CHAT_PATH,
    MODELS_PATH,
    Drop,
    Exchange,
    FakeLLMServer,
    FakeToolCall,
    HttpError,
    ModelList,
    RawResponse,
    RecordedRequest,
    Reply,
    Responder,
    Turn,
)

__all__ = [
    "CHAT_PATH",
    "MODELS_PATH",
    "Drop",
    "Exchange",
    "FakeLLMServer",
    "FakeToolCall",
    "HttpError",
    "ModelList",
    "RawResponse",
    "RecordedRequest",
    "Reply",
    "Responder",
    "Turn",
]
