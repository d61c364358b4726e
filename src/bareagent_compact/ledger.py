"""A token count anchored on the input sizes a model API reports (the usage ledger).

Every response says exactly how large its request was. The ledger keeps, for each
message of the last reported request, the share of that size it was charged; what
the request cost beyond its messages (system prompt, tool definitions) is the
overhead. A count is then:

    overhead + charges of the messages still there, unchanged + estimate of the rest

where "the rest" is whatever is new or was edited since the last report (new
turns, results truncated by micro-compaction, a summary). Content that left the
history leaves at the size it was charged, so the bias of an estimate never
outlives one report. The estimate of new content is linear in a few cheap counts
per message (characters by class, lines, runs of punctuation and of spaces,
strings, images), with weights refitted by recursive least squares on the
reports' exact sizes of the new content.

Per-message work is done once: messages are remembered by identity with a check
of their content (so in-place edits are seen) and, failing that, by content
(so a caller that rebuilds its dicts every turn loses nothing). Only the messages
of the latest list are kept. Before the first report the count is exactly
:func:`~bareagent_compact.estimate_tokens`.
"""

from __future__ import annotations

import logging
import math
from array import array
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, compress, repeat
from operator import add, attrgetter, eq, is_, is_not, mul, ne, not_, sub
from typing import Any, Final

from bareagent_compact._limits import MAX_DEPTH, too_deep
from bareagent_compact.protocols import Message
from bareagent_compact.tokens import estimate_tokens
from bareagent_compact.validate import check_int, not_a_dict, not_a_list

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------- features

# One byte per character: its class. UTF-8 continuation bytes are dropped, so a
# character above U+007F is counted once, by its leading byte.
_LETTER, _DIGIT, _SPACE, _NEWLINE, _PUNCT, _CJK, _WIDE = b"a0 \n.cw"


def _class_of(byte: int) -> int:
    if byte >= 0xF0 or 0xC0 <= byte < 0xE0:
        return _WIDE  # two- and four-byte characters (Latin, Cyrillic, emoji, ...)
    if byte >= 0xE0:
        return _CJK  # three-byte characters: CJK, kana, hangul, most symbols
    char = chr(byte)
    if char == "\n":
        return _NEWLINE
    if char.isspace() or byte < 0x20 or byte == 0x7F:
        return _SPACE
    if char.isdigit():
        return _DIGIT
    if char.isalpha():
        return _LETTER
    return _PUNCT


_CLASSES: Final = bytes(_class_of(b) for b in range(256))
_CONTINUATION: Final = bytes(range(0x80, 0xC0))


def _bytes_of(*classes: int) -> bytes:
    """The lone or leading UTF-8 bytes in any of ``classes``."""
    return bytes(b for b in range(256) if _CLASSES[b] in classes and not 0x80 <= b < 0xC0)


_LETTERS_SPACES: Final = _bytes_of(_LETTER, _SPACE)
_DIGITS: Final = _bytes_of(_DIGIT)
_NOT_LEADS: Final = bytes(range(0xC0))  # what is not the first byte of a wide character
_CJK_LEADS: Final = _bytes_of(_CJK)


def _runs_table(*members: int) -> bytes:
    """Maps the class bytes in ``members`` to ``x`` and every other byte to a space
    (so that ``x `` ends a run: the rarer ``x`` is looked for first)."""
    return bytes(ord("x") if b in members else ord(" ") for b in range(256))


_RUN_TABLES: Final = (_runs_table(_PUNCT), _runs_table(_SPACE, _NEWLINE))
_SAMPLE_WINDOWS: Final = 8
_SAMPLE_WINDOW: Final = 128
_SAMPLED: Final = _SAMPLE_WINDOWS * _SAMPLE_WINDOW
"""Runs in a longer text are counted in this many evenly spread windows of this
many bytes: the make-up of a tool's output varies little along it."""

