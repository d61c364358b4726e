"""Property tests over seeded random histories, valid and malformed.

Invariants checked after every call: no exception but the documented ones;
every system message and the pending message survive; micro-compaction never
alters user or assistant text and is idempotent; a snapshot equals the list as
it was before summarising; with keep_tool_pairs=True a well-formed history
stays free of orphans; a failed summary leaves history as micro-compaction left it.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from bareagent_compact import (
    Action,
    Compactor,
    _micro_compact,
    _serialize,
    estimate_tokens,
    find_orphans,
    repair_tool_pairs,
)
from conftest import MemoryTranscripts, RecordingProvider

CASES = 3000

ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz0123456789     \n\t.,;:!?-_/()[]{}\"'",
    "配置文件读取错误修复测试完成目标约束路径上下文。，！？",
    "こんにちはカタカナ한국어텍스트",
    "😀🚀🎉✨👍🏽",
    "\U00020000\U00020001\U0002a6df\U0002f800\U0002fa1f",
    "éàüßñ\xa0\x85\u2003\u3000\u2028",
]


def text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return ""
    size = rng.randint(20_000, 40_000) if roll > 0.98 else rng.randint(1, 300)
    alphabet = "".join(rng.sample(ALPHABETS, rng.randint(1, 3)))
    return "".join(rng.choice(alphabet) for _ in range(min(size, 2000))) * (size // 2000 + 1)


def odd_value(rng: random.Random) -> Any:
    return rng.choice([None, 42, 3.5, True, {"data": [1, "二"]}, b"bytes", ["nested", ["list"]]])


class Case:
    """One random history, its expected shape and whether it is well formed."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.messages: list[Any] = []
        self.orphan_free = True
        self.malformed = False
        self.counter = 0
        self.build()

    def new_id(self) -> str:
        self.counter += 1
        return f"toolu_{self.counter:03d}"

    def build(self) -> None:
        rng = self.rng
        if rng.random() < 0.9:
            self.messages.append({"role": "system", "content": text(rng) or "system"})
        for _ in range(rng.randint(0, 12)):
            kind = rng.random()
            if kind < 0.1:
                self.messages.append({"role": "system", "content": text(rng)})
            elif kind < 0.35:
                self.messages.append({"role": "user", "content": text(rng)})
            elif kind < 0.5:
                self.messages.append(
                    {"role": "assistant", "content": [{"type": "text", "text": text(rng)}]}
                )
            else:
                self.tool_round(last=False)
        ending = rng.random()
        if ending < 0.35:
            self.messages.append({"role": "user", "content": text(rng)})
        elif ending < 0.75:
            self.tool_round(last=True)
        if rng.random() < 0.2:  # reminders an agent appends after the latest message
            for _ in range(rng.randint(1, 2)):
                role = rng.choice(["system", "developer"])
                self.messages.append({"role": role, "content": text(rng) or "reminder"})
        if rng.random() < 0.15:
            self.add_odd_content()
        if rng.random() < 0.1:
            self.break_structure()

    def tool_round(self, last: bool) -> None:
        rng = self.rng
        ids = [self.new_id() for _ in range(rng.randint(1, 3))]
        uses: list[dict[str, Any]] = [
            {
                "type": "tool_use",
                "id": i,
                "name": rng.choice(["bash", "read_file", "grep"]),
                "input": {"arg": text(rng)[:50]},
            }
            for i in ids
        ]
        if rng.random() < 0.5:
            uses.insert(0, {"type": "text", "text": text(rng)})
        self.messages.append({"role": "assistant", "content": uses})
        results: list[dict[str, Any]] = []
        for i in ids:
            content: Any = text(rng)
            if rng.random() < 0.2:
                content = [{"type": "text", "text": text(rng)}, {"type": "text", "text": text(rng)}]
            results.append({"type": "tool_result", "tool_use_id": i, "content": content})
        if rng.random() < 0.05:
            results.append({"type": "tool_result", "tool_use_id": "toolu_missing", "content": "x"})
            self.orphan_free = False
        if rng.random() < 0.05 and len(results) > 1:
            results.pop()  # a call without a result
            self.orphan_free = False
        self.messages.append({"role": "user", "content": results})

    def add_odd_content(self) -> None:
        if not self.messages:
            return
        index = self.rng.randrange(len(self.messages))
        if self.messages[index]["role"] != "system":
            self.messages[index] = {
                "role": self.messages[index]["role"],
                "content": odd_value(self.rng),
            }
            self.orphan_free = False

    def break_structure(self) -> None:
        index = self.rng.randint(0, len(self.messages))
        self.messages.insert(
            index, self.rng.choice(["text", 7, None, {"content": "no role"}, {"role": 1}])
        )
        self.malformed = True


