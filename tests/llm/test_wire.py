"""The wire format without a server: the leniencies that let one provider serve
OpenAI, vLLM, llama.cpp and Ollama, and the retry policy's arithmetic."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest

from agentkernel.llm import ChatMessage, CompletionRequest, RetryPolicy, ToolCall, Usage
from agentkernel.llm.openai_compat import (
    StreamAssembler,
    decode_completion,
    encode_message,
    encode_request,
    retry_after_secs,
)


def test_content_as_list_of_parts_and_arguments_as_object() -> None:
    message = {
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "tool_calls": [{"function": {"name": "f", "arguments": {"x": "é"}}}],
    }
    completion = decode_completion({"choices": [{"message": message}]})
    assert completion.text == "ab"
    assert completion.tool_calls == (ToolCall("call_0", "f", '{"x": "é"}'),)
    assert (completion.usage, completion.finish_reason, completion.model) == (Usage(), None, None)


def test_stream_chunks_without_index_are_separate_calls() -> None:
    """Old Ollama streams whole tool calls with no `index`; each new id is a new call."""
    assembler = StreamAssembler()
    for call_id, name in (("a", "first"), ("b", "second")):
        delta = {"tool_calls": [{"id": call_id, "function": {"name": name, "arguments": "{}"}}]}
        assembler.feed({"choices": [{"delta": delta}]})
    assembler.feed({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})
    assert [c.name for c in assembler.finish().tool_calls] == ["first", "second"]


def test_stream_ignores_other_choices_and_takes_late_usage() -> None:
    assembler = StreamAssembler()
    assembler.feed({"choices": [{"index": 1, "delta": {"content": "other"}}]})
    assert assembler.feed({"choices": [{"index": 0, "delta": {"content": "mine"}}]}) == "mine"
    assembler.feed({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": True}})
    completion = assembler.finish()
    assert (completion.text, completion.usage) == ("mine", Usage(3, 0))


def test_tool_only_stream_has_no_text() -> None:
    assembler = StreamAssembler()
    delta = {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}
    assembler.feed({"choices": [{"delta": delta}]})
    assert assembler.finish().text is None


def test_encode_request_leaves_out_what_is_unset() -> None:
    body = encode_request(CompletionRequest((ChatMessage.user("x"),)), "m", stream=False)
    assert body == {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    assert encode_message(ChatMessage.assistant("text")) == {"role": "assistant", "content": "text"}


def test_retry_after_forms() -> None:
    assert retry_after_secs(httpx.Headers({"retry-after": "2"})) == 2.0
    assert retry_after_secs(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert retry_after_secs(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after_secs(httpx.Headers()) is None
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < (retry_after_secs(httpx.Headers({"retry-after": later})) or 0) <= 30


@pytest.mark.parametrize("retry", range(6))
def test_backoff_doubles_with_jitter_and_is_capped(retry: int) -> None:
    policy = RetryPolicy(max_retries=6, backoff_secs=0.5, max_backoff_secs=8)
    base = min(0.5 * 2**retry, 8)
    assert base / 2 <= policy.delay(retry, None) <= base
    assert policy.delay(retry, 3.0) == 3.0 and policy.delay(retry, 99.0) == 8
