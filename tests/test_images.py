"""Images, documents and thinking weigh something in the estimate.

Image payloads are built here byte by byte (``struct``), with known dimensions:
the estimate reads only their headers, so the rest may be filler.
"""

from __future__ import annotations

import base64
import json
import random
import struct
from typing import Any

import pytest

from bareagent_compact import estimate_tokens, images
from bareagent_compact.images import (
    ANTHROPIC_IMAGE_TOKENS,
    DOCUMENT_PAGE_TOKENS,
    OPENAI_IMAGE_TOKENS,
    OPENAI_LOW_DETAIL_TOKENS,
    anthropic_tokens,
    image_size,
    openai_tokens,
)


def png(width: int, height: int, filler: int = 64) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", len(ihdr))
        + b"IHDR"
        + ihdr
        + b"\0\0\0\0"  # the CRC is not read
        + bytes(filler)
    )


def jpeg(
    width: int, height: int, metadata: int = 0, frame: int = 0xC0, fill: bool = False
) -> bytes:
    """A JPEG whose start-of-frame comes after ``metadata`` bytes of APP segments."""
    out = bytearray(b"\xff\xd8")
    out += b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    while metadata > 0:
        size = min(metadata, 65533)
        out += b"\xff\xe1" + struct.pack(">H", size + 2) + bytes(size)
        metadata -= size
    out += b"\xff\xdb" + struct.pack(">H", 67) + bytes(65)  # a quantisation table
    if fill:
        out += b"\xff"  # a fill byte before the marker
    out += bytes((0xFF, frame)) + struct.pack(">HBHHB", 17, 8, height, width, 3) + bytes(9)
    out += b"\xff\xda" + struct.pack(">H", 12) + bytes(10) + bytes(200) + b"\xff\xd9"
    return bytes(out)


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\xf7\0\0" + bytes(40)


def webp(width: int, height: int, kind: str) -> bytes:
    if kind == "VP8X":
        body = (
            b"\x10\0\0\0" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
        )
    elif kind == "VP8 ":
        body = b"\x30\x01\x00\x9d\x01\x2a" + struct.pack("<HH", width, height) + bytes(20)
    else:
        bits = (width - 1) | (height - 1) << 14
        body = b"\x2f" + bits.to_bytes(4, "little") + bytes(20)
    chunk = kind.encode() + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def anthropic_image(data: str, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def user(*blocks: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(blocks)}]


# -- reading the size ---------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "size"),
    [
        (png(1000, 800), (1000, 800)),
        (png(1, 70000), (1, 70000)),
        (gif(320, 200), (320, 200)),
        (webp(1920, 1080, "VP8X"), (1920, 1080)),
        (webp(640, 480, "VP8 "), (640, 480)),
        (webp(333, 16384, "VP8L"), (333, 16384)),
        (jpeg(1280, 720), (1280, 720)),
        (jpeg(4032, 3024, metadata=150_000), (4032, 3024)),  # the frame after 150 KB of EXIF
        (jpeg(800, 600, frame=0xC2), (800, 600)),  # progressive
        (jpeg(640, 400, frame=0xC1, fill=True), (640, 400)),
    ],
)
def test_image_size_is_read_from_the_header_of_each_format(
    data: bytes, size: tuple[int, int]
) -> None:
    assert image_size(b64(data)) == size


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "abc",
        "not base64 at all!!",
        b64(b"plain text, not an image" * 4),
        b64(png(0, 10)),  # a zero dimension
        b64(jpeg(10, 10)[:40]),  # cut before the frame
        b64(b"\xff\xd8\xff\xda" + bytes(40)),  # a scan before any frame
        b64(png(10, 10)[:20]),  # headers cut short
        b64(gif(5, 5)[:8]),
        b64(webp(7, 7, "VP8X")[:26]),
        "ünïcode",
    ],
)
def test_image_size_is_none_for_data_that_does_not_say_it(payload: str) -> None:
    assert image_size(payload) is None


def test_image_size_never_raises_on_damaged_headers() -> None:
    rng = random.Random(8)
    seeds = [png(10, 10), gif(5, 5), jpeg(9, 9, metadata=1000)]
    seeds += [webp(7, 7, kind) for kind in ("VP8X", "VP8 ", "VP8L")]
    for _ in range(5000):
        data = bytearray(rng.choice(seeds))
        del data[rng.randrange(len(data) + 1) :]
        for _ in range(rng.randrange(3)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        size = image_size(b64(bytes(data)))
        assert size is None or min(size) > 0


def test_image_size_is_remembered_per_payload(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[object] = []
    original = images.read_size

    def counting(data: Any) -> tuple[int, int] | None:
        reads.append(data)
        return original(data)

    monkeypatch.setattr(images, "read_size", counting)
    payload = b64(jpeg(1600, 1200, metadata=70_000))
    messages = user(anthropic_image(payload, "image/jpeg"))
    first = estimate_tokens(messages)
    for _ in range(5):  # later turns: the same image, also as an equal but new string
        assert estimate_tokens(messages) == first
        assert estimate_tokens(user(anthropic_image("".join(list(payload)), "image/jpeg"))) == first
    assert len(reads) == 1


# -- the formulas ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (200, 200, 54),  # 40,000 / 750 = 53.3, rounded up (the docs: ~54)
        (1000, 1000, 1334),  # the docs: ~1,334
        (1092, 1092, 1590),  # the docs: ~1,590, the largest square kept as it is
        (1568, 100, 210),  # long edge at the limit: not scaled
        (4000, 100, 82),  # long edge scaled to 1568: 1568 x 39.2
        (3000, 2000, ANTHROPIC_IMAGE_TOKENS),  # scaled down to about 1,600 tokens
        (1, 1, 1),
    ],
)
def test_anthropic_formula_scales_down_then_divides_the_area_by_750(
    width: int, height: int, tokens: int
) -> None:
    assert anthropic_tokens(width, height) == tokens
    assert anthropic_tokens(height, width) == tokens