FEATURES: Final = (
    "messages",
    "strings",
    "media",
    "characters",
    "letters, digits and spaces",
    "digits",
    "cjk",
    "wide",
    "newlines",
    "punctuation runs",
    "space runs",
)
"""What the weights apply to, per message: structure, then the text's counts
(runs estimated from a sample of a long text)."""
_N: Final = len(FEATURES)


_LONG: Final = 8192
_LONG_WINDOWS: Final = 32
_LONG_WINDOW: Final = 128
"""A text longer than ``_LONG`` characters is counted in this many evenly spread
windows of this many characters, scaled to its length: the make-up of a tool's
output varies little along it, and a long text then costs a fixed amount."""


def text_features(text: str) -> list[float]:
    """The counts of ``text`` (features 3 and up); a long text is counted in a sample."""
    length = len(text)
    if length <= _LONG:
        return _text_counts(text)
    step = (length - _LONG_WINDOW) // (_LONG_WINDOWS - 1)
    sample = "".join([text[i * step : i * step + _LONG_WINDOW] for i in range(_LONG_WINDOWS)])
    scale = length / len(sample)
    return [float(length), *(count * scale for count in _text_counts(sample)[1:])]


def _text_counts(text: str) -> list[float]:
    """The counts of ``text``, at little more than one pass over it.

    Deleting the letters and spaces leaves the few bytes everything else is
    counted in; runs are counted in a sample of a text over 1 KB.
    """
    length = len(text)
    raw = text.encode("utf-8", "surrogatepass")
    rest = raw.translate(None, _LETTERS_SPACES)  # digits, newlines, punctuation, wide
    digits = len(rest) - len(rest.translate(None, _DIGITS))
    newlines = rest.count(b"\n")
    counts = [float(length), float(len(raw) - len(rest) + digits + newlines), float(digits)]
    if len(raw) == length:  # ASCII
        counts += (0.0, 0.0)
    else:
        leads = rest.translate(None, _NOT_LEADS)
        wide = len(leads.translate(None, _CJK_LEADS))
        counts += (float(len(leads) - wide), float(wide))
    counts.append(float(newlines))
    classes = (raw if len(raw) <= _SAMPLED else _sample(raw)).translate(_CLASSES, _CONTINUATION)
    scale = length / len(classes) if classes else 1.0
    for table in _RUN_TABLES:
        counts.append(classes.translate(table).count(b"x ") * scale)  # where runs end
    return counts


def _sample(raw: bytes) -> bytes:
    """Evenly spread windows of long UTF-8 text, joined (a cut character or run
    only shifts a count by one)."""
    window = _SAMPLE_WINDOW
    step = (len(raw) - window) // (_SAMPLE_WINDOWS - 1)
    return b"".join([raw[i * step : i * step + window] for i in range(_SAMPLE_WINDOWS)])


_STRUCTURE_KEYS: Final = frozenset(("role", "type"))
_KEY_ENDS: Final = 64
_MEDIA_TYPES: Final = frozenset(
    ("image", "document", "image_url", "input_image", "input_file", "file", "input_audio")
)
"""Block types that carry an image, a file or audio: each costs about a fixed amount."""
_PAYLOAD: Final = 256
"""Strings longer than this that are encoded payloads are not read as text."""


def _read(value: dict[Any, Any] | list[Any], strings: list[str], media: list[int]) -> Any:
    """A copy of the dicts and lists in message ``value`` (everything else shared),
    appending the text the model reads to ``strings``.

    The keys of a data dict (a tool's input) are text; those of a message or a
    block (a dict with a ``role`` or a ``type``) are structure, as are the values
    of ``role`` and ``type``. Images and files are counted in ``media``; their
    encoded payload (a ``data:`` URL, a ``source``'s ``data``) is not text.
    """
    if isinstance(value, dict):
        return _read_dict(value, 0, False, strings, media)
    return _read_list(value, 0, False, strings, media)


