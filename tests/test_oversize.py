"""One oversize message (a tool result or a user text) is cut to its head and tail."""

from __future__ import annotations

import asyncio
import copy
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import (
    RECALL_TOOL_NAME,
    AsyncCompactor,
    Compactor,
    estimate_tokens,
)
from bareagent_compact.oversize import DEFAULT_MAX_MESSAGE_TOKENS as DEFAULT
from bareagent_compact.oversize import LEAST_MAX_MESSAGE_TOKENS as LEAST
from bareagent_compact.oversize import cut_marker, cut_text, text_slots
from bareagent_compact.recall import make_handle
from bareagent_compact.result import Action
from bareagent_compact.tokens import quarters_to_tokens, text_quarters
from conftest import (
    READABLE_STORES,
    MemoryTranscripts,
    RecordingProvider,
    WriteOnlyArchive,
    recalled_in_new_process,
    tool_round,
)
from test_properties import CASES, Case

MARKER = re.compile(r"\[\.\.\. ([\d,]+) chars cut \.\.\.\]")

THRESHOLD = 8000


def observation(chars: int) -> str:
    """A long shell observation: numbered lines of code-like text, with a distinct
    first and last line."""
    lines = ["$ cat big.log"]
    lines += (f"{i:6d}\tvalue = compute(item_{i}, depth={i % 7})  # ok" for i in range(chars // 48))
    lines.append("EXIT CODE: 1 (the last line)")
    return "\n".join(lines)


def swe_agent_history(huge: str, *, pending: bool = True) -> list[dict[str, Any]]:
    """A text-action agent: observations come back as user messages."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a software engineer. Reply with one command."},
        {"role": "user", "content": "Fix the failing test in tests/test_parser.py."},
    ]
    for i in range(6):
        messages.append({"role": "assistant", "content": f"Let me look.\n```\nls src/{i}\n```"})
        messages.append({"role": "user", "content": f"OBSERVATION:\nfile_{i}.py\nREADME.md"})
    messages.append({"role": "assistant", "content": "```\ncat big.log\n```"})
    messages.append({"role": "user", "content": huge})
    if not pending:
        messages.append({"role": "assistant", "content": "The log is long; let me grep it."})
        messages.append({"role": "user", "content": "OBSERVATION:\n(no output)"})
    return messages


def test_an_868_kb_observation_leaves_the_history_near_the_threshold(
    capsys: pytest.CaptureFixture[str],
) -> None:
    huge = observation(868_000)
    assert len(huge) >= 868_000
    records: list[dict[str, Any]] = []

    def run(**options: Any) -> tuple[list[dict[str, Any]], float]:
        messages = swe_agent_history(huge)
        compactor = Compactor(RecordingProvider("短摘要"), threshold=THRESHOLD, **options)
        compactor(messages)
        return messages, estimate_tokens(messages) / THRESHOLD

    uncut, before = run(max_message_tokens=None)
    messages, after = run(archive=records.append)
    with capsys.disabled():
        print(
            f"\n868 KB observation, threshold {THRESHOLD}: history / threshold "
            f"{before:.1f}x without max_message_tokens, {after:.2f}x with the default"
        )
    assert uncut[-1]["content"] == huge
    assert before > 20
    assert after <= 1.0
    text = messages[-1]["content"]
    assert text.startswith(huge[:300])
    assert text.endswith(huge[-300:])
    found = MARKER.search(text)
    assert found is not None
    assert int(found.group(1).replace(",", "")) == len(huge) - len(text) + len(found.group(0)) + 2
    assert [r["content"] for r in records if r.get("kind") == "oversize"] == [huge]
    record = next(r for r in records if r.get("kind") == "oversize")
    assert record["session_id"] == "default"
    assert record["tool_use_id"] is None


def test_an_old_oversize_observation_is_cut_and_the_cut_is_stable() -> None:
    huge = observation(200_000)
    messages = swe_agent_history(huge, pending=False)
    records: list[dict[str, Any]] = []
    compactor = Compactor(RecordingProvider(), threshold=50_000, archive=records.append)
    first = compactor(messages)
    assert first.action is Action.MICRO
    assert first.truncated == 1
    assert first.tokens_before_micro > 50_000 >= first.tokens_before
    assert first.prefix_changed
    cut = messages[-3]["content"]
    assert MARKER.search(cut) and cut.startswith(huge[:100]) and cut.endswith(huge[-100:])
    assert estimate_tokens([{"role": "user", "content": cut}]) <= compactor.max_message_tokens
    second = compactor(messages)
    assert second.action is Action.NONE
    assert messages[-3]["content"] is cut
    assert len(records) == 1


def anthropic_result(content: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "go"}, *tool_round("toolu_1", "bash", content)]


def chat_result(content: Any) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": content},
    ]


def responses_result(content: Any, kind: str = "function_call_output") -> list[dict[str, Any]]:
    call_type = "custom_tool_call" if kind == "custom_tool_call_output" else "function_call"
    return [
        {"role": "user", "content": "go"},
        {"type": call_type, "call_id": "fc_1", "name": "bash", "arguments": "{}", "input": ""},
        {"type": kind, "call_id": "fc_1", "output": content},
    ]


def _result_text(message: dict[str, Any]) -> Any:
    if "output" in message:
        return message["output"]
    content = message["content"]
    return content[0]["content"] if isinstance(content, list) else content


@pytest.mark.parametrize(
    ("build", "call_id"),
    [
        (anthropic_result, "toolu_1"),
        (chat_result, "call_1"),
        (responses_result, "fc_1"),
        (lambda c: responses_result(c, "custom_tool_call_output"), "fc_1"),
    ],
    ids=["anthropic", "chat", "responses", "responses-custom"],
)
def test_a_huge_tool_result_is_cut_in_each_dialect(build: Any, call_id: str) -> None:
    huge = observation(120_000)
    messages = build(huge)
    records: list[dict[str, Any]] = []
    compactor = Compactor(RecordingProvider(), threshold=THRESHOLD, archive=records.append)
    compactor(messages)
    text = _result_text(messages[-1])
    assert MARKER.search(text)
    assert text.startswith(huge[:200]) and text.endswith(huge[-200:])
    assert estimate_tokens([{"role": "user", "content": text}]) <= 4000
    assert records == [
        {
            "tool_use_id": call_id,
            "tool_name": "bash",
            "content": huge,
            "kind": "oversize",
            "session_id": "default",
        }
    ]


def test_text_blocks_are_cut_and_images_left_whole() -> None:
    huge = observation(100_000)
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "A" * 300_000},
    }
    result = [{"type": "text", "text": huge}, image]
    messages = anthropic_result(result)
    messages.append({"role": "user", "content": [{"type": "text", "text": huge}, dict(image)]})
    # Two cut texts and two images weigh more than THRESHOLD: a higher threshold keeps
    # this call to the cut alone (no full compaction), at the same message limit.
    Compactor(RecordingProvider(), threshold=4 * THRESHOLD, max_message_tokens=THRESHOLD // 2)(
        messages
    )
    for blocks in (messages[-2]["content"][0]["content"], messages[-1]["content"]):
        assert MARKER.search(blocks[0]["text"])
        assert blocks[1] == image


def test_user_texts_in_chat_parts_and_responses_items_are_cut() -> None:
    huge = observation(100_000)
    messages = [
        {"role": "user", "content": [{"type": "text", "text": huge}]},
        {"role": "assistant", "content": "ok"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": huge}]},
    ]
    Compactor(RecordingProvider(), threshold=THRESHOLD)(messages)
    assert MARKER.search(messages[0]["content"][0]["text"])
    assert MARKER.search(messages[2]["content"][0]["text"])


def test_the_pending_user_request_is_cut_keeping_head_and_tail() -> None:
    huge = "请修复这个错误。" + observation(100_000) + "\n最后：请只改 parser.py。"
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": huge}]
    Compactor(RecordingProvider(), threshold=THRESHOLD)(messages)
    text = messages[-1]["content"]
    assert text.startswith("请修复这个错误。") and text.endswith("最后：请只改 parser.py。")
    assert MARKER.search(text)


def test_assistant_and_system_messages_are_never_cut() -> None:
    huge = observation(100_000)
    messages = [
        {"role": "system", "content": huge},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": huge},
        {"role": "user", "content": "thanks"},
    ]
    before = copy.deepcopy(messages)
    Compactor(RecordingProvider(), threshold=1_000_000, max_message_tokens=1000)(messages)
    assert messages == before


def test_a_refused_archive_leaves_the_message_whole_and_is_retried() -> None:
    huge = observation(100_000)
    messages = swe_agent_history(huge, pending=False)
    calls: list[dict[str, Any]] = []

    def refuse(record: dict[str, Any]) -> None:
        calls.append(record)
        raise OSError("disk full")

    compactor = Compactor(RecordingProvider(), threshold=50_000, archive=refuse)
    result = compactor(messages)
    assert messages[-3]["content"] == huge
    assert result.action is Action.NONE and result.truncated == 0
    assert [r["content"] for r in calls] == [huge]
    compactor.archive = calls.append
    compactor(messages)
    assert MARKER.search(messages[-3]["content"])
    assert [r["content"] for r in calls] == [huge, huge]


def test_without_an_archive_a_snapshot_is_saved_before_the_cut() -> None:
    huge = observation(100_000)
    messages = swe_agent_history(huge, pending=False)
    transcripts = MemoryTranscripts()
    Compactor(RecordingProvider(), transcripts, threshold=50_000)(messages)
    assert MARKER.search(messages[-3]["content"])
    [(saved, session_id)] = transcripts.saved
    assert saved[-3]["content"] == huge and session_id == "default"


def test_a_failed_snapshot_leaves_the_message_whole_when_one_is_required() -> None:
    huge = observation(100_000)
    messages = swe_agent_history(huge, pending=False)
    failing = MemoryTranscripts(error=OSError("read-only"))
    Compactor(RecordingProvider(), failing, threshold=50_000)(messages)
    assert messages[-3]["content"] == huge
    Compactor(RecordingProvider(), failing, threshold=50_000, require_snapshot=False)(messages)
    assert MARKER.search(messages[-3]["content"])


def test_with_neither_archive_nor_transcripts_the_message_is_cut() -> None:
    huge = observation(100_000)
    messages = swe_agent_history(huge, pending=False)
    Compactor(RecordingProvider(), threshold=50_000)(messages)
    assert MARKER.search(messages[-3]["content"])


@pytest.mark.parametrize("threshold", [0, 3])
def test_tiny_thresholds_cut_no_ordinary_message(threshold: int) -> None:
    ordinary = "y" * 12_000  # 3,000 estimated tokens: a long but ordinary result
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "z" * 10_000}]
    for i in range(4):
        messages += tool_round(f"toolu_{i}", "bash", ordinary)
    records: list[dict[str, Any]] = []
    compactor = Compactor(RecordingProvider("S"), threshold=threshold, archive=records.append)
    assert compactor.max_message_tokens == 4000
    compactor(messages)
    assert not MARKER.search(repr(messages))
    assert not [r for r in records if r.get("kind") == "oversize"]
    assert messages[-1]["content"][0]["content"] == ordinary


def test_max_message_tokens_none_cuts_nothing() -> None:
    huge = observation(200_000)
    messages = swe_agent_history(huge, pending=False)
    records: list[dict[str, Any]] = []
    Compactor(
        RecordingProvider(), threshold=1_000_000, max_message_tokens=None, archive=records.append
    )(messages)
    assert messages[-3]["content"] == huge
    assert records == []


def test_max_message_tokens_follows_the_threshold_unless_given() -> None:
    compactor = Compactor(RecordingProvider(), threshold=THRESHOLD)
    assert compactor.max_message_tokens == 4000
    compactor.threshold = 20_000
    assert compactor.max_message_tokens == 10_000
    compactor.threshold = 100
    assert compactor.max_message_tokens == 4000
    assert Compactor(RecordingProvider()).max_message_tokens == 25_000
    chosen = Compactor(RecordingProvider(), threshold=THRESHOLD, max_message_tokens=5000)
    chosen.threshold = 100_000
    assert chosen.max_message_tokens == 5000
    off = Compactor(RecordingProvider(), max_message_tokens=None)
    off.threshold = 100
    assert off.max_message_tokens is None
    off.max_message_tokens = 700
    assert off.options.max_message_tokens == 700


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("4000", TypeError),
        (True, TypeError),
        (4000.0, TypeError),
        (-1, ValueError),
        (99, ValueError),
    ],
)
def test_max_message_tokens_is_validated(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="max_message_tokens"):
        Compactor(RecordingProvider(), max_message_tokens=value)  # type: ignore[arg-type]
    compactor = Compactor(RecordingProvider())
    with pytest.raises(error, match="max_message_tokens"):
        compactor.max_message_tokens = value  # type: ignore[assignment]
    assert compactor.max_message_tokens == 25_000


def test_an_interrupted_summary_puts_the_cut_message_back() -> None:
    huge = observation(868_000)
    messages = swe_agent_history(huge, pending=False)
    original = copy.deepcopy(messages)
    compactor = Compactor(RecordingProvider(KeyboardInterrupt()), threshold=3000)
    with pytest.raises(KeyboardInterrupt):
        compactor(messages)
    assert messages == original


def test_undoing_a_full_compaction_puts_the_cut_message_back() -> None:
    huge = observation(300_000)
    messages = swe_agent_history(huge, pending=False)
    original = copy.deepcopy(messages)
    compactor = Compactor(RecordingProvider("S"), threshold=3000)
    result = compactor(messages)
    assert result.action is Action.FULL
    assert compactor.undo(messages, result)
    assert messages == original


def test_the_async_compactor_cuts_archives_and_undoes_on_cancellation() -> None:
    huge = observation(868_000)
    records: list[dict[str, Any]] = []

    async def archive(record: dict[str, Any]) -> None:
        records.append(record)

    async def main() -> None:
        messages = swe_agent_history(huge)
        compactor = AsyncCompactor(
            RecordingProvider("短摘要"), threshold=THRESHOLD, archive=archive
        )
        await compactor(messages)
        assert estimate_tokens(messages) <= THRESHOLD
        assert MARKER.search(messages[-1]["content"])
        assert [r["content"] for r in records] == [huge]

        started = asyncio.Event()

        async def slow(prompt: Any) -> str:
            started.set()
            await asyncio.sleep(10)
            return "S"

        again = swe_agent_history(huge, pending=False)
        original = copy.deepcopy(again)
        slow_compactor = AsyncCompactor(slow, threshold=3000)
        task = asyncio.ensure_future(slow_compactor(again))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert again == original

    asyncio.run(main())


def test_random_histories_keep_no_text_over_the_limit_and_lose_nothing() -> None:
    cut_cases = 0
    for case_number in range(CASES // 3):
        rng = random.Random(case_number)
        case = Case(rng)
        if case.malformed:
            continue
        messages = case.messages
        before = copy.deepcopy(messages)
        records: list[dict[str, Any]] = []
        compactor = Compactor(
            RecordingProvider(RuntimeError("down")),
            threshold=rng.choice([0, 50, 500, 50_000]),
            keep_recent=rng.randint(0, 4),
            archive=records.append,
            max_message_tokens=rng.choice([None, 100, 1000, DEFAULT]),
        )
        result = compactor(messages, force=rng.random() < 0.5)
        assert result.action is not Action.FULL
        limit = compactor.max_message_tokens
        oversize = [r for r in records if r.get("kind") == "oversize"]
        cut_cases += bool(oversize)
        originals = [r["content"] for r in oversize]
        for old, new in zip(before, messages, strict=True):
            if new.get("role") in ("system", "assistant"):
                assert new == old, case_number
            for slot, _ in text_slots(new):
                text = slot.holder[slot.key]
                if limit is not None:
                    assert quarters_to_tokens(text_quarters(text)) <= limit, case_number
                found = MARKER.search(text)
                if found:
                    head, tail = text[: found.start() - 1], text[found.end() + 1 :]
                    assert any(o.startswith(head) and o.endswith(tail) for o in originals)
        compactor(messages)
        assert [r for r in records if r.get("kind") == "oversize"] == oversize, case_number
    assert cut_cases > 10, cut_cases


# -- recall: a cut text's handle --------------------------------------------------

HANDLED = re.compile(r"\[\.\.\. ([\d,]+) chars cut; recall (o-[0-9a-f]{12}) \.\.\.\]")


@pytest.fixture(params=sorted(READABLE_STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    mgr = READABLE_STORES[request.param](tmp_path)
    yield request.param, mgr
    mgr.close()


def odd_observation(chars: int, mark: str) -> str:
    """An observation with characters a store must keep byte for byte."""
    return f'{mark} ünïcödé 漢字 🚀\r\n\t"q" \\ \x00\n' + observation(chars) + f"\n{mark} end"


def cut_history(result: str, user_text: str) -> list[dict[str, Any]]:
    """A huge tool result, then a huge user text (a text-action observation)."""
    return [
        *anthropic_result(result),
        {"role": "assistant", "content": "Let me look at the log too."},
        {"role": "user", "content": user_text},
    ]


def compact_with(archive: Any, session_id: str, messages: list[dict[str, Any]]) -> Compactor:
    """A compactor whose call only cuts (the threshold leaves room for both cut texts)."""
    compactor = Compactor(
        RecordingProvider(),
        threshold=4 * THRESHOLD,
        max_message_tokens=THRESHOLD // 2,
        session_id=session_id,
        archive=archive,
    )
    assert compactor(messages).action is Action.MICRO
    return compactor


def read_pages(compactor: Compactor, handle: str) -> tuple[str, int]:
    """The original ``handle`` names, read through the tool one page at a time."""
    pieces, offset, answers = [], 0, 0
    while True:
        call = {
            "type": "tool_use",
            "id": f"toolu_r{answers}",
            "name": RECALL_TOOL_NAME,
            "input": {"handle": handle, "offset": offset},
        }
        answer = compactor.handle_recall(call, limit=50_000)
        assert "is_error" not in answer, answer["content"]
        answers += 1
        body, _, note = answer["content"].rpartition("\n\n")
        found = re.search(r"with offset (\d+) for more\]$", note)
        if not body or (found is None and not note.endswith("the end]")):
            return answer["content"], answers  # one page: the original alone
        pieces.append(body)
        if found is None:
            return "".join(pieces), answers
        offset = int(found.group(1))


def test_a_cut_text_carries_a_handle_and_is_recalled_byte_exact(
    store: tuple[str, Any], tmp_path: Path
) -> None:
    kind, mgr = store
    result, user_text = odd_observation(180_000, "RESULT"), odd_observation(120_000, "USER")
    messages = cut_history(result, user_text)
    compactor = compact_with(mgr.archive, "alpha", messages)
    expected = {}
    for text, original, key in (
        (messages[2]["content"][0]["content"], result, "toolu_1"),
        (messages[-1]["content"], user_text, None),
    ):
        found = HANDLED.search(text)
        assert found is not None, text[:300]
        handle = found.group(2)
        assert handle == make_handle("alpha", key, original, prefix="o")
        head, tail = text[: found.start() - 1], text[found.end() + 1 :]
        assert original.startswith(head) and original.endswith(tail) and len(head) > 1000
        assert int(found.group(1).replace(",", "")) == len(original) - len(head) - len(tail)
        assert quarters_to_tokens(text_quarters(text)) <= THRESHOLD // 2
        assert compactor.recall(handle) == original
        assert compactor.recall(handle, offset=7, limit=30) == original[7:37]
        recalled, pages = read_pages(compactor, handle)
        assert recalled == original and pages == -(-len(original) // 50_000)
        expected[handle] = original
    records = [r for r in mgr.load_archive("alpha") if r.get("kind") == "oversize"]
    assert {r["handle"]: r["content"] for r in records} == expected
    mgr.close()
    assert recalled_in_new_process(kind, tmp_path, list(expected)) == expected


def test_a_cut_texts_handle_is_refused_in_another_session(store: tuple[str, Any]) -> None:
    _, mgr = store
    huge = observation(120_000)
    messages = cut_history(huge, "short")
    alpha = compact_with(mgr.archive, "alpha", messages)
    found = HANDLED.search(messages[2]["content"][0]["content"])
    assert found is not None
    handle = found.group(2)
    assert alpha.recall(handle) == huge
    beta = Compactor(RecordingProvider(), session_id="beta", archive=mgr.archive)
    with pytest.raises(LookupError, match="another session"):
        beta.recall(handle)
    call = {"type": "tool_use", "id": "toolu_x", "name": RECALL_TOOL_NAME}
    call["input"] = {"handle": handle}
    answer = beta.handle_recall(call)
    assert answer["is_error"] is True and "another session" in answer["content"]
    assert huge[:100] not in answer["content"]


def test_the_async_compactor_cuts_with_a_handle_too(store: tuple[str, Any]) -> None:
    _, mgr = store
    huge = observation(120_000)
    messages = swe_agent_history(huge)
    compactor = AsyncCompactor(
        RecordingProvider(), threshold=4 * THRESHOLD, session_id="alpha", archive=mgr.archive
    )
    asyncio.run(compactor(messages))
    found = HANDLED.search(messages[-1]["content"])
    assert found is not None
    assert compactor.recall(found.group(2)) == huge



@pytest.mark.parametrize("kind", ["none", "list.append", "function", "bound method"])
def test_without_a_readable_archive_the_cut_marker_has_no_handle(kind: str) -> None:
    kept: list[dict[str, Any]] = []
    write_only = WriteOnlyArchive()

    def function(record: dict[str, Any]) -> None:
        kept.append(record)

    archive = {
        "none": None,
        "list.append": kept.append,
        "function": function,
        "bound method": write_only.archive,
    }[kind]
    huge = observation(120_000)
    messages = cut_history(huge, huge)
    compact_with(archive, "alpha", messages)
    for text in (messages[2]["content"][0]["content"], messages[-1]["content"]):
        found = MARKER.search(text)
        assert found is not None and "recall" not in text
        assert text[found.start() - 1 : found.end() + 1] == cut_marker(
            int(found.group(1).replace(",", ""))
        )
    records = kept + write_only.records
    assert all("handle" not in record for record in records)
    assert len(records) == (0 if kind == "none" else 2)


@pytest.mark.parametrize("limit", [LEAST, 1000, 4000])
def test_a_cut_with_a_handle_stays_within_the_limit(limit: int) -> None:
    for text in (observation(60_000), "漢字" * 30_000, "x" * 40_000):
        cut = cut_text(text, limit, "o-0123456789ab")
        assert cut is not None
        assert quarters_to_tokens(text_quarters(cut)) <= limit
        found = HANDLED.search(cut)
        assert found is not None and found.group(2) == "o-0123456789ab"
        assert cut_text(text, limit) == cut_text(text, limit, None)
        assert "recall" not in (cut_text(text, limit) or "recall")


def _shapes() -> dict[str, str]:
    """Texts over any limit below 25,000 tokens, each weighed differently along its length."""
    return {
        "code lines": "\n".join(f"{i:6d}\tvalue = compute(item_{i})" for i in range(40_000)),
        "log": "\n".join(f"{i:7d} worker timeout after 0.1234s req=beef" for i in range(16_000)),
        "CJK": "\n".join(f"这是第{i}行的日志内容，包含一些中文字符。" for i in range(20_000)),
        "mixed": "\n".join(f"line {i}: {'数据' * (i % 7)}{{'k': [1]}}; ok" for i in range(30_000)),
        "dense ends": "函数" * 20_000 + "abc def\n" * 40_000 + "函数" * 20_000,
        "light ends": "abc def\n" * 40_000 + "函数" * 80_000 + "abc def\n" * 40_000,
    }


@pytest.mark.parametrize("limit", [4000, 25_000])
@pytest.mark.parametrize("handle", [None, "o-0123456789ab"])
def test_a_cut_lands_near_its_limit_whatever_the_texts_shape(
    limit: int, handle: str | None
) -> None:
    for shape, text in _shapes().items():
        cut = cut_text(text, limit, handle)
        assert cut is not None
        kept = quarters_to_tokens(text_quarters(cut))
        assert 0.9 * limit <= kept <= limit, (shape, kept, limit)
        assert cut.startswith(text[:100]) and cut.endswith(text[-100:])


def test_random_cuts_never_exceed_their_limit() -> None:
    rng = random.Random(7)
    alphabet = ["a", "1", " ", "\n", "\t", "-", "{", "漢", "é", "🙂"]
    for _ in range(60):
        weights = [rng.random() for _ in alphabet]
        runs = ["".join(rng.choices(alphabet, weights, k=rng.randint(1, 3000))) for _ in range(8)]
        text = "".join(rng.choice(runs) for _ in range(rng.randint(5, 60)))
        limit = rng.randint(LEAST, 5000)
        cut = cut_text(text, limit, rng.choice([None, "o-0123456789ab"]))
        if cut is not None:
            assert quarters_to_tokens(text_quarters(cut)) <= limit


def _long_history(big: str) -> list[dict[str, Any]]:
    """A history whose third message is ``big``, followed by six short rounds."""
    messages = [
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": big},
    ]
    for turn in range(6):
        messages += [
            {"role": "assistant", "content": f"a{turn}"},
            {"role": "user", "content": f"u{turn}"},
        ]
    return messages


def _next_turn(messages: list[dict[str, Any]], turn: int) -> None:
    messages += [
        {"role": "assistant", "content": f"b{turn}"},
        {"role": "user", "content": f"v{turn}"},
    ]


def test_a_text_put_back_by_an_interrupted_call_is_cut_on_the_next() -> None:
    big = "line of output\n" * 3000
    answers: list[Any] = [KeyboardInterrupt(), "summary"]

    def provider(prompt: Any) -> str:
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return str(answer)

    compactor = Compactor(provider, threshold=100_000, max_message_tokens=1000)
    messages = _long_history(big)
    with pytest.raises(KeyboardInterrupt):
        compactor(messages, force=True)
    assert messages[2]["content"] == big  # put back whole
    _next_turn(messages, 0)
    compactor(messages)
    assert MARKER.search(messages[2]["content"])


def test_a_text_put_back_by_undo_is_cut_on_the_next_call() -> None:
    big = "line of output\n" * 3000
    compactor = Compactor(RecordingProvider("summary"), threshold=100_000, max_message_tokens=1000)
    messages = _long_history(big)
    result = compactor(messages, force=True)
    assert compactor.undo(messages, result) and messages[2]["content"] == big
    _next_turn(messages, 0)
    compactor(messages)
    assert MARKER.search(messages[2]["content"])


def test_a_message_grown_in_place_behind_the_newest_is_cut_on_the_next_call() -> None:
    compactor = Compactor(RecordingProvider(), threshold=100_000, max_message_tokens=1000)
    messages = _long_history("short")
    compactor(messages)
    messages[2]["content"] = "line of output\n" * 3000  # grown in place, behind the newest few
    compactor(messages)
    assert MARKER.search(messages[2]["content"])  # the history cache saw the edit


def test_an_option_change_reads_every_message_again() -> None:
    compactor = Compactor(RecordingProvider(), threshold=100_000, max_message_tokens=5000)
    messages = _long_history("short")
    messages[2]["content"] = "line of output\n" * 800  # under 5000 tokens, over 1000
    compactor(messages)
    assert not MARKER.search(messages[2]["content"])
    compactor.max_message_tokens = 1000
    compactor(messages)
    assert MARKER.search(messages[2]["content"])


def parallel_results_history(calls: int, chars: int) -> list[dict[str, Any]]:
    """A short dialogue, then one assistant turn of ``calls`` parallel tool calls
    whose results (each ``chars`` long) come back in one message: pending."""
    uses = [
        {"type": "tool_use", "id": f"p{i}", "name": "read_file", "input": {"path": f"f{i}"}}
        for i in range(calls)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"p{i}", "content": observation(chars)}
        for i in range(calls)
    ]
    return [
        {"role": "user", "content": "Read every file of the package."},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": results},
    ]


def test_parallel_results_are_weighed_together_so_the_request_fits() -> None:
    # Twelve results of ~3,000 tokens each: each under max_message_tokens (4,000),
    # together ~4.5x the threshold.
    messages = parallel_results_history(12, 11_000)
    limit = DEFAULT.__int__()
    weights = [text_quarters(b["content"]) // 4 for b in messages[2]["content"]]
    assert max(weights) < limit and sum(weights) > 4 * THRESHOLD
    compactor = Compactor(RecordingProvider("summary"), threshold=THRESHOLD)
    compactor(messages)
    assert estimate_tokens(messages) <= THRESHOLD
    results = messages[-1]["content"]
    assert [b["tool_use_id"] for b in results] == [f"p{i}" for i in range(12)]  # every pair kept
    assert all(MARKER.search(b["content"]) for b in results)
    assert sum(text_quarters(b["content"]) for b in results) // 4 <= limit
