"""Pydantic AI: a history processor that keeps an agent's messages compacted.

``Agent(model, capabilities=[ProcessHistory(compaction_processor(compactor))])``
compacts the history before every model request, for good (Pydantic AI keeps what
the processor returns as the run's history). The messages go through Anthropic
Messages dicts and back: what compaction left alone is the same ``ModelMessage``
object, what it edited keeps every field but the edited content, and the summary
is a ``ModelRequest`` with one ``UserPromptPart`` followed by the acknowledgement
as a ``ModelResponse``, both marked in ``metadata``. ``summary_provider(model)`` is
an async summariser for an ``AsyncCompactor`` that asks a Pydantic AI model.
Importing this module imports
Pydantic AI (``pip install "bareagent-compact[pydantic-ai]"``).
"""

from __future__ import annotations

from bareagent_compact.integrations.pydantic_ai._back import back as restore
from bareagent_compact.integrations.pydantic_ai._from_dicts import MARK, from_dicts, is_summary
from bareagent_compact.integrations.pydantic_ai._processor import (
    compaction_processor,
    summary_provider,
)
from bareagent_compact.integrations.pydantic_ai._to_dicts import Converted, to_dicts

__all__ = [
    "MARK",
    "Converted",
    "compaction_processor",
    "from_dicts",
    "is_summary",
    "restore",
    "summary_provider",
    "to_dicts",
]