@pytest.mark.parametrize(
    ("width", "height", "detail", "tokens"),
    [
        (1024, 1024, "high", 765),  # the docs: 768 x 768, 4 tiles
        (2048, 4096, "high", 1105),  # the docs: 1024 x 2048, then 768 x 1536, 6 tiles
        (4096, 8192, "low", 85),  # the docs: low detail is a fixed cost
        (500, 500, "auto", 255),  # 1 tile, not scaled up
        (513, 500, None, 425),  # 2 tiles
        (1920, 1080, "high", 1105),  # 1365 x 768: 3 x 2 tiles
        (1, 1, "high", 255),
    ],
)
def test_openai_formula_counts_512_pixel_tiles_after_scaling(
    width: int, height: int, detail: Any, tokens: int
) -> None:
    assert openai_tokens(width, height, detail) == tokens
    assert openai_tokens(height, width, detail) == tokens


# -- each dialect's block shape ---------------------------------------------------


def test_anthropic_image_block_weighs_its_size_by_the_anthropic_formula() -> None:
    for data, media_type, tokens in (
        (png(1000, 1000), "image/png", 1334),
        (jpeg(200, 200), "image/jpeg", 54),
        (gif(4000, 100), "image/gif", 82),
        (webp(3000, 2000, "VP8X"), "image/webp", ANTHROPIC_IMAGE_TOKENS),
    ):
        assert estimate_tokens(user(anthropic_image(b64(data), media_type))) == tokens


def test_anthropic_image_inside_a_tool_result_weighs_beside_its_text() -> None:
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "abcd"}, anthropic_image(b64(png(1000, 1000)))],
    }
    assert estimate_tokens(user(result)) == 1 + 1334


@pytest.mark.parametrize(
    "source",
    [
        {"type": "url", "url": "https://example.com/cat.png"},
        {"type": "file", "file_id": "file_011"},
        {"type": "base64", "media_type": "image/png", "data": b64(b"garbage" * 10)},
        None,
    ],
)
def test_anthropic_image_of_unknown_size_costs_the_largest_image(source: Any) -> None:
    assert estimate_tokens(user({"type": "image", "source": source})) == ANTHROPIC_IMAGE_TOKENS


def test_chat_image_url_weighs_its_data_url_by_the_openai_formula() -> None:
    url = "data:image/png;base64," + b64(png(2048, 4096))
    high = {"type": "image_url", "image_url": {"url": url, "detail": "high"}}
    auto = {"type": "image_url", "image_url": {"url": url}}
    low = {"type": "image_url", "image_url": {"url": url, "detail": "low"}}
    assert estimate_tokens(user(high)) == estimate_tokens(user(auto)) == 1105
    assert estimate_tokens(user(low)) == OPENAI_LOW_DETAIL_TOKENS
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}}
    assert estimate_tokens(user(remote)) == OPENAI_IMAGE_TOKENS
    remote_low = {"type": "image_url", "image_url": {"url": "https://x/a.jpg", "detail": "low"}}
    assert estimate_tokens(user(remote_low)) == OPENAI_LOW_DETAIL_TOKENS
    jpeg_url = "data:image/jpeg;base64," + b64(jpeg(1024, 1024, metadata=90_000))
    assert estimate_tokens(user({"type": "image_url", "image_url": {"url": jpeg_url}})) == 765


