"""`agentkernel chat` traces its runs too (S26.1), set up from OTEL_EXPORTER_OTLP_ENDPOINT alone.

A real subprocess fed stdin, the scripted LLM, a tool whose YAML says
`approval: always` approved with `y`, and a real OTLP receiver: the run's
`invoke_agent`, and under it the call's `execute_tool` with the approval
asked and decided as events, arrive by the time the chat has exited (its
close flushes them).
"""

from __future__ import annotations

from pathlib import Path

from tests.agent.conftest import agent_project
from tests.agent.test_chat_cli import chat
from tests.cli.test_chat_approvals import asks_to_send, project
from tests.fakes import FakeLLMServer
from tests.fakes.otlp import http_receiver

__all__ = ["agent_project", "project"]  # the fixtures, shared


def test_a_chat_run_with_an_approval_is_a_trace(project: Path, llm_server: FakeLLMServer) -> None:
    asks_to_send(llm_server)
    with http_receiver() as (endpoint, received):
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "chat-traces"}
        done = chat(project, "send it\ny\n", "--session", "s1", env=env)
        assert done.returncode == 0, done.stderr
        spans = received.wait_for(
            lambda spans: {"invoke_agent tester", "execute_tool send"} <= {s.name for s in spans},
            "the chat's run and its call",
        )
    run = next(s for s in spans if s.name == "invoke_agent tester")
    call = next(s for s in spans if s.name == "execute_tool send")
    assert call.parent_id == run.span_id and run.attributes["gen_ai.conversation.id"] == "s1"
    assert run.resource["service.name"] == "chat-traces"
    assert call.event("agentkernel.approval.asked") is not None
    assert call.event("agentkernel.approval.decided") == {"agentkernel.approval.approved": True}
    assert call.attributes["agentkernel.tool.outcome"] == "success"
