"""The OpenAI-compatible endpoint under the real third-party clients that use it as their model.

LangChain's ChatOpenAI (`bind_tools`: a tool call comes back for it to run;
`with_structured_output`: a parsed object, not prose) and the OpenAI Agents
SDK (an agent whose model is our server and whose tool is an MCP server's,
our own `/mcp`, which the Agents SDK reaches through the official `mcp`
client), each through the real server on 127.0.0.1 against the scripted
LLM. Both got 422 for the tools they send before the endpoint took client
tools (docs/server.md, "OpenAI-compatible endpoint"). The `openai` SDK's own
tests are in test_openai_compat.py, the `mcp` client's against `/mcp` in
tests/mcp_serve.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI
from pydantic import BaseModel

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import LiveServer, make_project, write


@pytest.fixture
def served(tmp_path: Path, llm_server: FakeLLMServer) -> Iterator[LiveServer]:
    """The server's test project, with a template `plain` that has no tools of its own."""
    config = make_project(tmp_path, llm_server)
    write(tmp_path / "config" / "templates" / "plain.yaml", "name: plain\ninstructions: Be brief.\n")
    with LiveServer(Kernel(load_kernel_config(config))) as live:
        yield live


def chat_model(live: LiveServer, model: str = "tester") -> ChatOpenAI:
    return ChatOpenAI(model=model, base_url=f"{live.url}/v1", api_key="x", max_retries=0)  # type: ignore[arg-type]


def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 12°C"


def test_langchain_bind_tools_gets_the_tool_call_and_goes_on_from_its_result(
    served: LiveServer, llm_server: FakeLLMServer
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("weather", '{"city": "Oslo"}', id="w1"),)),
        Reply(text="Oslo: 12°C, take a coat."),
    )
    model = chat_model(served).bind_tools([weather])
    question = HumanMessage("weather in Oslo?")
    called = model.invoke([question])
    assert [(c["name"], c["args"], c["id"]) for c in called.tool_calls] == [
        ("weather", {"city": "Oslo"}, "w1")
    ]
    assert called.response_metadata["finish_reason"] == "tool_calls"
    assert called.usage_metadata is not None and called.usage_metadata["total_tokens"] == 15
    result = ToolMessage(weather("Oslo"), tool_call_id="w1")
    answered = model.invoke([question, called, result])
    assert answered.content == "Oslo: 12°C, take a coat."
    sent = llm_server.bodies[1]["messages"]
    assert (sent[-1]["role"], sent[-1]["content"]) == ("tool", "Oslo: 12°C")


class Person(BaseModel):
    name: str
    age: int


def test_langchain_with_structured_output_gets_a_parsed_object(
    served: LiveServer, llm_server: FakeLLMServer
) -> None:
    """It got prose back (response_format was ignored); now the answer is checked against the schema
    (the prose is sent back with its problem, as llm_json does) and parsed by LangChain."""
    llm_server.add(Reply(text="Ada Lovelace, 36"), Reply(text='{"name": "Ada", "age": 36}'))
    person = chat_model(served).with_structured_output(Person).invoke("who wrote the first program?")
    assert person == Person(name="Ada", age=36)
    assert "did not validate" in llm_server.bodies[1]["messages"][-1]["content"]


def test_langchain_streams_a_tool_call_as_chunks(served: LiveServer, llm_server: FakeLLMServer) -> None:
    llm_server.add(
        Reply(text="Checking.", tool_calls=(FakeToolCall("weather", '{"city": "Oslo"}', id="w1"),))
    )
    chunks = list(chat_model(served).bind_tools([weather]).stream("weather in Oslo?"))
    whole: Any = chunks[0]  # AIMessageChunk: `+` joins the pieces
    for chunk in chunks[1:]:
        whole += chunk
    assert whole.content == "Checking."
    calls = [(c["name"], c["args"], c["id"]) for c in whole.tool_calls]
    assert calls == [("weather", {"city": "Oslo"}, "w1")]


def test_an_agents_sdk_agent_uses_our_server_as_its_model_and_an_mcp_tool(
    served: LiveServer, llm_server: FakeLLMServer
) -> None:
    """The Agents SDK sends the MCP server's tools as client tools; our server returns the LLM's call
    of one, the SDK calls it over MCP (our own `/mcp/tester`: `upper`) and sends its result back."""
    set_tracing_disabled(True)  # its traces would go to OpenAI's servers
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "hi"}', id="u1"),)),
        Reply(text="It says HI."),
    )

    async def main(streamed: bool) -> str:
        client = AsyncOpenAI(base_url=f"{served.url}/v1", api_key="x", max_retries=0)
        params = {"url": f"{served.url}/mcp/tester", "timeout": 30}
        async with MCPServerStreamableHttp(params, client_session_timeout_seconds=30) as tools:  # type: ignore[arg-type]
            model = OpenAIChatCompletionsModel(model="plain", openai_client=client)
            agent = Agent(name="shouter", instructions="Use the tools.", mcp_servers=[tools], model=model)
            if streamed:
                run = Runner.run_streamed(agent, "shout")
                async for _ in run.stream_events():
                    pass
                output = run.final_output
            else:
                output = (await Runner.run(agent, "shout")).final_output
        await client.close()
        return str(output)

    assert asyncio.run(main(streamed=False)) == "It says HI."
    first, second = llm_server.bodies
    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered == ["table", "upper"]  # the MCP server's tools, as client tools
    assert second["messages"][-1]["role"] == "tool" and "HI" in second["messages"][-1]["content"]
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "yo"}', id="u2"),)),
        Reply(text="It says YO."),
    )
    assert asyncio.run(main(streamed=True)) == "It says YO."  # the calls as streamed deltas
    assert "YO" in llm_server.bodies[-1]["messages"][-1]["content"]