def _read_dict(
    value: dict[Any, Any], depth: int, data: bool, strings: list[str], media: list[int]
) -> dict[Any, Any]:
    """:func:`_read` of a dict: decides whether it is a data dict (``data``, or
    neither ``role`` nor ``type``) or a message or block, and counts its media."""
    if depth > MAX_DEPTH:
        raise too_deep()
    keys = data or not ("type" in value or "role" in value)
    block_type = value.get("type")
    if type(block_type) is str and block_type in _MEDIA_TYPES:
        media.append(1)
    payload = "media_type" in value  # an Anthropic source: its "data" is encoded
    if keys:
        return _read_data(value, depth, strings, media, payload)
    return _read_block(value, depth, strings, media, payload)


def _read_data(
    value: dict[Any, Any], depth: int, strings: list[str], media: list[int], payload: bool
) -> dict[Any, Any]:
    """A data dict (one with neither ``role`` nor ``type``, such as a tool's input, and
    every dict below one): every key and value is text, nested ones too."""
    add = strings.append
    copy: dict[Any, Any] = {}
    for key, item in value.items():
        add(key if type(key) is str else str(key))
        kind = type(item)
        if kind is dict:
            copy[key] = _read_dict(item, depth + 1, True, strings, media)
        elif kind is list:
            copy[key] = _read_list(item, depth + 1, True, strings, media)
        else:
            copy[key] = item
            if item is None:
                continue
            if kind is not str:
                add(str(item))
            elif len(item) <= _PAYLOAD or not _is_payload(item, key, payload):
                add(item)
    return copy


def _read_block(
    value: dict[Any, Any], depth: int, strings: list[str], media: list[int], payload: bool
) -> dict[Any, Any]:
    """A message or a block: its keys and the values of ``role`` and ``type`` are
    structure, its other values text."""
    add = strings.append
    copy: dict[Any, Any] = {}
    for key, item in value.items():
        kind = type(item)
        if kind is dict:
            copy[key] = _read_dict(item, depth + 1, False, strings, media)
        elif kind is list:
            copy[key] = _read_list(item, depth + 1, False, strings, media)
        else:
            copy[key] = item
            if item is None or key in _STRUCTURE_KEYS:
                continue
            if kind is not str:
                add(str(item))
            elif len(item) <= _PAYLOAD or not _is_payload(item, key, payload):
                add(item)
    return copy


def _is_payload(text: str, key: Any, payload: bool) -> bool:
    """Whether a long string is encoded data (a ``data:`` URL, a source's ``data``)."""
    return text.startswith("data:") or (payload and key == "data")


def _read_list(
    value: list[Any], depth: int, data: bool, strings: list[str], media: list[int]
) -> list[Any]:
    """:func:`_read` of a list: its items are read as the values of its dict."""
    if depth > MAX_DEPTH:
        raise too_deep()
    add = strings.append
    items: list[Any] = []
    for item in value:
        kind = type(item)
        if kind is dict:
            items.append(_read_dict(item, depth + 1, data, strings, media))
            continue
        if kind is list:
            items.append(_read_list(item, depth + 1, data, strings, media))
            continue
        if item is not None:
            add(item if kind is str else str(item))
        items.append(item)
    return items


def read_message(message: Message) -> tuple[Message, list[float], int]:
    """A copy of ``message``'s dicts and lists, its feature vector (see
    :data:`FEATURES`) and a hash of its text (equal messages, equal hashes)."""
    strings: list[str] = []
    media: list[int] = []
    copy = _read(message, strings, media)
    text = "\n".join(strings)
    features = [1.0, float(len(strings)), float(len(media)), *text_features(text)]
    # Equal messages have equal keys; unequal ones rarely do (a copy comparison decides).
    return copy, features, hash((*features, text[:_KEY_ENDS], text[-_KEY_ENDS:]))


def message_features(message: Message) -> list[float]:
    """The feature vector of one message (see :data:`FEATURES`)."""
    return read_message(message)[1]


# ---------------------------------------------------------------- calibration

