"""``UsageLedger``: the count of a message list anchored on the reported sizes,
the charge of each report to its messages and the overhead."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from itertools import chain, compress, repeat
from operator import add, eq, is_, is_not, mul, ne, not_
from typing import Any, Final

from bareagent_compact.ledger.calibration import _PRIOR, _Calibration
from bareagent_compact.ledger.entries import (
    _ABSENT,
    _CHARGE_OF,
    _COPY_OF,
    _DROPPED,
    _KEY_OF,
    _charge,
    _Entry,
    _new_entry,
    _remap,
    made_anew,
)
from bareagent_compact.ledger.features import _N
from bareagent_compact.protocols import Message
from bareagent_compact.tokens import estimate_tokens
from bareagent_compact.validate import check_int, not_a_list

# The logger the ledger has always used.
logger = logging.getLogger("bareagent_compact.ledger")

_POOL: Final = 4
"""Reports whose new content is taken together in one refit, once warmed up."""
_POOL_AFTER: Final = 16
"""Plausible reports before pooling starts: the first ones are worth a refit each."""
_REPRICE_UNTIL: Final = 24
"""Plausible reports after which the first report's split is final."""
_WARMUP: Final = 6
"""Reports before the plausibility band narrows from its initial width."""
_BAND_INITIAL: Final = 0.6
_BAND_MIN: Final = 0.2
_BAND_SIGMAS: Final = 6.0
"""A report is plausible when the new content cost within this share of its
estimate: the initial share, then six times the running relative error, between
the two bounds."""
_BAND_SLACK: Final = 64.0
"""Tokens of disagreement always accepted (small new content, rounding)."""
_OUTLIER: Final = 0.25
"""A report taken as a change of overhead is logged at ``INFO`` when it is this share
of the expected size or more away from it (a real outlier), else at ``DEBUG``."""
_REJECTS_TO_ACCEPT: Final = 3
"""After this many implausible reports in a row, the next is believed (the content changed)."""


class Band:
    """Which reports are believed: a band around the estimate of the new content,
    narrowing as the reports agree (a running RMS of the relative error)."""

    __slots__ = ("accepted", "rejected_in_row", "spread")

    def __init__(self) -> None:
        self.accepted = 0
        self.rejected_in_row = 0
        self.spread = 0.0

    def plausible(self, residual: float, predicted: float) -> bool:
        """Whether ``residual`` tokens for content estimated at ``predicted`` can be believed."""
        error = residual - predicted
        if residual < 0:
            return False  # the messages cannot cost less than nothing: the overhead changed
        if self.accepted < _WARMUP:
            band = _BAND_INITIAL
        else:
            band = max(_BAND_MIN, min(_BAND_INITIAL, _BAND_SIGMAS * self.spread))
        if abs(error) <= band * max(predicted, 0.0) + _BAND_SLACK or (
            self.rejected_in_row >= _REJECTS_TO_ACCEPT
        ):
            self.rejected_in_row = 0
            relative = error / max(predicted, _BAND_SLACK)
            self.spread = math.sqrt(0.9 * self.spread**2 + 0.1 * min(relative**2, 1.0))
            self.accepted += 1
            return True
        self.rejected_in_row += 1
        return False