def config(
    rng: random.Random,
) -> tuple[dict[str, Any], RecordingProvider, MemoryTranscripts | None]:
    answer = rng.choice(["summary 摘要", "summary 摘要", RuntimeError("down"), None, "  ", 5])
    provider = RecordingProvider(answer)
    transcripts = None
    if rng.random() < 0.7:
        transcripts = MemoryTranscripts(error=OSError("disk") if rng.random() < 0.1 else None)
    options = {
        "threshold": rng.choice([0, 50, 500, 50_000]),
        "keep_recent": rng.randint(0, 4),
        "keep_tool_pairs": rng.random() < 0.5,
        "session_id": rng.choice(["a", "会话-1"]),
        # The invariants below are micro-compaction's and the rebuild's; texts over
        # max_message_tokens are cut by another step (tests/test_oversize.py).
        "max_message_tokens": None,
    }
    return options, provider, transcripts


SYSTEM_ROLES = ("system", "developer")


def _trailing_systems(messages: list[Any]) -> int:
    """How many system (or developer) messages end ``messages``."""
    count = 0
    for message in reversed(messages):
        if message["role"] not in SYSTEM_ROLES:
            break
        count += 1
    return count


def text_blocks(message: Any) -> list[Any]:
    """Everything of a message that micro-compaction must never change."""
    if not isinstance(message, dict):
        return [message]
    content = message.get("content")
    if not isinstance(content, list):
        return [message.get("role"), content]
    return [message.get("role")] + [
        b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")
    ]


def json_safe(value: Any) -> bool:
    try:
        return json.loads(json.dumps(value, ensure_ascii=False)) == value
    except (TypeError, ValueError):
        return False


