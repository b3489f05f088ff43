"""The scripted LLM server itself: loud when surprised, bounded, and honest about what it saw."""

from __future__ import annotations

import contextlib

import httpx

from tests.fakes import FakeLLMServer, HttpError, RecordedRequest, Reply

CHAT = "/chat/completions"


def post(server: FakeLLMServer, body: object, path: str = CHAT) -> httpx.Response:
    return httpx.post(server.base_url + path, json=body, timeout=5)


def test_an_empty_script_fails_loudly(llm_server: FakeLLMServer) -> None:
    response = post(llm_server, {"messages": []})
    assert response.status_code == 500
    assert "script is empty, request #1 was not expected" in response.json()["error"]["message"]
    assert llm_server.unexpected == 1


def test_turns_in_order_then_the_responder(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="first"), HttpError(429, retry_after="1"))
    llm_server.respond_with(lambda request: Reply(text=f"echo {len(request.body['messages'])}"))
    first, second, third = (post(llm_server, {"messages": [{}]}) for _ in range(3))
    assert first.json()["choices"][0]["message"]["content"] == "first"
    assert (second.status_code, second.headers["retry-after"]) == (429, "1")
    assert third.json()["choices"][0]["message"]["content"] == "echo 1"
    assert llm_server.remaining == 0 and llm_server.unexpected == 0


def test_a_responder_that_raises_gives_a_500(llm_server: FakeLLMServer) -> None:
    def broken(request: RecordedRequest) -> Reply:
        raise KeyError("messages")

    llm_server.respond_with(broken)
    response = post(llm_server, {})
    assert response.status_code == 500 and "responder raised KeyError" in response.text


def test_records_path_headers_and_body(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="ok"))
    httpx.post(llm_server.base_url + CHAT, json={"a": 1}, headers={"X-Test": "yes"}, timeout=5)
    [request] = llm_server.requests
    assert (request.method, request.path, request.body) == ("POST", "/v1/chat/completions", {"a": 1})
    assert request.headers["x-test"] == "yes"


def test_unknown_route_is_404(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="kept"))
    response = httpx.get(llm_server.base_url + "/embeddings", timeout=5)
    assert response.status_code == 404 and "no route GET /v1/embeddings" in response.text
    assert llm_server.remaining == 1


def test_models_are_listed_apart_from_the_script() -> None:
    with FakeLLMServer(models=("llama3.1:latest",)) as server:
        server.add(Reply(text="kept"))
        response = httpx.get(server.base_url + "/models", timeout=5)
        assert response.json()["data"][0]["id"] == "llama3.1:latest"
        assert server.remaining == 1


def test_a_key_is_required_when_given() -> None:
    with FakeLLMServer(api_key="sk-1") as server:
        server.add(Reply(text="ok"))
        url = server.base_url + CHAT
        missing = httpx.post(url, json={}, timeout=5)
        wrong = httpx.post(url, json={}, headers={"Authorization": "Bearer sk-2"}, timeout=5)
        right = httpx.post(url, json={}, headers={"Authorization": "Bearer sk-1"}, timeout=5)
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert missing.json()["error"]["message"] == "You didn't provide an API key."
    assert wrong.json()["error"]["message"] == "Incorrect API key provided: sk-2"
    assert right.json()["choices"][0]["message"]["content"] == "ok"


def test_request_limit_stops_runaway_loops() -> None:
    with FakeLLMServer(max_requests=2) as server:
        server.respond_with(lambda request: Reply(text="ok"))
        statuses = [post(server, {}).status_code for _ in range(3)]
    assert statuses == [200, 200, 500]


def test_stop_does_not_wait_for_a_slow_turn() -> None:
    server = FakeLLMServer().start()
    server.add(Reply(text="slow", delay=30))
    with contextlib.suppress(httpx.TimeoutException):
        httpx.post(server.base_url + CHAT, json={}, timeout=0.2)
    server.stop()  # the turn's wait ends with the stop (a daemon thread; stop joins only the server)
    assert server._thread is not None and not server._thread.is_alive()
