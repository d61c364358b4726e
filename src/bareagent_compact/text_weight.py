"""The weight of a text in quarter tokens (SPEC 11.5's character weights).

Each character weighs, in this order of precedence: CJK 1.5, ASCII letter or
digit 0.25, whitespace (``str.isspace``) 0.25, anything else 0.5; everything is
counted in exact integer quarters, with no per-character Python work (see
:mod:`bareagent_compact.tokens` for how).
"""

from __future__ import annotations

import re
from codecs import utf_16_le_encode as _utf_16_le_encode
from typing import Final

CJK_RANGES: Final[tuple[tuple[int, int], ...]] = (
    (0x3000, 0x303F),  # CJK symbols and punctuation (U+3000 ideographic space included)
    (0x3040, 0x309F),  # Hiragana
    (0x30A0, 0x30FF),  # Katakana
    (0x3400, 0x4DBF),  # CJK unified ideographs extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x2A6DF),  # CJK unified ideographs extension B
    (0x2F800, 0x2FA1F),  # CJK compatibility ideographs supplement
)
"""Code point ranges (inclusive) that weigh as CJK."""

# Weights in quarters, so that sums stay exact integers.
_CJK_Q: Final = 6
_LIGHT_Q: Final = 1  # ASCII letter/digit or whitespace
_OTHER_Q: Final = 2
MOST_QUARTERS_PER_CHAR: Final = _CJK_Q
"""The heaviest character (CJK) in quarters: a text of at most ``budget / 6``
characters cannot weigh more than ``budget`` quarters."""

# Whitespace (str.isspace) above U+00FF; U+3000 is CJK, which takes precedence.
_WIDE_SPACE: Final = (
    "\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f"
)


def _is_cjk(code: int) -> bool:
    return any(lo <= code <= hi for lo, hi in CJK_RANGES)


def _block_cover(block: int) -> int:
    """How many characters of the 256-character BMP block ``block`` are CJK."""
    first, last = block << 8, block << 8 | 0xFF
    return sum(max(0, min(hi, last) - max(lo, first) + 1) for lo, hi in CJK_RANGES)


def _lead_unit(code: int) -> int:
    """The leading (high) surrogate of an astral code point in UTF-16."""
    return 0xD800 + ((code - 0x10000) >> 10)


# Latin-1 characters weighing 0.25: ASCII letters and digits, and every
# character <= U+00FF for which str.isspace() is true.
_LIGHT_LATIN1: Final = bytes(
    c for c in range(256) if (c < 128 and chr(c).isalnum()) or chr(c).isspace()
)
# UTF-16 high bytes that need no closer look: 0 (the Latin-1 block, settled by
# the Latin-1 encoding) and the blocks that are CJK from end to end. Every other
# code unit counts as a character weighing 0.5, unless its block is spotted below.
_SETTLED_HIGH: Final = bytes(h for h in range(256) if h == 0 or _block_cover(h) == 256)


def _unit_finder(block: int, lows: bytes) -> tuple[bytes, bytes, tuple[str, ...]]:
    """What :func:`_count_units` needs to count the UTF-16 code units of ``block``
    whose low byte is one of ``lows``.

    The translation table turns each byte of UTF-16-LE text into two flags: 1 if
    it is one of ``lows``, 2 if it is ``block``. Decoded back as UTF-16-LE, each
    code unit then reads as the flags of its high and low bytes, and the units
    sought are exactly the characters listed last.
    """
    table = bytes((x in lows) | (x == block) << 1 for x in range(256))
    targets = tuple(sorted({chr(table[block] << 8 | table[low]) for low in lows}))
    return lows, table, targets


# Blocks whose characters do not all weigh alike: partly CJK (U+4Dxx, U+D7xx) or
# holding whitespace (U+16xx, U+20xx). For each: the quarters that each of the
# characters that differ adds, and how to find them.
_SPOTS: Final = {
    **{
        h: (
            _CJK_Q - _OTHER_Q,
            _unit_finder(h, bytes(x for x in range(256) if _is_cjk(h << 8 | x))),
        )
        for h in range(256)
        if 0 < _block_cover(h) < 256
    },
    **{
        h: (
            _LIGHT_Q - _OTHER_Q,
            _unit_finder(h, bytes(sorted(ord(c) & 0xFF for c in _WIDE_SPACE if ord(c) >> 8 == h))),
        )
        for h in sorted({ord(c) >> 8 for c in _WIDE_SPACE})
    },
}