# Starting weights (tokens per unit of each feature): a least-squares fit over
# varied agent sessions (one tokenizer); refitted from the first report on.
_PRIOR: Final[tuple[float, ...]] = (
    2.8, 3.9, 1200.0,
    0.35, -0.24, 0.67, 0.42, 0.5,
    0.16, 0.56, 0.49,
)  # fmt: skip
_PRIOR_SPREAD: Final = 0.5
_PRIOR_FLOOR: Final = 0.05
"""Prior standard deviation of each weight: this share of it, at least the floor."""
_PRIOR_SCALE: Final = 0.3
"""Prior standard deviation of a common factor on all the weights."""
_WEIGHT_POWER: Final = 0.7
"""A report's weight in a refit is its predicted size to minus this power: between
weighing absolute errors (big new content dominates) and relative ones."""
_FORGET: Final = 0.98
"""Weight of the past in each refit: the content of a session drifts."""


class _Calibration:
    """Recursive least squares with forgetting for ``tokens ~ weights . features``.

    The covariance is kept as ``cov * factor`` so that forgetting is one multiplication
    of a scalar; the rows are updated by ``map`` at C speed (a report costs a few
    microseconds).
    """

    __slots__ = ("cov", "factor", "weights")

    def __init__(self, prior: Sequence[float]) -> None:
        self.weights = list(prior)
        self.factor = 1.0
        # The first reports mostly say how far off the prior is as a whole (a
        # common factor), before they say how to reshape it (each weight).
        self.cov = [[_PRIOR_SCALE**2 * wi * wj for wj in prior] for wi in prior]
        for i, w in enumerate(prior):
            self.cov[i][i] += max(_PRIOR_FLOOR, _PRIOR_SPREAD * abs(w)) ** 2

    def predict(self, features: Sequence[float]) -> float:
        """Tokens of content with these (summed) features."""
        return float(sum(map(mul, self.weights, features)))

    def observe(self, features: Sequence[float], tokens: float) -> None:
        """Refit on one observation: ``features`` summed over some content cost ``tokens``."""
        predicted = self.predict(features)
        scale = float(max(abs(predicted), 1.0) ** -_WEIGHT_POWER)
        x = [f * scale for f in features]
        cov = self.cov
        cx = [sum(map(mul, row, x)) for row in cov]
        den = _FORGET / self.factor + sum(map(mul, x, cx))
        if not den > 0.0 or not math.isfinite(den):
            return
        error = (tokens - predicted) * scale / den
        self.weights = list(map(add, self.weights, map(mul, cx, repeat(error))))
        self.cov = [
            list(map(sub, row, map(mul, cx, repeat(c / den))))
            for row, c in zip(cov, cx, strict=True)
        ]
        self.factor /= _FORGET
        if self.factor > 1e6:  # fold the factor back in before it grows too large
            self.cov = [[c * self.factor for c in row] for row in self.cov]
            self.factor = 1.0


# ---------------------------------------------------------------- the ledger


class _Entry:
    """What the ledger knows about one message."""

    __slots__ = ("charge", "copy", "features", "key", "message", "provisional")

    def __init__(self, message: Message, copy: Message | None = None) -> None:
        self.message = message
        # The copy is compared with the message to see in-place edits; the key
        # finds an equal message under another identity. A copy the history cache
        # already holds of the same content is shared rather than kept twice.
        own, features, self.key = read_message(message)
        self.copy = own if copy is None else copy
        self.features: Sequence[float] = array("d", features)
        self.provisional = False  # charged its estimate by the first report
        self.charge: float | None = None  # its share of the last report, if it was in it


class _Absent:
    """Stands for a message not seen before: its copy equals nothing."""

    __slots__ = ("copy",)

    def __init__(self) -> None:
        self.copy = object()


_ABSENT: Final[Any] = _Absent()
_DROPPED: Final[Sequence[float]] = array("d")
"""The features of a charged message: not kept (only uncharged ones are predicted)."""
_COPY_OF: Final = attrgetter("copy")
_KEY_OF: Final = attrgetter("key")
_CHARGE_OF: Final = attrgetter("charge")

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