class UsageLedger:
    """Counts a message list's tokens, anchored on the sizes the API reported.

    ``count(messages)`` before any ``record`` is ``estimate_tokens(messages)``.
    ``record(messages, input_tokens)`` takes the list exactly as it was sent and
    the request's full input size (see :func:`~bareagent_compact.input_tokens_of`).
    """

    def __init__(self, fallback: Callable[[list[Message]], int] = estimate_tokens) -> None:
        self._fallback = fallback
        self._entries: dict[int, _Entry] = {}
        self._ids: list[int] = []
        self._resolved: list[_Entry] = []
        self._copies: list[Any] = []  # the copies of the last list resolved, in order
        self._by_content: dict[int, _Entry] | None = None  # see _content_map
        self._shared: Sequence[Message] | None = None  # copies to share, during a count
        self._overhead = 0.0
        self._reported = False
        self._calibration = _Calibration(_PRIOR)
        self._band = Band()
        self._pooled = 0
        self._provisional: list[_Entry] = []
        self._pooled_features: list[float] = []
        self._pooled_tokens = 0.0

    @property
    def reported(self) -> bool:
        """True once a report has been recorded."""
        return self._reported

    @property
    def overhead(self) -> int:
        """The part of the last report not charged to any message (system prompt, tools)."""
        return round(self._overhead)

    def copies(self) -> list[Message]:
        """Copies of the messages of the last list counted or recorded, in order
        (the ledger's own: never edited)."""
        return list(self._copies)

    def _resolve(self, messages: list[Message]) -> list[_Entry]:
        """The entry of each message, reused when unchanged; only these are kept.

        This runs twice a turn over the whole history, so the common case (most
        messages unchanged) is done by ``map`` at C speed: an entry is reused when
        the message is the very object it was made for (the entry holds it, so its
        ``id`` cannot be reused) and still equals the copy taken then.
        """
        if not isinstance(messages, list):
            raise not_a_list(messages)
        # Shared copies equal the messages (the caller checked): where the ledger
        # holds the very same copies, the comparison is one of identities.
        same = self._shared if self._shared is not None else messages
        if len(same) == len(self._copies) and same == self._copies:
            return self._resolved  # nothing changed since the last call: one C-level compare
        ids = list(map(id, messages))
        known = len(self._ids)
        if known and len(ids) >= known and ids[:known] == self._ids:
            return self._resolve_grown(messages, ids)
        anew = self._resolve_anew(messages, same, ids)
        if anew is not None:
            return anew
        resolved: list[_Entry] = list(map(self._entries.get, ids, repeat(_ABSENT)))
        unchanged = list(map(eq, messages, map(_COPY_OF, resolved)))
        if all(unchanged):
            self._reorder(ids, resolved)
        else:
            self._renew(messages, ids, resolved, unchanged)
        self._keep(resolved)
        return resolved

    def _resolve_anew(
        self, messages: list[Message], same: Sequence[Message], ids: list[int]
    ) -> list[_Entry] | None:
        """:meth:`_resolve` of the last list made anew (see :func:`made_anew`), or
        ``None`` when ``messages`` is not that."""
        if len(self._ids) != len(self._copies):
            return None
        edited = made_anew(self._resolved, self._copies, messages, same, ids)
        if edited is None:
            return None
        self._ids = ids[: len(self._copies)]
        self._entries = dict(zip(self._ids, self._resolved, strict=True))
        return self._resolve_grown(messages, ids, edited)

    def _resolve_grown(
        self, messages: list[Message], ids: list[int], edited: list[int] | None = None
    ) -> list[_Entry]:
        """:meth:`_resolve` of the last list, edited in place or appended to (the same
        objects at the same places): only the edited and new messages are read
        (``edited``: where the last list's messages changed, when already known)."""
        copies, resolved = self._copies, self._resolved
        known = len(copies)
        if edited is None:
            edited = self._edited(messages, copies)
        if not edited and len(ids) == known:
            return resolved
        by_content = self._content_map()
        entries = self._entries
        left = []
        for index in edited:
            left.append(resolved[index])
            entry = _new_entry(index, messages[index], by_content, self._shared)
            resolved[index] = entries[ids[index]] = entry
            copies[index] = entry.copy
        self._append(messages, ids, known, by_content)
        self._ids = ids
        _remap(by_content, left, map(resolved.__getitem__, chain(edited, range(known, len(ids)))))
        if self._provisional and any(e.provisional for e in left):
            self._provisional = [e for e in self._provisional if entries.get(id(e.message)) is e]
        return resolved

    def _edited(self, messages: list[Message], copies: list[Any]) -> list[int]:
        """Where ``messages`` differ from the ledger's ``copies`` (as long); with shared
        copies, only where the ledger does not hold the cache's very copy is looked at."""
        if self._shared is None:
            return list(compress(range(len(copies)), map(ne, messages, copies)))
        maybe = compress(range(len(copies)), map(is_not, copies, self._shared))
        return [i for i in maybe if messages[i] != copies[i]]

    def _append(
        self, messages: list[Message], ids: list[int], known: int, by_content: dict[int, _Entry]
    ) -> None:
        """The entries of the messages from ``known`` on, appended to the last list."""
        entries, resolved, copies = self._entries, self._resolved, self._copies
        for index in range(known, len(ids)):
            seen = entries.get(ids[index])  # the same object twice in the list
            if seen is None:
                seen = _new_entry(index, messages[index], by_content, self._shared)
            entry = seen
            entries[ids[index]] = entry
            resolved.append(entry)
            copies.append(entry.copy)

    def _content_map(self) -> dict[int, _Entry]:
        """The entries of the last list by the hash of their content (kept between
        calls; built again after a reorder or a renewal)."""
        if self._by_content is None:
            known = list(self._entries.values())
            self._by_content = dict(zip(map(_KEY_OF, known), known, strict=True))
        return self._by_content

    def _reorder(self, ids: list[int], resolved: list[_Entry]) -> None:
        """Keep exactly ``resolved``, every message known and unchanged (some may have
        left the history or moved)."""
        if ids != self._ids:
            self._ids = ids
            self._entries = dict(zip(ids, resolved, strict=True))
            self._by_content = None
            self._provisional = [e for e in self._provisional if e in resolved]

    def _renew(
        self, messages: list[Message], ids: list[int], resolved: list[_Entry], unchanged: list[bool]
    ) -> None:
        """Fill in ``resolved`` where a message is new or was edited, then keep exactly it."""
        created: dict[int, _Entry] = {}
        by_content = self._content_map()
        for index in compress(range(len(ids)), map(not_, unchanged)):
            entry = created.get(ids[index])
            if entry is None:
                entry = created[ids[index]] = _new_entry(
                    index, messages[index], by_content, self._shared
                )
            resolved[index] = entry
        before = len(self._entries)
        self._ids = ids
        self._entries = entries = dict(zip(ids, resolved, strict=True))
        self._by_content = None
        if self._provisional and len(entries) - len(created) < before:
            # What left the history is not kept.
            self._provisional = [e for e in self._provisional if entries.get(id(e.message)) is e]

    def _keep(self, resolved: list[_Entry]) -> None:
        self._resolved = resolved
        self._copies = list(map(_COPY_OF, resolved))

    def _predict(self, entry: _Entry) -> float:
        return max(0.0, self._calibration.predict(entry.features))

    def count(self, messages: list[Message], copies: Sequence[Message] | None = None) -> int:
        """The input size a request carrying ``messages`` is expected to have;
        ``copies``: container copies of ``messages`` to share (see :class:`_Entry`)."""
        if not self._reported:
            return self._fallback(messages)
        self._shared = copies
        try:
            entries = self._resolve(messages)
        finally:
            self._shared = None
        charges = list(map(_CHARGE_OF, entries))
        total = self._overhead + math.fsum(filter(None, charges))
        for entry in compress(entries, map(is_, charges, repeat(None))):
            total += self._predict(entry)
        return max(0, math.ceil(total - 1e-6))

    def record(
        self, messages: list[Message], input_tokens: int, copies: Sequence[Message] | None = None
    ) -> None:
        """Take the reported full input size of a request carrying ``messages``
        (``copies``: as for :meth:`count`)."""
        check_int("input_tokens", input_tokens)
        self._shared = copies
        try:
            entries = self._resolve(messages)
        finally:
            self._shared = None
        known = math.fsum(filter(None, map(_CHARGE_OF, entries)))
        new = [e for e in entries if e.charge is None]
        features = [0.0] * _N
        predictions: list[float] = []
        for entry in new:
            predictions.append(self._predict(entry))
            features = list(map(add, features, entry.features))
        if not self._reported:
            self._record_first(new, predictions, input_tokens)
            return
        residual = input_tokens - self._overhead - known  # what the new content cost
        if not new:
            # The overhead changed (another system prompt?)
            self._overhead = max(0.0, self._overhead + residual)
            return
        predicted = math.fsum(predictions)
        if self._band.plausible(residual, predicted):
            self._pool(features, residual)
            scale = residual / predicted if predicted > 0 else 1.0
            _charge(new, predictions, scale, residual if predicted <= 0 else None)
            return
        expected = round(self._overhead + known + predicted)
        logger.log(
            logging.INFO if abs(input_tokens - expected) > _OUTLIER * expected else logging.DEBUG,
            "reported input size %d is far from the expected %d: taken as a change of "
            "overhead, not of the content's weight",
            input_tokens,
            expected,
        )
        self._overhead = max(0.0, self._overhead + residual - predicted)
        _charge(new, predictions, 1.0)

    def _record_first(self, new: list[_Entry], predictions: list[float], input_tokens: int) -> None:
        """The first report: the messages are charged their estimate, the rest is
        overhead; a report smaller than the estimate is all messages, the estimate
        scaled down (an overhead is never negative)."""
        predicted = math.fsum(predictions)
        scale = 1.0
        if predicted > input_tokens:
            scale = input_tokens / predicted
        self._overhead = max(0.0, input_tokens - predicted)
        for entry in new:
            entry.provisional = True
        _charge(new, predictions, scale)
        self._provisional = new
        self._reported = True

    def _pool(self, features: list[float], tokens: float) -> None:
        """Refit on the new content of every few reports taken together (a refit
        costs about as much as counting a short message; little is lost)."""
        if self._pooled:
            features = list(map(add, features, self._pooled_features))
            tokens += self._pooled_tokens
        self._pooled += 1
        if self._pooled >= (_POOL if self._band.accepted > _POOL_AFTER else 1):
            self._calibration.observe(features, tokens)
            self._pooled = 0
            if self._provisional:
                self._reprice()
        else:
            self._pooled_features, self._pooled_tokens = features, tokens

    def _reprice(self) -> None:
        """Split the first report again between its messages and the overhead, with
        the refitted weights: only their sum was reported. Messages that left keep
        the split they left with."""
        present = self._entries
        kept = [e for e in self._provisional if present.get(id(e.message)) is e]
        weights = self._calibration.weights
        for entry in kept:
            assert entry.charge is not None
            # Moved from the overhead to the message, never past what the overhead holds
            # (the prediction of _predict, inlined: this runs over the first history).
            predicted = max(0.0, float(sum(map(mul, weights, entry.features))))
            change = min(predicted - entry.charge, self._overhead)
            self._overhead -= change
            entry.charge += change
        if self._band.accepted < _REPRICE_UNTIL:
            self._provisional = kept
            return
        for entry in kept:  # the split is final: the features are no longer read
            entry.provisional = False
            entry.features = _DROPPED
        self._provisional = []
