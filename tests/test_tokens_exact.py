"""The fast token estimate equals a literal, per-character reading of SPEC 11.5.

The reference below is deliberately naive: one Python test per character, float
weights, ``math.ceil`` of the float sum. The fast path must agree with it on
every string, so the strings are drawn (with fixed seeds) from every class and
every boundary that the fast path treats specially.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from bareagent_compact import text_weight
from bareagent_compact._json import to_json
from bareagent_compact.images import ANTHROPIC_IMAGE_TOKENS
from bareagent_compact.tokens import (
    CJK_RANGES,
    MAX_DEPTH,
    estimate_tokens,
    quarters_to_tokens,
    text_quarters,
    value_quarters,
)

# The CJK ranges exactly as SPEC 11.5 lists them.
SPEC_CJK_RANGES = (
    (0x3000, 0x303F),
    (0x3040, 0x309F),
    (0x30A0, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2A6DF),
    (0x2F800, 0x2FA1F),
)

UNICODE_SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def reference_weight(char: str) -> float:
    """SPEC 11.5 for one character: CJK, then ASCII letter/digit, then space, else other."""
    code = ord(char)
    if any(lo <= code <= hi for lo, hi in SPEC_CJK_RANGES):
        return 1.5
    if char.isascii() and char.isalnum():
        return 0.25
    if char.isspace():
        return 0.25
    return 0.5


def reference_text(text: str) -> float:
    return sum(reference_weight(char) for char in text)


def reference_value(value: Any) -> float:
    """SPEC 11.5 for a content value, as a float sum (not yet rounded)."""
    if isinstance(value, str):
        return reference_text(value)
    if value is None:
        return 0.0
    if isinstance(value, list):
        return sum(reference_value(item) for item in value)
    if isinstance(value, dict) and "type" in value:  # a block; other dicts are data
        if value.get("type") == "tool_use":
            total = reference_value(value["name"]) if value.get("name") is not None else 0.0
            if "input" in value:
                tool_input = value["input"]
                if not isinstance(tool_input, str):
                    tool_input = json.dumps(tool_input, ensure_ascii=False)
                total += reference_text(tool_input)
            return total
        return (
            reference_value(value.get("text"))
            + reference_value(value.get("content"))
            + reference_carried(value)
        )
    return reference_text(json.dumps(value, ensure_ascii=False))


def reference_carried(block: dict[str, Any]) -> float:
    """Beyond SPEC 11.5 (docs/tokens.md): a block without text weighs what it carries.
    The generator below makes images whose data says no size, and thinking blocks."""
    if block.get("text") is not None:
        return 0.0
    if block.get("type") == "image":
        return float(ANTHROPIC_IMAGE_TOKENS)
    if block.get("type") == "thinking":
        return reference_value(block.get("thinking"))
    return 0.0


def reference_estimate(messages: list[dict[str, Any]]) -> int:
    return math.ceil(sum(reference_value(message.get("content")) for message in messages))


def _boundaries() -> list[int]:
    points = {0x00, 0x7F, 0x80, 0xFF, 0x100, 0x1680, 0x1FFF, 0x2100, 0xFFFF, 0x10000}
    for lo, hi in SPEC_CJK_RANGES:
        points.update((lo - 1, lo, lo + 1, hi - 1, hi, hi + 1))
    for char in UNICODE_SPACES:
        points.update((ord(char) - 1, ord(char), ord(char) + 1))
    return sorted(points)


BOUNDARIES = [chr(c) for c in _boundaries()]

# Pools of code points, each a (lo, hi) range or a string of characters.
POOLS: dict[str, tuple[int, int] | str] = {
    "ascii": (0x00, 0x7F),
    "ascii_alnum": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "latin1": (0x80, 0xFF),
    "latin_ext": (0x100, 0x24F),
    "greek_cyrillic": (0x370, 0x4FF),
    "block_16": (0x1600, 0x16FF),
    "general_punct": (0x2000, 0x206F),
    "letterlike_arrows": (0x2100, 0x21FF),
    "cjk_symbols": SPEC_CJK_RANGES[0],
    "hiragana": SPEC_CJK_RANGES[1],
    "katakana": SPEC_CJK_RANGES[2],
    "kanbun_bopomofo": (0x3100, 0x33FF),
    "cjk_ext_a": SPEC_CJK_RANGES[3],
    "block_4d": (0x4D00, 0x4DFF),
    "cjk_unified": SPEC_CJK_RANGES[4],
    "yi": (0xA000, 0xABFF),
    "hangul": SPEC_CJK_RANGES[5],
    "block_d7": (0xD700, 0xD7FF),
    "high_surrogates": (0xD800, 0xDBFF),
    "low_surrogates": (0xDC00, 0xDFFF),
    "private_use": (0xE000, 0xF8FF),
    "cjk_compat": SPEC_CJK_RANGES[6],
    "fullwidth": (0xFF00, 0xFFEF),
    "bmp_any": (0x0000, 0xFFFF),
    "emoji": (0x1F300, 0x1FAFF),
    "astral_any": (0x10000, 0x10FFFF),
    "cjk_ext_b": SPEC_CJK_RANGES[7],
    "cjk_ext_b_edge": (0x2A600, 0x2A7FF),
    "cjk_compat_supp": SPEC_CJK_RANGES[8],
    "cjk_compat_supp_edge": (0x2F700, 0x2FBFF),
    "spaces": UNICODE_SPACES,
    "boundaries": "".join(BOUNDARIES),
}


def _draw(rng: random.Random, pool: tuple[int, int] | str) -> str:
    if isinstance(pool, str):
        return rng.choice(pool)
    return chr(rng.randint(*pool))


def random_text(rng: random.Random, max_length: int = 120) -> str:
    """A string mixing a few pools, usually dominated by the first one."""
    names = rng.sample(sorted(POOLS), rng.randint(1, 4))
    if rng.random() < 0.5:
        names.insert(0, "ascii")  # most real text is mostly ASCII
    weights = [8] + [1] * (len(names) - 1)
    length = rng.choice((0, 1, 2, 3, rng.randint(0, 16), rng.randint(0, max_length)))
    chosen = rng.choices(names, weights, k=length)
    return "".join(_draw(rng, POOLS[name]) for name in chosen)


RANDOM_CASES = 6000


def test_every_pool_boundary_and_space_alone_matches_reference() -> None:
    for char in [*BOUNDARIES, *UNICODE_SPACES]:
        assert text_quarters(char) == 4 * reference_weight(char), hex(ord(char))


def test_every_bmp_character_matches_reference() -> None:
    # One string holding the whole BMP (surrogates included) and the listed astral ranges.
    bmp = "".join(map(chr, range(0x10000)))
    assert text_quarters(bmp) == 4 * reference_text(bmp)
    astral = "".join(chr(c) for lo, hi in SPEC_CJK_RANGES[7:] for c in range(lo - 64, hi + 65))
    assert text_quarters(astral) == 4 * reference_text(astral)


def test_each_character_in_isolation_matches_reference_in_the_listed_blocks() -> None:
    blocks = [(0x00, 0x2FF), (0x1600, 0x16FF), (0x2000, 0x20FF), (0x3000, 0x30FF)]
    blocks += [(0x4D00, 0x4DFF), (0xD700, 0xE000), (0xF800, 0xFBFF), (0xFF00, 0xFFFF)]
    for lo, hi in blocks:
        for code in range(lo, hi + 1):
            char = chr(code)
            assert text_quarters(char) == 4 * reference_weight(char), hex(code)
            assert text_quarters("a" + char + "\u4e00") == 4 * reference_text("a" + char + "\u4e00")


@pytest.mark.parametrize("seed", range(3))
def test_random_strings_match_reference(seed: int) -> None:
    rng = random.Random(1105 + seed)
    for _ in range(RANDOM_CASES // 3):
        text = random_text(rng)
        expected = reference_text(text)
        assert text_quarters(text) == 4 * expected, ascii(text)
        messages = [{"role": "user", "content": text}]
        assert estimate_tokens(messages) == math.ceil(expected), ascii(text)


def test_lone_surrogates_that_would_pair_into_cjk_stay_other() -> None:
    # U+20000 is \ud840\udc00 in UTF-16; as two lone code points each weighs 0.5.
    fakes = ["\ud840\udc00", "\ud869\udedf", "\ud87e\udc00", "a\ud840\udc00b" * 50]
    for text in [*fakes, *(fake + "\U0001f600" for fake in fakes), "\ud840\udc00\U00020000"]:
        assert text_quarters(text) == 4 * reference_text(text)
    assert text_quarters("\ud840\udc00") == 4
    assert text_quarters("\U00020000") == 6


def test_long_strings_match_reference_across_internal_chunks() -> None:
    rng = random.Random(42)
    for length in (4095, 4096, 4097, 16384, 32769, 65536, 65537, 140_001):
        for names in (("ascii",), ("ascii", "cjk_unified"), ("general_punct", "ascii", "emoji")):
            text = "".join(_draw(rng, POOLS[rng.choice(names)]) for _ in range(length))
            assert text_quarters(text) == 4 * reference_text(text), (length, names)


def test_long_strings_with_one_odd_character_at_the_chunk_edges() -> None:
    base = "x" * 200_000
    base_weight = reference_text(base)
    for odd in ("\u4e00", "\u2003", "\U00020000", "\ud840", "\xa0", "é", "!"):
        for position in (0, 1, 4095, 4096, 8191, 8192, 65535, 65536, 131071, 131072, 199_999):
            text = base[:position] + odd + base[position + 1 :]
            expected = base_weight - reference_weight("x") + reference_weight(odd)
            assert text_quarters(text) == 4 * expected, (ascii(odd), position)


def test_english_typography_matches_reference() -> None:
    text = "“Quoted” — it’s fine… • 5 × 3 → 15 € ‰ ‘x’ – ok\u2009\u202f\u00a0end"
    assert text_quarters(text) == 4 * reference_text(text)
    assert text_quarters(text * 1000) == 4000 * reference_text(text)


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(10 if depth < 4 else 3)
    if kind == 0:
        return None
    if kind in (1, 2):
        return random_text(rng, 40)
    if kind == 3:
        return rng.choice([0, -7, 3.25, True, False, 10**20])
    if kind == 4:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == 5:
        block: dict[str, Any] = {"type": "tool_use", "id": "toolu_1"}
        if rng.random() < 0.8:
            block["name"] = rng.choice(["bash", "读取文件", None, 3, random_text(rng, 10)])
        if rng.random() < 0.8:
            block["input"] = rng.choice(
                [
                    {"command": random_text(rng, 30), "n": rng.randint(0, 9)},
                    random_text(rng, 30),
                    None,
                    [1, "二", {"x": None}],
                ]
            )
        return block
    if kind == 6:
        return {"type": "text", "text": random_text(rng, 60)}
    if kind == 7:
        return {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": _random_value(rng, depth + 1),
        }
    if kind == 8:
        if rng.random() < 0.5:
            return {"type": "thinking", "thinking": random_text(rng, 60), "signature": "sig"}
        return {"type": "image", "source": {"data": "abc"}}
    return {"key": random_text(rng, 10), "value": [1, 2.5, None]}


def test_random_message_lists_match_reference() -> None:
    rng = random.Random(7)
    for _ in range(1500):
        messages = [
            {"role": rng.choice(["user", "assistant", "system"]), "content": _random_value(rng)}
            for _ in range(rng.randint(0, 6))
        ]
        assert estimate_tokens(messages) == reference_estimate(messages), messages


def test_value_quarters_is_the_unrounded_sum() -> None:
    content = [{"type": "text", "text": "你好"}, "abc", None, 12]
    assert value_quarters(content) == 4 * reference_value(content) == 17
    assert value_quarters("abc") == 3
    assert value_quarters(None) == 0
    odd_block = {"type": "text", "text": [12, {"type": "text", "text": "中"}], "content": 3.5}
    assert value_quarters(odd_block) == 4 * reference_value(odd_block) == 2 + 6 + 4
    assert quarters_to_tokens(17) == 5
    assert quarters_to_tokens(0) == 0


def test_spec_example() -> None:
    assert estimate_tokens([{"role": "user", "content": "你好abc123"}]) == 5


def test_cjk_ranges_are_the_spec_ranges() -> None:
    assert tuple(CJK_RANGES) == SPEC_CJK_RANGES


def test_deep_nesting_is_refused_and_moderate_nesting_is_counted() -> None:
    content: Any = "abcd"
    for _ in range(MAX_DEPTH):
        content = [content]
    assert estimate_tokens([{"role": "user", "content": content}]) == 1
    too_deep: Any = "abcd"
    for _ in range(MAX_DEPTH + 2):
        too_deep = [too_deep]
    with pytest.raises(ValueError, match="nested more than"):
        estimate_tokens([{"role": "user", "content": too_deep}])
    blocks: Any = "abcd"
    for _ in range(MAX_DEPTH + 2):
        blocks = {"type": "tool_result", "content": blocks}
    with pytest.raises(ValueError, match="nested more than"):
        estimate_tokens([{"role": "user", "content": blocks}])


def test_cyclic_data_is_a_value_error() -> None:
    data: dict[str, Any] = {}
    data["self"] = data
    with pytest.raises(ValueError):
        estimate_tokens([{"role": "user", "content": [{"type": "tool_use", "input": data}]}])


def test_type_errors_name_what_came() -> None:
    with pytest.raises(TypeError, match="messages must be a list of dicts, got tuple"):
        estimate_tokens(())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"messages\[1\] must be a dict, got str"):
        estimate_tokens([{"role": "user", "content": "x"}, "oops"])  # type: ignore[list-item]


def test_many_small_strings_are_weighed_as_one_by_one() -> None:
    rng = random.Random(11)
    blocks: list[Any] = []
    for _ in range(6000):  # enough for several batches of each kind
        text = random_text(rng, 120) if rng.random() < 0.5 else "word " * rng.randrange(40)
        blocks.append({"type": "text", "text": text} if rng.random() < 0.5 else text)
    messages = [{"role": "user", "content": blocks}, {"role": "user", "content": "x" * 5000}]
    assert estimate_tokens(messages) == reference_estimate(messages)
    expected = sum(text_quarters(b if isinstance(b, str) else b["text"]) for b in blocks)
    assert value_quarters(blocks) == expected


def test_lone_surrogates_in_neighbouring_strings_do_not_pair() -> None:
    halves = [{"type": "text", "text": "\ud840"}, {"type": "text", "text": "\udc00"}]
    messages = [{"role": "user", "content": halves}, {"role": "user", "content": "\udc00"}]
    assert estimate_tokens(messages) == reference_estimate(messages) == 2  # 1.5 rounded up
    assert value_quarters(["\ud840", "\udc00"]) == 4


class _Opaque:
    def __str__(self) -> str:
        return "opaque “object” 对象"


def test_values_weighed_as_json_text_match_one_by_one_encoding() -> None:
    values: list[Any] = [
        0,
        -1.5,
        1e300,
        float("nan"),
        True,
        {"command": "ls -la\n\t“x”", "n": [1, None, {"深": "层"}]},
        [],
        {},
        {"k": b"bytes", "s": {1}},
        _Opaque(),
        "plain",
        {"键": "值", "tab": "\t", "quote": '"'},
    ]
    for value in values:
        block = {"type": "tool_use", "name": "t", "input": value}
        expected = 0.25 + reference_text(value if isinstance(value, str) else to_json(value))
        assert value_quarters(block) == 4 * expected, value
    blocks = [{"type": "tool_use", "name": "t", "input": v} for v in values]
    expected_all = sum(value_quarters(block) for block in blocks)
    assert value_quarters(blocks) == expected_all
    assert value_quarters([*values, *values]) == 2 * sum(value_quarters([v]) for v in values)


def test_the_first_error_in_reading_order_is_raised() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "tool_use", "name": "t", "input": cycle}]},
        "not a message",
    ]
    with pytest.raises(ValueError, match="cannot be encoded as JSON"):
        estimate_tokens(messages)
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    messages[1] = {"role": "user", "content": deep}
    with pytest.raises(ValueError, match="cannot be encoded as JSON"):
        estimate_tokens(messages)
    messages[0] = {"role": "user", "content": [{"type": "tool_use", "name": "t", "input": 1}]}
    with pytest.raises(ValueError, match="nested more than"):
        estimate_tokens(messages)
    messages[1] = "not a message"
    with pytest.raises(TypeError, match=r"messages\[1\] must be a dict, got str"):
        estimate_tokens(messages)
    # Dict keys JSON cannot encode are written as their str, not an error.
    bad_key = {(1, 2): "tuple keys are not JSON"}
    as_text = '{"(1, 2)": "tuple keys are not JSON"}'
    estimate = estimate_tokens(
        [{"role": "user", "content": [{"type": "tool_use", "input": bad_key}]}]
    )
    assert estimate == estimate_tokens([{"role": "user", "content": as_text}])


def test_every_whitespace_character_is_in_the_reference_set() -> None:
    # Guards the fast path's whitespace tables against a change in Unicode data.
    spaces = [c for c in map(chr, range(0x110000)) if c.isspace()]
    assert "".join(spaces) == UNICODE_SPACES
    assert {c for c in spaces if ord(c) > 0xFF} - {"\u3000"} == set(text_weight._WIDE_SPACE)


def test_nesting_exactly_at_the_limit_is_counted() -> None:
    content: Any = "abcd"
    for _ in range(MAX_DEPTH + 1):
        content = [content]
    assert estimate_tokens([{"role": "user", "content": content}]) == 1
    assert value_quarters(content) == 4
    with pytest.raises(ValueError, match="nested more than"):
        value_quarters(content, 1)


SPOTTED = (
    "\u1680\u167f\u1681"  # the one whitespace of U+16xx, and neighbours
    "\u2000\u2009\u200a\u200b\u2014\u2019\u201c\u2026\u2028\u202f\u205f\u2060"  # U+20xx
    "\u4d00\u4dbf\u4dc0\u4dff"  # U+4Dxx: CJK up to U+4DBF
    "\ud700\ud7af\ud7b0\ud7ff"  # U+D7xx: CJK up to U+D7AF
    "\U00020000\U0002a6df\U0002a6e0\U0002f800\U0002fa1f\U0002fa20\U0001f600"  # astral
    "\ud840\udc00\ud87e\udfff"  # lone surrogates
)


@pytest.mark.parametrize("base", ["ascii", "cjk_unified", "hangul", "latin1"])
@pytest.mark.parametrize("every", [1, 3, 40, 200, 5000])
def test_spotted_characters_sparse_or_dense_on_any_background(base: str, every: int) -> None:
    # The partly CJK and whitespace blocks, astral CJK and surrogates are counted
    # one by one when rare and in bulk when common, on mostly narrow text (which is
    # classified by its wide characters alone) and on mostly wide text.
    rng = random.Random(every)
    for length in (1, 50, 3000, 40_000):
        chars = [_draw(rng, POOLS[base]) for _ in range(length)]
        for position in range(rng.randrange(every), length, every):
            chars[position] = rng.choice(SPOTTED)
        text = "".join(chars)
        assert text_quarters(text) == 4 * reference_text(text), (base, every, length)
