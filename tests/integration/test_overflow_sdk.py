"""is_context_overflow on the exceptions the real SDK clients raise for real error bodies.

A mock transport answers with the status and JSON body the APIs (and common
OpenAI-compatible servers) send; the SDK builds its own exception from it.
"""

from __future__ import annotations

from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from _fake_server import BASE_URL, http_library

from bareagent_compact import is_context_overflow


def raised_by(api: str, status: int | None, body: Any) -> BaseException:
    """The exception the real client raises when the server answers ``status`` and ``body``
    (``status=None``: the connection fails; ``status=0``: the request times out)."""

    http = http_library("anthropic" if api == "anthropic" else "openai")

    def handler(request: Any) -> Any:
        if status is None:
            raise http.ConnectError("connection refused", request=request)
        if status == 0:
            raise http.ReadTimeout("timed out", request=request)
        return http.Response(status, json=body)

    http_client = http.Client(transport=http.MockTransport(handler))
    try:
        if api == "anthropic":
            client = anthropic.Anthropic(
                api_key="x", base_url=BASE_URL, max_retries=0, http_client=http_client
            )
            client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        elif api == "chat":
            openai.OpenAI(
                api_key="x", base_url=BASE_URL + "/v1", max_retries=0, http_client=http_client
            ).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        else:
            openai.OpenAI(
                api_key="x", base_url=BASE_URL + "/v1", max_retries=0, http_client=http_client
            ).responses.create(model="m", input="hi")
    except Exception as error:
        return error
    raise AssertionError("the client did not raise")


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def openai_error(message: str, code: str | None, kind: str = "invalid_request_error") -> Any:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


OVERFLOW = {
    "anthropic_prompt_too_long": (
        "anthropic",
        400,
        anthropic_error(
            "invalid_request_error", "prompt is too long: 213462 tokens > 200000 maximum"
        ),
    ),
    "anthropic_request_too_large": (
        "anthropic",
        413,
        anthropic_error(
            "request_too_large", "Request exceeds the maximum allowed number of bytes."
        ),
    ),
    "openai_chat": (
        "chat",
        400,
        openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130012 tokens. Please reduce the length of the messages.",
            "context_length_exceeded",
        ),
    ),
    "openai_responses": (
        "responses",
        400,
        openai_error(
            "Your input exceeds the context window of this model. Please adjust your input "
            "and try again.",
            "context_length_exceeded",
        ),
    ),
    "vllm": (
        "chat",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens (4000 in the messages, 1000 in the completion). Please "
            "reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "llama_cpp": (
        "chat",
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4476,
                "n_ctx": 4096,
            }
        },
    ),
    "lm_studio": (
        "chat",
        400,
        {
            "error": "Trying to keep the first 10136 tokens when context the overflows. However, "
            "the model is loaded with context length of only 7866 tokens, which is not enough."
        },
    ),
    "mistral": (
        "chat",
        400,
        {
            "object": "error",
            "message": "Prompt contains 40000 tokens and 0 draft tokens, too large for model "
            "with 32768 maximum context length",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        },
    ),
    "groq": (
        "chat",
        400,
        openai_error(
            "Please reduce the length of the messages or completion.", "context_length_exceeded"
        ),
    ),
    "together_tgi": (
        "chat",
        422,
        {
            "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= "
            "8193. Given: 8000 `inputs` tokens and 1000 `max_new_tokens`",
            "error_type": "validation",
        },
    ),
}

NOT_OVERFLOW = {
    "anthropic_rate_limit": (
        "anthropic",
        429,
        anthropic_error(
            "rate_limit_error",
            "This request would exceed the rate limit for your organization of 30,000 input "
            "tokens per minute.",
        ),
    ),
    "anthropic_overloaded": ("anthropic", 529, anthropic_error("overloaded_error", "Overloaded")),
    "anthropic_auth": (
        "anthropic",
        401,
        anthropic_error("authentication_error", "invalid x-api-key"),
    ),
    "anthropic_other_bad_request": (
        "anthropic",
        400,
        anthropic_error("invalid_request_error", "messages: roles must alternate"),
    ),
    "anthropic_connection": ("anthropic", None, None),
    "anthropic_timeout": ("anthropic", 0, None),
    "openai_tpm_rate_limit": (
        "chat",
        429,
        openai_error(
            "Request too large for gpt-4o in organization org-x on tokens per min (TPM): "
            "Limit 30000, Requested 45000.",
            "rate_limit_exceeded",
            "tokens",
        ),
    ),
    "openai_quota": (
        "chat",
        429,
        openai_error(
            "You exceeded your current quota.", "insufficient_quota", "insufficient_quota"
        ),
    ),
    "openai_auth": ("chat", 401, openai_error("Incorrect API key provided.", "invalid_api_key")),
    "openai_unavailable": ("responses", 503, openai_error("The server is overloaded.", None)),
    "openai_connection": ("chat", None, None),
    "openai_timeout": ("responses", 0, None),
}


@pytest.mark.parametrize("case", sorted(OVERFLOW))
def test_overflow_errors_raised_by_the_real_clients_are_recognised(case: str) -> None:
    api, status, body = OVERFLOW[case]
    assert is_context_overflow(raised_by(api, status, body))


@pytest.mark.parametrize("case", sorted(NOT_OVERFLOW))
def test_other_errors_raised_by_the_real_clients_are_not_overflow(case: str) -> None:
    api, status, body = NOT_OVERFLOW[case]
    error = raised_by(api, status, body)
    assert not is_context_overflow(error), type(error).__name__


def test_sdk_exception_classes_built_directly_from_error_bodies() -> None:

    http = http_library("anthropic")
    request = http.Request("POST", BASE_URL + "/v1/messages")
    body = anthropic_error(
        "invalid_request_error", "prompt is too long: 201000 tokens > 200000 maximum"
    )
    error = anthropic.BadRequestError(
        "Error code: 400", response=http.Response(400, request=request), body=body
    )
    assert is_context_overflow(error)
    overloaded = anthropic.InternalServerError(
        "Error code: 529",
        response=http.Response(529, request=request),
        body=anthropic_error("overloaded_error", "Overloaded"),
    )
    assert not is_context_overflow(overloaded)
    http = http_library("openai")
    request = http.Request("POST", BASE_URL + "/v1/chat/completions")
    chat = openai.BadRequestError(
        "Error code: 400",
        response=http.Response(400, request=request),
        body={
            "message": "Bad request",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        },
    )
    assert is_context_overflow(chat)
