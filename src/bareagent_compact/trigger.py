"""When an automatic full compaction may fire, besides the threshold: the back-off
after failures, and the wait after a compaction that left the history over the
threshold."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

logger = logging.getLogger("bareagent_compact.compactor")


BACKOFF_CAP: Final = 32
"""At most this many calls are skipped between two attempts after failures."""

GROWTH_RETRY: Final = 2
"""A history this many times larger than at the last failure is tried again at once."""

STILL_OVER_GROWTH: Final = 0.1
"""After a full compaction that left the history over the threshold, the next
automatic one waits until this share of the threshold is new history to summarise."""


@dataclass(slots=True)
class Trigger:
    """The state that decides whether an automatic full compaction fires, besides
    the threshold: the back-off after failures, and the wait after a compaction
    that left the history over the threshold."""

    calls: int = 0
    """Calls of the compactor."""
    failures: int = 0
    """Full compactions failed in a row."""
    failed_tokens: int = 0
    retry_at: int = 0
    still_over: bool = False
    """The last full compaction left the history over the threshold."""
    told: bool = False
    """The wait (or "nothing new") was logged since the last full compaction."""

    def backing_off(self, tokens: int) -> bool:
        """True while a recent failure asks to leave the provider alone: the
        ``k``-th failure in a row skips ``min(2 ** (k - 1), BACKOFF_CAP)`` calls,
        unless the history has since grown ``GROWTH_RETRY`` times larger."""
        if not self.failures or self.calls >= self.retry_at:
            return False
        return tokens < GROWTH_RETRY * self.failed_tokens

    def failed(self, tokens: int) -> None:
        """A full compaction failed: start (or extend) the back-off."""
        self.failures += 1
        self.failed_tokens = tokens
        self.retry_at = self.calls + min(2 ** (self.failures - 1), BACKOFF_CAP) + 1

    def succeeded(self, still_over: bool) -> None:
        """A full compaction was made; ``still_over`` if it left the history over
        the threshold."""
        self.failures = 0
        self.still_over = still_over
        self.told = False

    def tell(self, level: int, message: str, *args: object) -> None:
        """Log why nothing fires: once at ``level``, then at ``DEBUG`` until the
        next full compaction."""
        logger.log(logging.DEBUG if self.told else level, message, *args)
        self.told = True