# Astral CJK characters are surrogate pairs in UTF-16. Their leading surrogates
# tell when the code points themselves must be looked at.
_ASTRAL_CJK_RANGES: Final = [(lo, hi) for lo, hi in CJK_RANGES if lo > 0xFFFF]
_ASTRAL_CJK_RE: Final = re.compile(
    "[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _ASTRAL_CJK_RANGES) + "]"
)
_ASTRAL_CJK_LEAD_UNITS: Final = sorted(
    {u for lo, hi in _ASTRAL_CJK_RANGES for u in range(_lead_unit(lo), _lead_unit(hi) + 1)}
)
_ASTRAL_CJK_LEADS: Final = {
    h: _unit_finder(h, bytes(u & 0xFF for u in _ASTRAL_CJK_LEAD_UNITS if u >> 8 == h))
    for h in sorted({u >> 8 for u in _ASTRAL_CJK_LEAD_UNITS})
}

# High bytes other than these are dropped before the spotted blocks are counted.
_UNFLAGGED_HIGH: Final = bytes(
    h for h in range(256) if h not in _SPOTS and h not in _ASTRAL_CJK_LEADS
)
# UTF-8 bytes of ASCII letters, digits and whitespace; and the bytes that are,
# or begin, a character up to U+00FF.
_LIGHT_ASCII: Final = bytes(c for c in _LIGHT_LATIN1 if c < 0x80)
_UTF8_NARROW: Final = bytes(range(0x80)) + b"\xc2\xc3"

_CHUNK: Final = 1 << 13
"""Longer strings are classified this many characters at a time."""
_BATCH: Final = 1 << 11
"""Short strings are joined into batches of about this many characters."""
_SMALL: Final = 1024
"""Strings up to this length are joined with their neighbours and classified together."""
_SPARSE: Final = 4
"""Strings with fewer extra UTF-8 bytes than one in this many characters count as
mostly ASCII (each character above U+07FF takes two extra bytes)."""
_SHORT: Final = 32
"""Non-ASCII strings up to this length are weighed character by character."""
_MEMO_LIMIT: Final = 1 << 16
"""At most this many single characters have their weight remembered."""
_PROBE: Final = 256
"""About how many characters, evenly spread, decide how a long string is classified."""
_SPOT_CHECK: Final = 64
"""Up to one code unit in this many, a block's units are checked one by one."""


def _count_units(
    units: bytes, high: bytes, block: int, count: int, finder: tuple[bytes, bytes, tuple[str, ...]]
) -> int:
    """How many of the ``count`` code units of ``block`` in ``units`` have a low byte in
    ``finder``'s ``lows``; ``high`` holds the high bytes of ``units``."""
    lows, table, targets = finder
    if count * _SPOT_CHECK > len(high):
        flags = units.translate(table).decode("utf-16-le")
        return sum([flags.count(target) for target in targets])
    find = high.find
    found = 0
    position = -1
    for _ in range(count):
        position = find(block, position + 1)
        if units[2 * position] in lows:
            found += 1
    return found


def _wide_quarters(text: str, narrow_length: int) -> int:
    """Quarters to add for the characters of ``text`` above U+00FF, so far counted as
    weighing 0.5 each; ``narrow_length`` characters of ``text`` are up to U+00FF."""
    units = _utf_16_le_encode(text, "surrogatepass")[0]
    high = units[1::2]
    rest = high.translate(None, _SETTLED_HIGH)
    quarters = (_CJK_Q - _OTHER_Q) * (len(high) - len(rest) - narrow_length)
    flagged = rest.translate(None, _UNFLAGGED_HIGH) if rest else rest
    if not flagged:
        return quarters
    for block, (delta, finder) in _SPOTS.items():
        count = flagged.count(block)
        if count:
            quarters += delta * _count_units(units, high, block, count, finder)
    if len(high) != len(text):  # surrogate pairs: astral characters are present
        for block, finder in _ASTRAL_CJK_LEADS.items():
            count = flagged.count(block)
            if count and _count_units(units, high, block, count, finder):
                quarters += (_CJK_Q - _OTHER_Q) * len(_ASTRAL_CJK_RE.findall(text))
                break
    return quarters


