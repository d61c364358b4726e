"""The text counts of the ledger's feature vector: characters by class, lines and
runs of punctuation and of spaces, at little more than one pass over a text."""

from __future__ import annotations

from typing import Final

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
