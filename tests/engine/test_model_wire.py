"""The wire client against servers that differ: OpenAI's shape, and what vLLM, llama.cpp, Ollama and proxies
such as LiteLLM send instead. Real openai SDK, real sockets, the scripted server in tests/fakes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from email.utils import formatdate
from time import time
from typing import Any

import pytest

from bot.engine.errors import ModelError
from bot.engine.messages import Message
from bot.engine.model.client import OpenAIChatModel
from bot.engine.model.retrying import RetryingModel, RetryPolicy
from bot.engine.model.wire import ModelRequest
from tests.fakes.openai_server import FakeOpenAI, call

TOOL = {"type": "function", "function": {"name": "echo", "description": "Echo text back.",
                                         "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}


def request(n: int = 3) -> ModelRequest:
    msgs = [Message.system("You are terse.")]
    msgs += [Message.user(f"question {i}") if i % 2 == 0 else Message.assistant(f"answer {i}") for i in range(n)]
    return ModelRequest("fake-model", tuple(msgs), (TOOL,), 0.2)


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
async def model(request: pytest.FixtureRequest, fake_llm: FakeOpenAI) -> AsyncIterator[OpenAIChatModel]:
    m = OpenAIChatModel(api_key="sk-test", base_url=fake_llm.base_url, timeout=5, stream=request.param)
    yield m
    await m.close()


@pytest.fixture
async def plain(fake_llm: FakeOpenAI) -> AsyncIterator[OpenAIChatModel]:
    m = OpenAIChatModel(api_key="sk-test", base_url=fake_llm.base_url, timeout=5)
    yield m
    await m.close()


async def error_of(model: OpenAIChatModel) -> ModelError:
    with pytest.raises(ModelError) as info:
        await model.complete(request())
    return info.value


def completion(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "served-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}], **extra}


async def test_the_body_sent_is_the_payload_with_the_key_and_the_reply_is_typed(model: OpenAIChatModel,
                                                                                 fake_llm: FakeOpenAI):
    fake_llm.calls(call("echo", {"text": "hi"}, "c1"), call("echo", {"text": "again"}, "c2"), usage=(12, 4))
    req = request(20)
    response = await model.complete(req)
    sent = dict(fake_llm.requests[0])
    if model.stream:
        assert sent.pop("stream") is True and sent.pop("stream_options") == {"include_usage": True}
    assert sent == json.loads(json.dumps(req.payload))  # nothing added, dropped or reshaped
    assert fake_llm.headers[0]["Authorization"] == "Bearer sk-test"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.message.tool_calls] == [
        ("c1", "echo", {"text": "hi"}), ("c2", "echo", {"text": "again"})]
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (12, 4)
    assert response.finish_reason == "tool_calls"


async def test_vllm_shape_no_usage_null_content_extra_fields(plain: OpenAIChatModel, fake_llm: FakeOpenAI):
    message = {"role": "assistant", "content": None, "reasoning_content": None,
               "tool_calls": [{"id": "chatcmpl-tool-9", "type": "function",
                               "function": {"name": "echo", "arguments": "{\"text\": \"x\"}"}}]}
    fake_llm.raw(completion(message, prompt_logprobs=None, kv_transfer_params=None))
    response = await plain.complete(request())
    assert response.message.content == ""
    assert response.message.tool_calls[0].name == "echo"
    assert response.usage.total_tokens == 0
    assert response.model == "served-model"


async def test_arguments_as_an_object_and_missing_ids_are_made_usable(plain: OpenAIChatModel, fake_llm: FakeOpenAI):
    message = {"role": "assistant", "content": "",
               "tool_calls": [{"function": {"name": "echo", "arguments": {"text": "ünïcode"}}},
                              {"function": {"name": "echo", "arguments": {}}}]}
    fake_llm.raw(completion(message, usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}))
    response = await plain.complete(request())
    calls = response.message.tool_calls
    assert [json.loads(c.arguments) for c in calls] == [{"text": "ünïcode"}, {}]
    assert len({c.id for c in calls}) == 2 and all(c.id for c in calls)


async def test_ollama_style_stream_without_usage_or_indexes(fake_llm: FakeOpenAI):
    base = {"id": "s", "object": "chat.completion.chunk", "created": 0, "model": "llama3.2"}
    fake_llm.raw([
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me "}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "check."}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "echo", "arguments": "{\"text\":\"a\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "echo", "arguments": "{\"text\":\"b\"}"}}]},
            "finish_reason": "tool_calls"}]},
    ])
    m = OpenAIChatModel(api_key="ollama", base_url=fake_llm.base_url, timeout=5, stream=True)
    try:
        response = await m.complete(request())
    finally:
        await m.close()
    assert response.message.content == "Let me check."
    assert [(c.id, json.loads(c.arguments)) for c in response.message.tool_calls] == [
        ("call_a", {"text": "a"}), ("call_b", {"text": "b"})]
    assert response.usage.total_tokens == 0


async def test_an_error_event_inside_a_stream_is_one_retryable_sentence(fake_llm: FakeOpenAI):
    base = {"id": "s", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    fake_llm.raw([{**base, "choices": [{"index": 0, "delta": {"content": "par"}, "finish_reason": None}]},
                  {"error": {"message": "upstream connection reset", "type": "server_error", "code": "500"}}])
    m = OpenAIChatModel(api_key="k", base_url=fake_llm.base_url, timeout=5, stream=True)
    try:
        err = await error_of(m)
    finally:
        await m.close()
    assert err.retryable and "upstream connection reset" in str(err)


@pytest.mark.parametrize(("status", "body", "code", "retryable"), [
    # vLLM: the error is the whole body, its code the status as a number
    (400, {"object": "error", "message": "tools: invalid schema", "type": "BadRequestError", "param": None,
           "code": 400}, "bad_request", False),
    # LiteLLM: the code is the HTTP status as a string
    (429, {"error": {"message": "litellm.RateLimitError: slow down", "type": "throttling_error", "param": "None",
                     "code": "429"}}, "rate_limited", True),
    (500, {"error": {"message": "litellm.InternalServerError", "type": None, "param": None, "code": "500"}},
     "http_500", True),
    # llama.cpp and vLLM: a context overflow in their own words
    (400, {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                     "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 4096}},
     "context_length_exceeded", False),
    (400, {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you "
           "requested 5000 tokens.", "type": "BadRequestError", "param": None, "code": 400},
     "context_length_exceeded", False),
    (429, {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                     "code": "insufficient_quota"}}, "insufficient_quota", False),
    (502, "<html>Bad Gateway</html>", "http_502", True),
])
async def test_error_bodies_of_different_servers(plain: OpenAIChatModel, fake_llm: FakeOpenAI, status: int,
                                                 body: Any, code: str, retryable: bool):
    fake_llm.raw(body, status=status)
    err = await error_of(plain)
    assert (err.code, err.retryable, err.status) == (code, retryable, status)
    assert "\n" not in str(err) and len(str(err)) < 300


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"retry-after-ms": "1500"}, 1.5),
    ({"Retry-After": "7"}, 7.0),
    ({"x-ratelimit-reset-requests": "6m0s"}, 360.0),
    ({"x-ratelimit-reset-tokens": "250ms"}, 0.25),
    ({"x-ratelimit-reset-requests": "1m30.5s", "retry-after": "soon"}, 90.5),
    ({"retry-after": "whenever"}, None),
])
async def test_retry_hints_under_other_header_names(plain: OpenAIChatModel, fake_llm: FakeOpenAI,
                                                   headers: dict[str, str], seconds: float | None):
    fake_llm.fail(429, headers=headers)
    err = await error_of(plain)
    assert err.retry_after == (pytest.approx(seconds) if seconds is not None else None)


async def test_retry_after_as_an_http_date(plain: OpenAIChatModel, fake_llm: FakeOpenAI):
    fake_llm.fail(503, headers={"Retry-After": formatdate(time() + 30, usegmt=True)})
    err = await error_of(plain)
    assert err.retry_after is not None and 25 <= err.retry_after <= 31


async def test_the_retrying_wrapper_waits_as_long_as_the_proxy_says(plain: OpenAIChatModel, fake_llm: FakeOpenAI):
    fake_llm.raw({"error": {"message": "slow down", "code": "429"}}, status=429,
                 headers={"x-ratelimit-reset-requests": "2s"})
    fake_llm.reply("done")
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    response = await RetryingModel(plain, RetryPolicy(max_attempts=3), sleep=sleep).complete(request())
    assert response.message.content == "done" and waits == [2.0]


async def test_an_error_in_a_200_body_is_one_clear_sentence(plain: OpenAIChatModel, fake_llm: FakeOpenAI):
    fake_llm.raw({"error": {"message": "Provider returned error", "code": 502}, "user_id": "u"})
    err = await error_of(plain)
    assert "Provider returned error" in str(err) and err.code == "body_error"


def test_the_encoded_body_is_the_payload_whatever_was_encoded_before():
    first = request(20)
    longer = ModelRequest("fake-model", (*first.messages, Message.user("naïve ünïcode \u2028 \"quoted\"")),
                          first.tools, None)
    assert json.loads(first.body()) == first.payload
    assert json.loads(longer.body(stream=True)) == {**longer.payload, "stream": True}  # reuses the 20 encoded


@pytest.mark.parametrize("body", [b"<html><body>Welcome to the proxy</body></html>", "just text",
                                  ["not", "an", "object"]], ids=["html", "json-string", "json-list"])
async def test_a_200_that_is_not_a_chat_completion_is_one_clear_error(plain: OpenAIChatModel, fake_llm: FakeOpenAI,
                                                                       body: Any):
    # a base URL that points at a web page or a proxy's portal answers 200 with something else entirely
    fake_llm.raw(body)
    err = await error_of(plain)
    assert str(err) == "the model endpoint answered with something that is not a chat completion"
    assert err.code == "not_json" and not err.retryable


async def test_choices_of_the_wrong_shape_are_read_as_no_choices(plain: OpenAIChatModel, fake_llm: FakeOpenAI):
    fake_llm.raw({"id": "x", "object": "chat.completion", "model": "m", "choices": "none today"})
    err = await error_of(plain)
    assert err.code == "empty"


async def test_an_endpoint_that_refuses_the_connection_is_unreachable_not_slow():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIChatModel(api_key="sk-test", base_url=f"http://127.0.0.1:{port}/v1", timeout=5)
    try:
        err = await error_of(model)
    finally:
        await model.close()
    assert str(err) == "the model endpoint could not be reached"
    assert err.code == "connection" and err.retryable
    # the log line and the audit row name the refusal, not the transport's "Request timed out"
    assert err.detail is not None and err.detail.startswith("could not connect to the model endpoint: ")
    assert "timed out" not in err.detail and "Timeout" not in err.detail and "the transport said" not in err.detail
    assert f"127.0.0.1:{port}" in err.detail  # where it tried, once
    assert err.detail.endswith(": connection refused")  # the cause, stated once


async def test_an_endpoint_that_never_answers_is_a_timeout(fake_llm: FakeOpenAI):
    fake_llm.hang(3)
    model = OpenAIChatModel(api_key="sk-test", base_url=fake_llm.base_url, timeout=0.3)
    try:
        err = await error_of(model)
    finally:
        await model.close()
    assert str(err) == "the model did not answer in time" and err.code == "timeout"
