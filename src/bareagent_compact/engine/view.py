"""What a compactor remembers of the history between calls.

The history cache (container copies and weights of the last history seen), the
micro-compaction and oversize scans (how far nothing is due), where the part the
server reads begins, the recall handles of the last plan, and whether a call on
the history as the cache holds it would change nothing.
"""

from __future__ import annotations

from bareagent_compact import dialects
from bareagent_compact.history import HistoryCache
from bareagent_compact.micro import MicroScan
from bareagent_compact.oversize import OversizeScan
from bareagent_compact.recall import Handles


class View:
    """The history as the last call left it, and what is known of it."""

    __slots__ = ("handles", "history", "idle", "micro_scan", "oversize", "server_scan")

    def __init__(self) -> None:
        self.history = HistoryCache()
        self.micro_scan = MicroScan()
        self.oversize = OversizeScan()
        self.server_scan = dialects.ServerScan()
        self.handles: Handles = {}
        self.idle = False
        """A call on the history as the cache holds it would change nothing."""

    def rescan(self, *, moved: bool = False) -> None:
        """The micro-compaction and oversize scans read the whole history next time;
        ``moved``: messages may have moved (a rebuild, an undo, a hook's edit), so
        where the server's part begins is looked for anew too."""
        self.micro_scan.reset()
        self.oversize = OversizeScan()
        if moved:
            self.server_scan = dialects.ServerScan()

    def forget(self) -> None:
        """Forget the history: the next call reads every message again."""
        self.history.forget()
        self.idle = False
        self.oversize = OversizeScan()
        self.server_scan = dialects.ServerScan()
