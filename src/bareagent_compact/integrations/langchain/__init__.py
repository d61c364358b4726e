"""LangChain v1: :class:`CompactionMiddleware`, an ``AgentMiddleware`` for ``create_agent``.

The agent's messages are read as OpenAI Chat dicts (an AI message's
``tool_calls``, one ``tool`` message per ``ToolMessage``; content blocks such
as Anthropic ``thinking`` with their signature kept as they are), compacted
with ``compacted()``, and mapped back: a message the compactor did not change
is the original object, every field kept. A full compaction rewrites the graph
state (``RemoveMessage(REMOVE_ALL_MESSAGES)`` and the new list, as LangChain's
``SummarizationMiddleware`` does); micro-compaction changes the model request
only (as its context-editing middleware does). Needs ``.[langchain]``.
"""


from __future__ import annotations

from bareagent_compact.integrations.langchain.convert import to_dicts, to_messages
from bareagent_compact.integrations.langchain.middleware import CompactionMiddleware, thread_of
from bareagent_compact.integrations.langchain.provider import (
    langchain_chat_provider,
    langchain_chat_provider_async,
)

__all__ = [
    "CompactionMiddleware",
    "langchain_chat_provider",
    "langchain_chat_provider_async",
    "thread_of",
    "to_dicts",
    "to_messages",
]