def test_responses_input_image_weighs_its_data_url_by_the_openai_formula() -> None:
    url = "data:image/webp;base64," + b64(webp(1024, 1024, "VP8 "))
    message = {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "abcd"},
            {"type": "input_image", "image_url": url, "detail": "auto"},
        ],
    }
    assert estimate_tokens([message]) == 1 + 765
    by_id = {"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}
    assert estimate_tokens([by_id]) == OPENAI_IMAGE_TOKENS
    low = {"role": "user", "content": [{"type": "input_image", "image_url": url, "detail": "low"}]}
    assert estimate_tokens([low]) == OPENAI_LOW_DETAIL_TOKENS


def test_responses_tool_outputs_with_images_weigh_them() -> None:
    url = "data:image/gif;base64," + b64(gif(500, 500))
    output = {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [{"type": "input_image", "image_url": url}],
    }
    screenshot = {
        "type": "computer_call_output",
        "call_id": "call_2",
        "output": {"type": "computer_screenshot", "image_url": url},
    }
    assert estimate_tokens([output]) == 255
    assert estimate_tokens([screenshot]) == 255


def test_documents_weigh_pages_by_the_size_of_their_data() -> None:
    pdf = "JVBERi0xLjcK" + "A" * 100_000  # about two pages of base64
    anthropic = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": pdf},
    }
    assert estimate_tokens(user(anthropic)) == 2 * DOCUMENT_PAGE_TOKENS
    remote = {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}}
    assert estimate_tokens(user(remote)) == DOCUMENT_PAGE_TOKENS
    huge = {"type": "document", "source": {"type": "base64", "data": "A" * 20_000_000}}
    assert estimate_tokens(user(huge)) == 100 * DOCUMENT_PAGE_TOKENS
    text = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "abcd" * 4},
    }
    assert estimate_tokens(user(text)) == 4
    content = {
        "type": "document",
        "source": {"type": "content", "content": [{"type": "text", "text": "abcd"}]},
    }
    assert estimate_tokens(user(content)) == 1
    chat = {"type": "file", "file": {"file_data": "data:application/pdf;base64," + pdf}}
    assert estimate_tokens(user(chat)) == 2 * DOCUMENT_PAGE_TOKENS
    chat_id = {"type": "file", "file": {"file_id": "file-1"}}
    assert estimate_tokens(user(chat_id)) == DOCUMENT_PAGE_TOKENS
    responses = {"type": "input_file", "file_data": pdf, "filename": "a.pdf"}
    assert estimate_tokens(user(responses)) == 2 * DOCUMENT_PAGE_TOKENS


# -- thinking -----------------------------------------------------------------


def test_thinking_blocks_count_their_text_not_their_signature() -> None:
    block = {"type": "thinking", "thinking": "abcd " * 8, "signature": "S" * 400}
    assert estimate_tokens([{"role": "assistant", "content": [block]}]) == 10


def test_redacted_thinking_counts_its_data_as_text() -> None:
    block = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix" * 20}
    expected = estimate_tokens([{"role": "assistant", "content": block["data"]}])
    assert expected > 0
    assert estimate_tokens([{"role": "assistant", "content": [block]}]) == expected


def test_responses_reasoning_counts_its_summary_text() -> None:
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "abcd" * 10}],
        "encrypted_content": "gAAAA" * 100,
    }
    assert estimate_tokens([item]) == 10


# -- the estimate stays monotone, and a session with images weighs them ---------


def _media_block(rng: random.Random) -> dict[str, Any]:
    size = (rng.randint(1, 5000), rng.randint(1, 5000))
    kind = rng.randrange(5)
    if kind == 0:
        return anthropic_image(b64(png(*size)))
    if kind == 1:
        url = "data:image/jpeg;base64," + b64(jpeg(*size))
        return {
            "type": "image_url",
            "image_url": {"url": url, "detail": rng.choice(["low", "high"])},
        }
    if kind == 2:
        return {"type": "input_image", "image_url": "data:image/gif;base64," + b64(gif(*size))}
    if kind == 3:
        return {"type": "thinking", "thinking": "hmm " * rng.randrange(50), "signature": "x"}
    return {"type": "text", "text": "word " * rng.randrange(50)}


def test_estimate_is_monotone_when_messages_with_images_are_appended() -> None:
    rng = random.Random(19)
    messages: list[dict[str, Any]] = []
    previous = 0
    for _ in range(200):
        blocks = [_media_block(rng) for _ in range(rng.randint(0, 3))]
        messages.append({"role": rng.choice(["user", "assistant"]), "content": blocks})
        estimate = estimate_tokens(messages)
        assert estimate >= previous
        previous = estimate


def screenshot_session() -> list[dict[str, Any]]:
    """A computer-use session of about 0.72 MB: 16 screenshots (1280 x 800 PNG, about
    40 KB each) answering tool calls, with a little text around them."""
    rng = random.Random(720)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Open the settings page and turn on dark mode."}
    ]
    for turn in range(16):
        call_id = f"toolu_{turn:02d}"
        action = (
            {"action": "screenshot"}
            if turn % 2
            else {"action": "left_click", "coordinate": [640, 400]}
        )
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {turn}: looking at the screen."},
                    {"type": "tool_use", "id": call_id, "name": "computer", "input": action},
                ],
            }
        )
        payload = png(1280, 800, filler=0) + rng.randbytes(33_500)
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "content": [anthropic_image(b64(payload))],
                    }
                ],
            }
        )
    messages.append({"role": "assistant", "content": "Dark mode is on."})
    return messages


def test_a_session_of_screenshots_weighs_its_images() -> None:
    messages = screenshot_session()
    size = len(json.dumps(messages))
    assert 700_000 <= size <= 740_000
    images_only = 16 * anthropic_tokens(1280, 800)  # 1366 each
    text_only = estimate_tokens(
        [
            {**m, "content": [b for b in m["content"] if b.get("type") != "tool_result"]}
            if isinstance(m["content"], list)
            else m
            for m in messages
        ]
    )
    assert estimate_tokens(messages) == text_only + images_only
    assert estimate_tokens(messages) > 20_000
