"""How deeply message content may nest before it is refused, and the error that says so.

One limit for every walk over content (the estimate, the transcript, the ledger),
so that a history too deep for one is too deep for all, with the same message.
"""

from __future__ import annotations

from typing import Final

MAX_DEPTH: Final = 200
"""How deeply content may nest (lists in blocks in lists ...) before it is refused."""


def too_deep() -> ValueError:
    """The error raised for content nested more than :data:`MAX_DEPTH` levels deep."""
    return ValueError(f"message content is nested more than {MAX_DEPTH} levels deep")
