"""The character-weight token estimate of SPEC 11.5.

A cheap heuristic for "is the history getting long?", not a tokenizer. Each
character weighs, in this order of precedence: CJK 1.5, ASCII letter or digit
0.25, whitespace (``str.isspace``) 0.25, anything else 0.5. The grand total is
rounded up. Internally everything is counted in exact integer quarters.

The hot path avoids per-character Python work: an ASCII string is classified by
one ``bytes.translate``; other strings use their Latin-1 and UTF-16 encodings,
which expose character classes by Unicode block at C speed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from bareagent_compact._json import to_json
from bareagent_compact.protocols import Message

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

CJK_WEIGHT: Final = 1.5
ALNUM_WEIGHT: Final = 0.25
SPACE_WEIGHT: Final = 0.25
OTHER_WEIGHT: Final = 0.5

# Weights in quarters, so that sums stay exact integers.
_CJK_Q: Final = 6
_LIGHT_Q: Final = 1  # ASCII letter/digit or whitespace
_OTHER_Q: Final = 2

# Latin-1 characters weighing 0.25: ASCII letters and digits, and every
# character <= U+00FF for which str.isspace() is true.
_LIGHT_LATIN1: Final = bytes(
    c for c in range(256) if (c < 128 and chr(c).isalnum()) or chr(c).isspace()
)
# UTF-16 high bytes whose whole 256-character block is CJK.
_CJK_FULL_HIGH: Final = bytes(
    h
    for h in range(256)
    if all(any(lo <= (h << 8) | x <= hi for lo, hi in CJK_RANGES[:7]) for x in (0, 255))
)
# Blocks only partly CJK (U+4Dxx, U+D7xx) and surrogates (astral characters and
# lone surrogates) are settled by a regular expression, only when present.
_PARTIAL_HIGH: Final = b"\x4d\xd7" + bytes(range(0xD8, 0xE0))
_PARTIAL_CJK_RE: Final = re.compile(
    "[\u4d00-\u4dbf\ud700-\ud7af\U00020000-\U0002a6df\U0002f800-\U0002fa1f]"
)
# Whitespace above U+00FF lives in the U+16xx and U+20xx blocks (U+3000 is CJK).
_WIDE_SPACE_HIGH: Final = b"\x16\x20"
_WIDE_SPACE_RE: Final = re.compile("[\u1680\u2000-\u200a\u2028\u2029\u202f\u205f]")


def _wide_adjustment(text: str) -> int:
    """Quarters to add for characters above U+00FF (all counted as "other" so far)."""
    high = text.encode("utf-16-le", "surrogatepass")[1::2]
    cjk = len(high) - len(high.translate(None, _CJK_FULL_HIGH))
    if len(high.translate(None, _PARTIAL_HIGH)) != len(high):
        cjk += len(_PARTIAL_CJK_RE.findall(text))
    adjustment = cjk * (_CJK_Q - _OTHER_Q)
    if len(high.translate(None, _WIDE_SPACE_HIGH)) != len(high):
        adjustment -= len(_WIDE_SPACE_RE.findall(text)) * (_OTHER_Q - _LIGHT_Q)
    return adjustment


def text_quarters(text: str) -> int:
    """The weight of one string, in quarter tokens (exact)."""
    length = len(text)
    if text.isascii():
        heavy = len(text.encode("ascii").translate(None, _LIGHT_LATIN1))
        return length + heavy
    narrow = text.encode("latin-1", "ignore")
    light = len(narrow) - len(narrow.translate(None, _LIGHT_LATIN1))
    quarters = _OTHER_Q * length - light
    if len(narrow) != length:
        quarters += _wide_adjustment(text)
    return quarters


MAX_DEPTH: Final = 200
"""How deeply content may nest (lists in blocks in lists ...) before it is refused."""


def value_quarters(value: Any, depth: int = 0) -> int:
    """The weight of a message's ``content`` (or any part of it), in quarters."""
    if isinstance(value, str):
        return text_quarters(value)
    if value is None:
        return 0
    if depth > MAX_DEPTH:
        raise ValueError(f"message content is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, list):
        return sum([value_quarters(item, depth + 1) for item in value])
    if isinstance(value, dict):
        if value.get("type") == "tool_use":
            name = value.get("name")
            tool_input = value.get("input")
            quarters = value_quarters(name, depth + 1) if name is not None else 0
            if isinstance(tool_input, str):
                return quarters + text_quarters(tool_input)
            if "input" in value:
                quarters += text_quarters(to_json(tool_input))
            return quarters
        return value_quarters(value.get("text"), depth + 1) + value_quarters(
            value.get("content"), depth + 1
        )
    return text_quarters(to_json(value))


def quarters_to_tokens(quarters: int) -> int:
    """Round a quarter count up to whole tokens (``math.ceil`` of the float sum)."""
    return -(-quarters // 4)


def _iter_contents(messages: Iterable[Message]) -> Iterable[Any]:
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"messages[{index}] must be a dict, got {type(message).__name__}")
        yield message.get("content")


def estimate_tokens(messages: list[Message]) -> int:
    """Estimate the tokens of ``messages`` by character weights (SPEC 11.5).

    >>> estimate_tokens([{"role": "user", "content": "你好abc123"}])
    5
    """
    if not isinstance(messages, list):
        raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
    return quarters_to_tokens(
        sum([value_quarters(content) for content in _iter_contents(messages)])
    )