def _new_entry(
    index: int,
    message: Message,
    by_content: dict[int, _Entry],
    copies: Sequence[Message] | None = None,
) -> _Entry:
    """The entry of a message not seen under this identity (or edited): it keeps
    the charge of an equal message seen before under another identity.
    ``copies``: the history cache's copies of the list, to share."""
    if not isinstance(message, dict):
        raise not_a_dict(index, message)
    entry = _Entry(message, None if copies is None else copies[index])
    same = by_content.get(entry.key)
    if same is not None and same.charge is not None and message == same.copy:
        entry.charge = same.charge  # the same content, another identity
    return entry


def _remap(by_content: dict[int, _Entry], left: list[_Entry], new: Iterable[_Entry]) -> None:
    """Keep the content map of the entries in place: ``left`` left it, ``new`` came."""
    for entry in left:
        if by_content.get(entry.key) is entry:
            del by_content[entry.key]
    for entry in new:
        by_content[entry.key] = entry


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
        self._accepted = 0
        self._rejected_in_row = 0
        self._spread = 0.0  # running RMS of the relative error on new content
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
        resolved: list[_Entry] = list(map(self._entries.get, ids, repeat(_ABSENT)))
        unchanged = list(map(eq, messages, map(_COPY_OF, resolved)))
        if all(unchanged):
            self._reorder(ids, resolved)
        else:
            self._renew(messages, ids, resolved, unchanged)
        self._keep(resolved)
        return resolved

    def _resolve_grown(self, messages: list[Message], ids: list[int]) -> list[_Entry]:
        """:meth:`_resolve` of the last list, edited in place or appended to (the same
        objects at the same places): only the edited and new messages are read."""
        copies, resolved = self._copies, self._resolved
        known = len(copies)
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
        if self._plausible(residual, predicted):
            self._pool(features, residual)
            scale = residual / predicted if predicted > 0 else 1.0
            self._charge(new, predictions, scale, residual if predicted <= 0 else None)
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
        self._charge(new, predictions, 1.0)

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
        self._charge(new, predictions, scale)
        self._provisional = new
        self._reported = True

    def _pool(self, features: list[float], tokens: float) -> None:
        """Refit on the new content of every few reports taken together (a refit
        costs about as much as counting a short message; little is lost)."""
        if self._pooled:
            features = list(map(add, features, self._pooled_features))
            tokens += self._pooled_tokens
        self._pooled += 1
        if self._pooled >= (_POOL if self._accepted > _POOL_AFTER else 1):
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
        if self._accepted < _REPRICE_UNTIL:
            self._provisional = kept
            return
        for entry in kept:  # the split is final: the features are no longer read
            entry.provisional = False
            entry.features = _DROPPED
        self._provisional = []

    @staticmethod
    def _charge(
        entries: list[_Entry], predictions: list[float], scale: float, even: float | None = None
    ) -> None:
        share = even / len(entries) if even is not None and entries else None
        for entry, prediction in zip(entries, predictions, strict=True):
            entry.charge = share if share is not None else prediction * scale
            if not entry.provisional:
                entry.features = _DROPPED  # charged: never predicted again

    def _plausible(self, residual: float, predicted: float) -> bool:
        """Whether ``residual`` tokens for content estimated at ``predicted`` can be believed."""
        error = residual - predicted
        if residual < 0:
            return False  # the messages cannot cost less than nothing: the overhead changed
        if self._accepted < _WARMUP:
            band = _BAND_INITIAL
        else:
            band = max(_BAND_MIN, min(_BAND_INITIAL, _BAND_SIGMAS * self._spread))
        if abs(error) <= band * max(predicted, 0.0) + _BAND_SLACK or (
            self._rejected_in_row >= _REJECTS_TO_ACCEPT
        ):
            self._rejected_in_row = 0
            relative = error / max(predicted, _BAND_SLACK)
            self._spread = math.sqrt(0.9 * self._spread**2 + 0.1 * min(relative**2, 1.0))
            self._accepted += 1
            return True
        self._rejected_in_row += 1
        return False
