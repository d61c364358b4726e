"""What the passes share about the archive: the records they hand it, and what a
failed archive means."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bareagent_compact.micro import Due
from bareagent_compact.protocols import ArchiveRecord
from bareagent_compact.requests import Outcome

logger = logging.getLogger("bareagent_compact.compactor")


def archived(outcome: Outcome, kept: str = "tool result kept untruncated") -> bool:
    """Whether the archive hook took a record; a failure keeps the result whole."""
    if outcome.failed:
        logger.warning(
            "archive hook failed%s; %s",
            outcome.because(),
            kept,
            exc_info=outcome.error,
        )
        return False
    return True


def records(planned: Sequence[Due], session_id: str) -> list[ArchiveRecord]:
    """The archive records of ``planned``, each naming the session."""
    return [{**due.record, "session_id": session_id} for due in planned]
