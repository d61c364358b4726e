"""Summary providers made from the clients people already have.

Each factory takes a client object and returns the callable a compactor wants:
it sends the two-message summary prompt with the client and returns the
summary text. No SDK is imported: the clients are used by duck typing
(``client.messages.create``, ``client.chat.completions.create``,
``client.responses.create``, BareAgent's ``provider.create``), and responses
are read by attribute or by key, so SDK model objects and plain JSON dicts
both work.

A synchronous client gives a plain function; an asynchronous one (its
``create`` is an ``async def``, or its class name starts with ``Async``) gives
an ``async def`` function for :class:`AsyncCompactor`. ``is_async=`` overrides
the detection for wrapped clients.

Unusable answers (a refusal, a content filter, a failed or empty response)
return ``""``, which the compactor counts as an unusable summary: the history
is kept and a warning says why. API errors propagate, so the compactor sees
them as a failed provider call (and may recognise an overflow).

Each vendor's adapters live in their own module (``providers.anthropic``,
``providers.openai_chat``, ``providers.openai_responses``,
``providers.bareagent``); ``providers.answers`` reads a response a provider
returned as it is. The summary functions return a :class:`SummaryText`: the
text as a ``str``, carrying the response's ``usage``. This package re-exports
them (and the pipeline's ``adapter_hint`` and ``response_text``).
"""

from __future__ import annotations

from bareagent_compact.providers._common import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS
from bareagent_compact.providers._common import (
    AsyncServerSummaryFunction,
    AsyncSummaryFunction,
    ServerSummaryFunction,
    SummaryFunction,
    SummaryText,
)
from bareagent_compact.providers._common import Prompt as Prompt
from bareagent_compact.providers.answers import adapter_hint as adapter_hint
from bareagent_compact.providers.answers import response_text as response_text
from bareagent_compact.providers.anthropic import anthropic_provider, anthropic_server_compaction
from bareagent_compact.providers.bareagent import bareagent_provider
from bareagent_compact.providers.continuation import (
    anthropic_continuation_provider,
    openai_chat_continuation_provider,
    openai_responses_continuation_provider,
)
from bareagent_compact.providers.openai_chat import openai_chat_provider
from bareagent_compact.providers.openai_responses import (
    openai_responses_compaction,
    openai_responses_provider,
)

__all__ = [
    "AsyncServerSummaryFunction",
    "AsyncSummaryFunction",
    "ServerSummaryFunction",
    "SummaryFunction",
    "SummaryText",
    "anthropic_continuation_provider",
    "anthropic_provider",
    "anthropic_server_compaction",
    "bareagent_provider",
    "openai_chat_continuation_provider",
    "openai_chat_provider",
    "openai_responses_compaction",
    "openai_responses_continuation_provider",
    "openai_responses_provider",
]