class _CharQuarters(dict[str, int]):
    """The weight of single characters, in quarters, remembered once computed."""

    def __missing__(self, char: str) -> int:
        code = ord(char)
        if _is_cjk(code):
            quarters = _CJK_Q
        elif (code < 0x80 and char.isalnum()) or char.isspace():
            quarters = _LIGHT_Q
        else:
            quarters = _OTHER_Q
        if len(self) < _MEMO_LIMIT:
            self[char] = quarters
        return quarters


_CHAR_QUARTERS: Final = _CharQuarters()


def _mixed_quarters(text: str) -> int:
    """Quarters of a non-ASCII string (of at most about ``_CHUNK`` characters)."""
    length = len(text)
    if length <= _SHORT:
        return sum(map(_CHAR_QUARTERS.__getitem__, text))
    sample = text[:: max(1, length // _PROBE)]  # the text itself when short
    utf8 = sample.encode("utf-8", "surrogatepass")
    if (len(utf8) - len(sample)) * _SPARSE > len(sample):
        return _dense_quarters(text)
    if sample is not text:
        utf8 = text.encode("utf-8", "surrogatepass")
    # Mostly ASCII: its UTF-8 bytes settle every character up to U+00FF, and what
    # is left once those are dropped decodes to the few characters above U+00FF
    # (the decoder skips the continuation bytes left behind, and lone surrogates,
    # which weigh 0.5 as already counted).
    rest = utf8.translate(None, _LIGHT_ASCII)
    quarters = _OTHER_Q * length - (len(utf8) - len(rest))
    if b"\xc2" in rest:  # U+0080-U+00BF, among which U+0085 and U+00A0 are whitespace
        quarters -= rest.count(b"\xc2\x85") + rest.count(b"\xc2\xa0")
    wide = rest.translate(None, _UTF8_NARROW).decode("utf-8", "ignore")
    if len(wide) <= _SHORT:
        return quarters - _OTHER_Q * len(wide) + sum(map(_CHAR_QUARTERS.__getitem__, wide))
    return quarters + _wide_quarters(wide, 0)


def _dense_quarters(text: str) -> int:
    """Quarters of a string with many characters above U+00FF."""
    length = len(text)
    narrow = text.encode("latin-1", "ignore")
    narrow_length = len(narrow)
    quarters = _OTHER_Q * length - narrow_length + len(narrow.translate(None, _LIGHT_LATIN1))
    if narrow_length == length:
        return quarters
    return quarters + _wide_quarters(text, narrow_length)


def text_quarters(text: str) -> int:
    """The weight of one string, in quarter tokens (exact)."""
    length = len(text)
    if length <= _CHUNK:
        if text.isascii():
            return length + len(text.encode("ascii").translate(None, _LIGHT_LATIN1))
        return _mixed_quarters(text)
    if text.isascii():
        return length + sum(
            [
                len(text[i : i + _CHUNK].encode("ascii").translate(None, _LIGHT_LATIN1))
                for i in range(0, length, _CHUNK)
            ]
        )
    return sum([_mixed_quarters(text[i : i + _CHUNK]) for i in range(0, length, _CHUNK)])


def _strings_quarters(strings: list[str]) -> int:
    """The total weight of ``strings``; short ones are joined and classified in batches."""
    quarters = 0
    narrow: list[str] = []
    narrow_length = 0
    wide: list[str] = []
    wide_length = 0
    for text in strings:
        length = len(text)
        if length > _SMALL:
            quarters += text_quarters(text)
        elif text.isascii():
            narrow.append(text)
            narrow_length += length
            if narrow_length > _BATCH:
                quarters += text_quarters("".join(narrow))
                narrow.clear()
                narrow_length = 0
        else:
            wide.append(text)
            wide_length += length
            if wide_length > _BATCH:
                quarters += _mixed_quarters("".join(wide))
                wide.clear()
                wide_length = 0
    if narrow:
        quarters += text_quarters("".join(narrow))
    if wide:
        quarters += _mixed_quarters("".join(wide))
    return quarters