@pytest.mark.parametrize("block", range(10))
def test_random_histories_keep_every_invariant(block: int) -> None:
    stats = {"full": 0, "failed": 0, "malformed": 0}
    for case_number in range(block * CASES // 10, (block + 1) * CASES // 10):
        rng = random.Random(case_number)
        case = Case(rng)
        messages = case.messages
        options, provider, transcripts = config(rng)
        compactor = Compactor(provider, transcripts, **options)
        force = rng.random() < 0.5
        before = copy.deepcopy(messages)
        originals = list(messages)

        if case.malformed:
            with pytest.raises(TypeError):
                compactor(messages, force=force)
            assert messages == before, case_number
            stats["malformed"] += 1
            continue

        expected_micro = copy.deepcopy(messages)
        _micro_compact(expected_micro, options["keep_recent"])
        result = compactor(messages, force=force)

        # System messages survive, in order, and the pending message stays the last
        # message but for the system messages that followed it.
        systems = [m for m in before if m["role"] in SYSTEM_ROLES]
        assert [m for m in messages if m["role"] in SYSTEM_ROLES] == systems, case_number
        trailing = _trailing_systems(originals)
        pending = len(originals) > trailing and originals[-1 - trailing]["role"] == "user"
        if pending:
            assert messages[-1 - trailing] is originals[-1 - trailing], case_number
            kept, before_kept = messages[-1 - trailing :], originals[-1 - trailing :]
            assert all(a is b for a, b in zip(kept, before_kept, strict=True)), case_number

        # Micro-compaction is idempotent and never alters text.
        after_micro = copy.deepcopy(messages)
        assert _micro_compact(messages, options["keep_recent"]) == 0, case_number
        assert messages == after_micro, case_number

        if result.action is Action.FULL:
            stats["full"] += 1
            head_systems = len(systems) - (trailing if pending else 0)
            assert messages[head_systems]["content"].startswith("[Context Compressed]\n")
            if transcripts is not None and result.snapshot_saved:
                assert transcripts.saved[-1] == (expected_micro, options["session_id"])
            if options["keep_tool_pairs"] and case.orphan_free:
                assert find_orphans(messages) == [], case_number
        else:
            assert messages == expected_micro, case_number
            for old, new in zip(before, messages, strict=True):
                assert text_blocks(old) == text_blocks(new), case_number
            if result.action is Action.FAILED:
                stats["failed"] += 1
            if transcripts is not None and result.snapshot_saved:
                assert transcripts.saved[-1] == (expected_micro, options["session_id"])
        assert result.tokens_before == estimate_tokens(expected_micro)
        assert isinstance(_serialize(messages), str)
    assert stats["full"] > 0 and stats["failed"] > 0 and stats["malformed"] > 0, stats


def _strings(value: Any) -> list[str]:
    """Every non-empty text and content string inside ``value`` (not ids, types or
    tool inputs, which a repair renders as JSON), for a "nothing was dropped" check."""
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, dict):
        return [s for key in ("text", "content") for s in _strings(value.get(key))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@pytest.mark.parametrize("block", range(5))
def test_aliased_messages_and_appends_during_the_summary_keep_every_invariant(
    block: int,
) -> None:
    stats = {"full": 0, "appended": 0, "aliased": 0}
    for case_number in range(block * 300, (block + 1) * 300):
        rng = random.Random(f"alias-{case_number}")
        case = Case(rng)
        if case.malformed:
            continue
        messages = case.messages
        if messages and rng.random() < 0.6:
            # One message dict listed twice: a caller that appended the same object again.
            original = rng.choice(messages)
            messages.insert(rng.randint(messages.index(original) + 1, len(messages)), original)
            stats["aliased"] += 1
        arrivals = [
            {"role": "user", "content": f"arrived {n}"} for n in range(rng.choice([0, 0, 1, 2]))
        ]

        def provider(
            prompt: list[dict[str, Any]],
            arrivals: list[Any] = arrivals,
            messages: list[Any] = messages,
        ) -> str:
            messages.extend(arrivals)  # appended while the summary is being made
            return "summary 摘要"

        systems = [copy.deepcopy(m) for m in messages if m["role"] in SYSTEM_ROLES]
        compactor = Compactor(
            provider, threshold=rng.choice([0, 500]), keep_recent=rng.randint(0, 3)
        )
        result = compactor(messages, force=rng.random() < 0.5)
        assert [m for m in messages if m["role"] in SYSTEM_ROLES][: len(systems)] == systems
        if arrivals and result.summary_calls:
            assert messages[-len(arrivals):] == arrivals, case_number
            assert all(a is b for a, b in zip(messages[-len(arrivals):], arrivals, strict=True))
            stats["appended"] += 1
        stats["full"] += result.action is Action.FULL
        after_micro = copy.deepcopy(messages)
        assert _micro_compact(messages, compactor.keep_recent) == 0, case_number
        assert messages == after_micro, case_number

        # Repair with aliases: orphans gone, no text lost.
        repaired = copy.copy(case.messages)
        before = sorted(_strings(copy.deepcopy(repaired)))
        repair_tool_pairs(repaired)
        assert find_orphans(repaired) == [], case_number
        text_after = "\n".join(_strings(repaired))
        assert all(s in text_after for s in before), case_number
    assert stats["full"] > 0 and stats["appended"] > 0 and stats["aliased"] > 0, stats
