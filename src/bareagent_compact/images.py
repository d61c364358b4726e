"""What an image or a file weighs: its dimensions read from the header of its
base64 data, and the providers' published formulas.

Only a few bytes of a payload are decoded: PNG (``IHDR``), GIF (logical screen)
and WebP (``VP8 ``, ``VP8L``, ``VP8X``) say their size in their first 30 bytes;
a JPEG's size is in its start-of-frame segment, which may come after tens of
kilobytes of metadata, so its segments are walked by their lengths, decoding
a few bytes at each. The answer is remembered per payload (images repeat every
turn), keyed by its length and its hash, which a string computes once and keeps:
a steady turn decodes nothing and reads no payload again. ``docs/tokens.md``
gives the formulas and their sources.
"""

from __future__ import annotations

import binascii
import math
import struct
from typing import Any, Final

ANTHROPIC_IMAGE_TOKENS: Final = 1600
"""An Anthropic image whose size is unknown (a URL, a file id, unreadable data):
the most an image costs once the API has scaled it down."""
ANTHROPIC_MAX_EDGE: Final = 1568
"""The API scales an image down until its long edge is at most this."""
ANTHROPIC_PIXELS_PER_TOKEN: Final = 750
"""Anthropic: tokens = width * height / 750."""

OPENAI_IMAGE_TOKENS: Final = 765
"""An OpenAI image at high or automatic detail whose size is unknown: the cost of
a 1024 x 1024 image (four tiles)."""
OPENAI_LOW_DETAIL_TOKENS: Final = 85
"""An OpenAI image at ``detail: "low"``, of any size; also the base of every image."""
OPENAI_TILE_TOKENS: Final = 170
"""What each 512 px tile of an OpenAI image at high detail costs."""

DOCUMENT_PAGE_TOKENS: Final = 3000
"""What one page of a document (a PDF) is taken to cost: its text and its image."""
DOCUMENT_PAGE_CHARS: Final = 65536
"""A document's base64 data counts one page per this many characters (about
48 KB of PDF), at least one, at most :data:`DOCUMENT_MAX_PAGES`."""
DOCUMENT_MAX_PAGES: Final = 100

_CACHE_LIMIT: Final = 4096
_JPEG_SEGMENTS: Final = 256
"""At most this many JPEG segments are walked before the size is given up on."""
_JPEG_FRAMES: Final = frozenset(
    (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF)
)
"""Start-of-frame markers (C4, C8 and CC are other segments)."""
_JPEG_STANDALONE: Final = frozenset({0x01, *range(0xD0, 0xD9)})

_sizes: dict[tuple[int, int], tuple[int, int] | None] = {}


