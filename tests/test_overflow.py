"""is_context_overflow: context-length errors told apart from every other API failure.

The exceptions here are plain ones carrying the status, body and message the
servers send; the real SDK exception classes are tested in
tests/integration/test_overflow_sdk.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from bareagent_compact import is_context_overflow


class StatusError(Exception):
    """Shaped like an SDK status error: ``status_code``, ``body``, ``message``."""

    def __init__(self, message: str, status_code: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.body = body


# What servers answer when the prompt does not fit (message, HTTP status).
SERVER_OVERFLOW_MESSAGES = {
    "anthropic": ("prompt is too long: 213462 tokens > 200000 maximum", 400),
    "anthropic_max_tokens": (
        "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, "
        "decrease input length or `max_tokens` and try again",
        400,
    ),
    "openai_chat": (
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130012 tokens. Please reduce the length of the messages.",
        400,
    ),
    "openai_responses": (
        "Your input exceeds the context window of this model. Please adjust your input "
        "and try again.",
        400,
    ),
    "vllm": (
        "This model's maximum context length is 4096 tokens. However, you requested 5000 "
        "tokens (4000 in the messages, 1000 in the completion). Please reduce the length "
        "of the messages or completion.",
        400,
    ),
    "vllm_max_tokens": (
        "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum "
        "context length is 4096 tokens and your request has 2778 input tokens "
        "(8000 > 4096 - 2778).",
        400,
    ),
    "vllm_decoder": (
        "The decoder prompt (length 9000) is longer than the maximum model length of 8192. "
        "Make sure that `max_model_len` is no smaller than the number of text tokens.",
        400,
    ),
    "llama_cpp": ("the request exceeds the available context size, try increasing it", 400),
    "llama_cpp_counts": (
        "request (4476 tokens) exceeds the available context size (4096 tokens)",
        400,
    ),
    "lm_studio": (
        "Trying to keep the first 10136 tokens when context the overflows. However, the model "
        "is loaded with context length of only 7866 tokens, which is not enough. Try to load "
        "the model with a larger context length, or provide a shorter input",
        400,
    ),
    "lm_studio_n_keep": (
        "The number of tokens to keep from the initial prompt is greater than the context length",
        400,
    ),
    "ollama": ("input length exceeds the context length", 500),
    "together_tgi": (
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8193. "
        "Given: 8000 `inputs` tokens and 1000 `max_new_tokens`",
        422,
    ),
    "groq": ("Please reduce the length of the messages or completion.", 400),
    "cerebras": (
        "Please reduce the length of the messages or completion. Current length is 42328 "
        "while limit is 40000",
        400,
    ),
    "mistral": (
        "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 "
        "maximum context length",
        400,
    ),
    "openrouter": (
        "This endpoint's maximum context length is 128000 tokens. However, you requested "
        "about 140000 tokens (130000 of text input, 10000 in the output). Please reduce the "
        'length of either one, or use the "middle-out" transform to compress your prompt '
        "automatically.",
        400,
    ),
    "gemini": (
        "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
        400,
    ),
    "xai": (
        "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
        400,
    ),
    "bedrock": ("Input is too long for requested model.", 400),
}


@pytest.mark.parametrize("server", sorted(SERVER_OVERFLOW_MESSAGES))
def test_server_overflow_messages_are_recognised_from_the_text_alone(server: str) -> None:
    message, _status = SERVER_OVERFLOW_MESSAGES[server]
    assert is_context_overflow(Exception(message))
    assert is_context_overflow(RuntimeError(f"Error code: 400 - {{'error': {message!r}}}"))


@pytest.mark.parametrize("server", sorted(SERVER_OVERFLOW_MESSAGES))
def test_server_overflow_messages_are_recognised_with_their_status_and_body(server: str) -> None:
    message, status = SERVER_OVERFLOW_MESSAGES[server]
    body = {"error": {"message": message, "type": "invalid_request_error", "code": status}}
    assert is_context_overflow(StatusError(f"Error code: {status}", status, body))


def test_overflow_code_alone_is_enough() -> None:
    for code in ("context_length_exceeded", "exceed_context_size_error"):
        body = {"message": "Bad request", "type": "invalid_request_error", "code": code}
        assert is_context_overflow(StatusError("Bad request", 400, body))
        error = StatusError("Bad request", 400)
        error.code = code  # type: ignore[attr-defined]  # OpenAI SDK errors carry .code
        assert is_context_overflow(error)


def test_anthropic_request_too_large_counts_as_overflow() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "request_too_large",
            "message": "Request exceeds the maximum allowed number of bytes.",
        },
    }
    assert is_context_overflow(StatusError("Error code: 413", 413, body))


def test_ordinary_bad_requests_are_not_overflow() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "messages: roles must alternate between user and assistant",
        },
    }
    assert not is_context_overflow(StatusError("Error code: 400", 400, body))
    assert not is_context_overflow(ValueError("invalid literal for int()"))
    assert not is_context_overflow(KeyError("content"))


NOT_OVERFLOW = {
    "openai_tpm_rate_limit": StatusError(
        "Request too large for gpt-4o in organization org-x on tokens per min (TPM): "
        "Limit 30000, Requested 45000. The input or output tokens must be reduced in order "
        "to run successfully.",
        429,
        {"message": "Request too large", "type": "tokens", "code": "rate_limit_exceeded"},
    ),
    "groq_413_tpm": StatusError(
        "Request too large for model `llama3-70b-8192` on tokens per minute (TPM): Limit "
        "6000, Requested 14000, please reduce your message size and try again.",
        413,
        {"error": {"type": "tokens", "code": "rate_limit_exceeded"}},
    ),
    "anthropic_rate_limit": StatusError(
        "Error code: 429",
        429,
        {
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "Number of request tokens has exceeded your per-minute rate limit",
            },
        },
    ),
    "anthropic_overloaded": StatusError(
        "Error code: 529",
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ),
    "service_unavailable": StatusError("Service Unavailable", 503),
    "authentication": StatusError(
        "Error code: 401",
        401,
        {"type": "error", "error": {"type": "authentication_error", "message": "invalid key"}},
    ),
    "quota": StatusError(
        "You exceeded your current quota, please check your plan and billing details.",
        429,
        {"code": "insufficient_quota"},
    ),
    "connection_refused": ConnectionRefusedError(111, "Connection refused"),
    "timeout": TimeoutError("timed out"),
}


@pytest.mark.parametrize("case", sorted(NOT_OVERFLOW))
def test_rate_limits_overload_auth_and_network_errors_are_not_overflow(case: str) -> None:
    assert not is_context_overflow(NOT_OVERFLOW[case])


def test_a_rate_limit_status_wins_over_overflow_wording() -> None:
    # A proxy that words its rate limit like an overflow is still a rate limit.
    assert not is_context_overflow(StatusError("maximum context length reached for today", 429))


def test_network_errors_are_recognised_by_class_name() -> None:
    class APIConnectionError(Exception):
        pass

    class ReadTimeout(Exception):
        pass

    # Even a message quoting an overflow does not make a lost connection one.
    assert not is_context_overflow(APIConnectionError("prompt is too long? connection reset"))
    assert not is_context_overflow(ReadTimeout("prompt is too long"))


def test_overflow_in_the_cause_is_found() -> None:
    wrapper = RuntimeError("model call failed")
    wrapper.__cause__ = StatusError("prompt is too long: 210000 tokens > 200000 maximum", 400)
    assert is_context_overflow(wrapper)


def test_overflow_in_the_context_is_found_unless_suppressed() -> None:
    def raise_inside_handler(suppress: bool) -> BaseException:
        try:
            try:
                raise StatusError("context_length_exceeded", 400)
            except StatusError:
                if suppress:
                    raise RuntimeError("agent step failed") from None
                raise RuntimeError("agent step failed")  # noqa: B904  # implicit context on purpose
        except RuntimeError as error:
            return error
        raise AssertionError("unreachable")

    assert is_context_overflow(raise_inside_handler(suppress=False))
    assert not is_context_overflow(raise_inside_handler(suppress=True))


def test_the_outermost_decisive_exception_wins() -> None:
    # A retry after an overflow hit a rate limit: the error in hand is the rate limit.
    rate_limit = StatusError("Rate limit reached", 429)
    rate_limit.__context__ = StatusError("prompt is too long", 400)
    assert not is_context_overflow(rate_limit)


def test_members_of_an_exception_group_are_read() -> None:
    class Group(Exception):
        def __init__(self, exceptions: tuple[BaseException, ...]) -> None:
            super().__init__("several errors")
            self.exceptions = exceptions

    assert is_context_overflow(Group((ValueError("x"), Exception("maximum context length is 8k"))))
    assert not is_context_overflow(Group((ValueError("x"), KeyError("y"))))


def test_cyclic_chains_end() -> None:
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__cause__, second.__cause__ = second, first
    assert not is_context_overflow(first)


def test_a_string_body_is_read() -> None:
    # {"error": "..."} from LM Studio or TGI: the OpenAI SDK keeps the string as ``body``.
    message = "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096."
    assert is_context_overflow(StatusError("Error code: 422", 422, message))
    assert not is_context_overflow(StatusError("Error code: 422", 422, "invalid schema"))


def test_a_broken_str_does_not_hide_the_body() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str")

    error = Broken()
    error.body = {"error": {"code": "context_length_exceeded"}}  # type: ignore[attr-defined]
    assert is_context_overflow(error)


def test_non_exceptions_are_a_type_error() -> None:
    with pytest.raises(TypeError, match="exc must be an exception"):
        is_context_overflow("prompt is too long")  # type: ignore[arg-type]
