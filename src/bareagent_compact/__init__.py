"""Keep an LLM agent's conversation inside its context window.

``AsyncCompactor`` and ``SqlTranscriptManager`` are imported on first use: their
modules load ``asyncio`` and ``sqlite3``, which an agent using neither need not pay for.
``__version__`` is read on first use from the installed distribution's metadata (the
version is written once, in ``pyproject.toml``); ``"0+unknown"`` when the package runs
from a source tree that was never installed.
"""

import importlib
import typing

from bareagent_compact.check import check_request
from bareagent_compact.compactor import Compactor
from bareagent_compact.micro import DEFAULT_KEEP_RECENT, _micro_compact
from bareagent_compact.offline import OfflineSummarizer
from bareagent_compact.options import Options
from bareagent_compact.overflow import is_context_overflow
from bareagent_compact.pairs import Orphan, find_orphans, repair_tool_pairs
from bareagent_compact.prompts import (
    DEFAULT_ACKNOWLEDGEMENT,
    DEFAULT_SUMMARY_PROMPT,
    DEFAULT_THRESHOLD,
    SUMMARY_PREFIX,
)
from bareagent_compact.protocols import (
    AfterCompactHook,
    ArchiveBatcher,
    ArchiveHook,
    ArchiveReader,
    ArchiveRecord,
    AsyncSummaryProvider,
    BeforeCompactHook,
    ContinuationProvider,
    ContinuationRequest,
    HasText,
    Message,
    ServerCompactionRequest,
    ServerSummary,
    ServerSummaryProvider,
    SummaryProvider,
    TokenCounter,
    TranscriptManager,
)
from bareagent_compact.recall import DEFAULT_RECALL_LIMIT, RECALL_TOOL_NAME, recall_tool
from bareagent_compact.result import Action, CompactionEvent, CompactionResult, Reason, SummaryCost
from bareagent_compact.serialize import _serialize
from bareagent_compact.stores.errors import CorruptTranscriptError, SnapshotNotFoundError
from bareagent_compact.tokens import estimate_tokens
from bareagent_compact.transcripts import JsonlTranscriptManager, Snapshot
from bareagent_compact.usage import input_tokens_of

if typing.TYPE_CHECKING:
    from bareagent_compact.async_compactor import AsyncCompactor
    from bareagent_compact.sqlstore import SqlTranscriptManager

    __version__: str

__all__ = [
    "Action",
    "AfterCompactHook",
    "ArchiveBatcher",
    "ArchiveHook",
    "ArchiveReader",
    "ArchiveRecord",
    "AsyncCompactor",
    "AsyncSummaryProvider",
    "BeforeCompactHook",
    "CompactionEvent",
    "CompactionResult",
    "Compactor",
    "ContinuationProvider",
    "ContinuationRequest",
    "CorruptTranscriptError",
    "DEFAULT_ACKNOWLEDGEMENT",
    "DEFAULT_KEEP_RECENT",
    "DEFAULT_RECALL_LIMIT",
    "DEFAULT_SUMMARY_PROMPT",
    "DEFAULT_THRESHOLD",
    "HasText",
    "JsonlTranscriptManager",
    "Message",
    "OfflineSummarizer",
    "Options",
    "Orphan",
    "RECALL_TOOL_NAME",
    "Reason",
    "SUMMARY_PREFIX",
    "ServerCompactionRequest",
    "ServerSummary",
    "ServerSummaryProvider",
    "Snapshot",
    "SnapshotNotFoundError",
    "SqlTranscriptManager",
    "SummaryCost",
    "SummaryProvider",
    "TokenCounter",
    "TranscriptManager",
    "__version__",
    "_micro_compact",
    "_serialize",
    "check_request",
    "estimate_tokens",
    "find_orphans",
    "input_tokens_of",
    "is_context_overflow",
    "recall_tool",
    "repair_tool_pairs",
]

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """The lazy names, imported (and kept) on first use."""
        if name == "__version__":
            from importlib import metadata  # noqa: PLC0415  (lazy: the import is slow)
            try:
                version: str = metadata.version("bareagent-compact")
            except metadata.PackageNotFoundError:
                version = "0+unknown"  # a source tree on the path, never installed
            globals()[name] = version
            return version
        if name == "AsyncCompactor":
            module = "async_compactor"
        elif name == "SqlTranscriptManager":
            module = "sqlstore"
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), "AsyncCompactor", "SqlTranscriptManager", "__version__"})