class _Base64:
    """Random access to the bytes a base64 string stands for, decoding only what is read."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset`` (fewer at the end; empty when undecodable)."""
        start = offset // 3
        stop = -(-(offset + size) // 3)
        try:
            chunk = binascii.a2b_base64(self.text[4 * start : 4 * stop])
        except (binascii.Error, ValueError):
            return b""
        skip = offset - 3 * start
        return chunk[skip : skip + size]


def image_size(data: str) -> tuple[int, int] | None:
    """The ``(width, height)`` a base64 PNG, JPEG, GIF or WebP image says it has, else
    ``None``; remembered per payload."""
    key = (len(data), hash(data))
    try:
        return _sizes[key]
    except KeyError:
        pass
    size = read_size(_Base64(data))
    if len(_sizes) >= _CACHE_LIMIT:
        _sizes.clear()
    _sizes[key] = size
    return size


def read_size(data: _Base64) -> tuple[int, int] | None:
    """The dimensions in an image's header, by its signature."""
    head = data.read(0, 32)
    size: tuple[int, int] | None = None
    if len(head) < 24:
        return None  # no image is that short: its header is cut
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
        size = struct.unpack(">II", head[16:24])
    elif head[:6] in (b"GIF87a", b"GIF89a"):
        size = struct.unpack("<HH", head[6:10])
    elif head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        size = _webp_size(head)
    elif head[:2] == b"\xff\xd8":
        size = _jpeg_size(data)
    if size is None or min(size) <= 0:
        return None
    return size


def _webp_size(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if len(head) < 30:
        return None
    if chunk == b"VP8X":
        width = int.from_bytes(head[24:27], "little") + 1
        return width, int.from_bytes(head[27:30], "little") + 1
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", head[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1
    return None


def _jpeg_size(data: _Base64) -> tuple[int, int] | None:
    """Walk the segments after SOI until a start-of-frame marker says the size."""
    offset = 2
    for _ in range(_JPEG_SEGMENTS):
        header = data.read(offset, 9)
        if len(header) < 4 or header[0] != 0xFF:
            return None
        marker = header[1]
        if marker == 0xFF:  # a fill byte before the marker
            offset += 1
        elif marker in _JPEG_STANDALONE:
            offset += 2
        elif marker in _JPEG_FRAMES:
            if len(header) < 9:
                return None
            height, width = struct.unpack(">HH", header[5:9])
            return width, height
        elif marker == 0xDA:  # start of scan: the image data, and no frame seen
            return None
        else:
            offset += 2 + int.from_bytes(header[2:4], "big")
    return None


def anthropic_tokens(width: int, height: int) -> int:
    """What Anthropic charges for a ``width`` x ``height`` image: scaled down until its
    long edge is at most 1568 px and it costs at most about 1,600 tokens, then
    ``width * height / 750``, rounded up."""
    scale = min(1.0, ANTHROPIC_MAX_EDGE / max(width, height))
    tokens = math.ceil(width * height * scale * scale / ANTHROPIC_PIXELS_PER_TOKEN)
    return min(tokens, ANTHROPIC_IMAGE_TOKENS)


def openai_tokens(width: int, height: int, detail: Any = "auto") -> int:
    """What OpenAI charges for a ``width`` x ``height`` image (GPT-4o-class tiles): 85
    at ``detail: "low"``; else scaled to fit 2048 x 2048, then down until its
    short side is at most 768 px, 170 per 512 px tile plus 85."""
    if detail == "low":
        return OPENAI_LOW_DETAIL_TOKENS
    if max(width, height) > 2048:
        width, height = _scaled(width, height, 2048 / max(width, height))
    if min(width, height) > 768:
        width, height = _scaled(width, height, 768 / min(width, height))
    tiles = -(-width // 512) * -(-height // 512)
    return OPENAI_LOW_DETAIL_TOKENS + OPENAI_TILE_TOKENS * tiles


def _scaled(width: int, height: int, scale: float) -> tuple[int, int]:
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def base64_of(url: Any) -> str | None:
    """The payload of a ``data:...;base64,`` URL, else ``None``."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    comma = url.find(",", 5, 256)
    if comma < 0 or not url[5:comma].endswith(";base64"):
        return None
    return url[comma + 1 :]


def anthropic_image(data: Any) -> int:
    """Anthropic tokens of an image with base64 ``data`` (anything else: unknown size)."""
    size = image_size(data) if isinstance(data, str) else None
    return ANTHROPIC_IMAGE_TOKENS if size is None else anthropic_tokens(*size)


def openai_image(url: Any, detail: Any) -> int:
    """OpenAI tokens of an image at ``url`` (a ``data:`` URL is read; any other is
    of unknown size) with ``detail``."""
    if detail == "low":
        return OPENAI_LOW_DETAIL_TOKENS
    data = base64_of(url)
    size = image_size(data) if data is not None else None
    return OPENAI_IMAGE_TOKENS if size is None else openai_tokens(*size, detail)


def document_tokens(data: Any) -> int:
    """Tokens of a document (a PDF) with base64 ``data`` (or a ``data:`` URL): one page
    per 64 KB of data, 3,000 tokens a page; one page when the data is not here."""
    if not isinstance(data, str):
        return DOCUMENT_PAGE_TOKENS
    pages = -(-len(data) // DOCUMENT_PAGE_CHARS)
    return DOCUMENT_PAGE_TOKENS * min(DOCUMENT_MAX_PAGES, max(1, pages))
