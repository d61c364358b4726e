"""Recall: handles in truncation markers, reading originals back, the recall tool."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import (
    DEFAULT_RECALL_LIMIT,
    RECALL_TOOL_NAME,
    AsyncCompactor,
    Compactor,
    JsonlTranscriptManager,
    SqlTranscriptManager,
    _micro_compact,
    recall_tool,
)
from bareagent_compact.micro import TRUNCATED_PREFIX, is_truncated
from bareagent_compact.oversize import cut_marker
from bareagent_compact.recall import make_handle
from conftest import READABLE_STORES, WriteOnlyArchive, recalled_in_new_process, tool_history

SPEC_MARKER = re.compile(r"\[truncated: [\w?]+ result, \d+ chars\]")
HANDLED_MARKER = re.compile(r"\[truncated: [\w?]+ result, \d+ chars; recall (r-[0-9a-f]{12})\]")


def output(turn: int) -> Any:
    """Results of many sizes and shapes: text with odd characters, and lists of blocks."""
    if turn % 7 == 3:
        return [
            {"type": "text", "text": f"块 {turn} " * (turn % 50 + 1)},
            {"type": "text", "text": "ok"},
        ]
    return f'turn {turn}: ünïcödé 漢字 🚀\r\n\ttab\\back"quote\x00 ' + "log line\n" * (
        turn % 40 * 9
    )


def original_text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


Store = Callable[[Path], Any]


@pytest.fixture(params=sorted(READABLE_STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    mgr = READABLE_STORES[request.param](tmp_path)
    yield request.param, mgr
    mgr.close()


def run_session(mgr: Any, session_id: str, rounds: int) -> tuple[Compactor, list[dict[str, Any]]]:
    """A session of ``rounds`` tool rounds, compacted every turn as an agent loop does."""
    compactor = Compactor(lambda prompt: "S", None, 10**9, session_id, archive=mgr.archive)
    full = tool_history(rounds, output=output)
    messages = full[:2]
    for start in range(2, len(full), 2):
        messages += full[start : start + 2]
        compactor(messages)
    return compactor, messages


def markers(messages: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Every truncated result: tool call id -> (marker, handle or "")."""
    found = {}
    for message in messages:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and is_truncated(block["content"]):
                match = HANDLED_MARKER.fullmatch(block["content"])
                found[block["tool_use_id"]] = (block["content"], match.group(1) if match else "")
    return found


def test_every_truncated_result_of_a_200_turn_session_is_recalled_byte_exact(
    store: tuple[str, Any], tmp_path: Path
) -> None:
    kind, mgr = store
    compactor, messages = run_session(mgr, "alpha", 200)
    truncated = markers(messages)
    assert len(truncated) == 197  # all but the keep_recent=3 newest
    expected = {}
    for turn in range(200):
        if f"t{turn}" in truncated:
            marker, handle = truncated[f"t{turn}"]
            assert handle, marker
            expected[handle] = original_text(output(turn))
            assert compactor.recall(handle) == expected[handle]
    assert len(expected) == 197  # every handle is distinct
    mgr.close()
    assert recalled_in_new_process(kind, tmp_path, list(expected)) == expected


def test_handles_of_one_session_are_refused_in_another(store: tuple[str, Any]) -> None:
    _, mgr = store
    alpha, alpha_messages = run_session(mgr, "alpha", 8)
    beta, _ = run_session(mgr, "beta", 8)
    handle = next(h for _, h in markers(alpha_messages).values())
    assert alpha.recall(handle).startswith("turn 0")
    with pytest.raises(LookupError, match="another session"):
        beta.recall(handle)
    call = {
        "type": "tool_use",
        "id": "toolu_x",
        "name": RECALL_TOOL_NAME,
        "input": {"handle": handle},
    }
    answer = beta.handle_recall(call)
    assert answer["is_error"] is True
    assert answer["tool_use_id"] == "toolu_x"
    assert "another session" in answer["content"]
    assert "turn 0" not in answer["content"]


def test_a_session_handle_is_not_found_by_a_compactor_rebound_to_another_session(
    store: tuple[str, Any],
) -> None:
    _, mgr = store
    compactor, messages = run_session(mgr, "alpha", 6)
    handle = next(h for _, h in markers(messages).values())
    compactor.set_session_id("beta")
    with pytest.raises(LookupError):
        compactor.recall(handle)


@pytest.mark.parametrize("kind", ["none", "list.append", "function", "bound method"])
def test_markers_without_a_readable_archive_are_exactly_the_specs(kind: str) -> None:
    kept: list[Any] = []

    def function(record: dict[str, Any]) -> None:
        kept.append(record)

    archive = {
        "none": None,
        "list.append": kept.append,
        "function": function,
        "bound method": WriteOnlyArchive().archive,
    }[kind]
    compactor = Compactor(lambda prompt: "S", None, 10**9, archive=archive)
    messages = tool_history(6, output=output)
    compactor(messages)
    truncated = markers(messages)
    assert len(truncated) == 3
    for marker, handle in truncated.values():
        assert SPEC_MARKER.fullmatch(marker) and not handle
    assert all("handle" not in record for record in kept)
    with pytest.raises(LookupError, match="nothing can be recalled"):
        compactor.recall("r-0123456789ab")


def test_the_marker_keeps_the_specs_text_as_its_prefix(store: tuple[str, Any]) -> None:
    _, mgr = store
    compactor = Compactor(lambda prompt: "S", None, 10**9, "alpha", archive=mgr.archive)
    messages = tool_history(4, output=lambda turn: "x" * 4512)
    compactor(messages)
    marker = messages[3]["content"][0]["content"]
    handle = make_handle("alpha", "t0", "x" * 4512)
    assert marker == f"[truncated: bash result, 4512 chars; recall {handle}]"
    assert marker.startswith("[truncated: bash result, 4512 chars")
    assert marker.startswith(TRUNCATED_PREFIX)
    assert mgr.load_archive("alpha")[0]["handle"] == handle


def test_a_marker_with_a_handle_is_not_truncated_again(store: tuple[str, Any]) -> None:
    _, mgr = store
    compactor, messages = run_session(mgr, "alpha", 10)
    before = json.dumps(messages)
    archived = len(mgr.load_archive("alpha"))
    assert _micro_compact(messages, 0) == 3  # only the three results kept whole so far
    compactor(messages)
    assert len(mgr.load_archive("alpha")) == archived
    again = json.dumps(messages)
    assert _micro_compact(messages, 0) == 0
    assert json.dumps(messages) == again
    assert before != again


def test_the_same_result_always_gets_the_same_handle(tmp_path: Path) -> None:
    handles = []
    for name in ("one", "two"):
        mgr = JsonlTranscriptManager(tmp_path / name)
        _, messages = run_session(mgr, "alpha", 6)
        handles.append(sorted(h for _, h in markers(messages).values()))
    assert handles[0] == handles[1]
    assert make_handle("alpha", "t0", "x") == make_handle("alpha", "t0", "x")
    assert make_handle("alpha", "t0", "x") != make_handle("beta", "t0", "x")
    assert make_handle("alpha", "t0", "x") != make_handle("alpha", "t1", "x")
    assert make_handle("alpha", "t0", "x") != make_handle("alpha", "t0", ["x"])
    assert make_handle("alpha", "t0", "x", prefix="m").startswith("m-")  # type: ignore[union-attr]


def test_content_json_cannot_encode_keeps_the_specs_marker(tmp_path: Path) -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert make_handle("alpha", "t0", cyclic) is None
    with pytest.raises(ValueError, match="prefix"):
        make_handle("alpha", "t0", "x", prefix="rr")


def test_large_originals_come_back_in_pages(store: tuple[str, Any]) -> None:
    _, mgr = store
    big = "".join(f"{n:06d}\n" for n in range(7000))  # 49,000 characters
    compactor = Compactor(lambda prompt: "S", None, 10**9, "alpha", archive=mgr.archive)
    messages = tool_history(4, output=lambda turn: big if turn == 0 else "small " * 20)
    compactor(messages)
    handle = markers(messages)["t0"][1]
    assert compactor.recall(handle, offset=100, limit=50) == big[100:150]
    assert compactor.recall(handle, offset=48_990) == big[48_990:]
    pieces, offset, answers = [], 0, 0
    while True:
        arguments = {"handle": handle, "offset": offset}
        call = {
            "type": "function_call",
            "call_id": "c1",
            "name": RECALL_TOOL_NAME,
            "arguments": json.dumps(arguments),
        }
        text = compactor.handle_recall(call)["output"]
        answers += 1
        body, _, note = text.rpartition("\n\n")
        assert len(body) <= DEFAULT_RECALL_LIMIT
        pieces.append(body)
        found = re.search(r"with offset (\d+) for more\]$", note)
        if found is None:
            assert note.endswith("the end]")
            break
        offset = int(found.group(1))
    assert answers == 3
    assert "".join(pieces) == big
    smaller = compactor.handle_recall(
        {
            "type": "function_call",
            "call_id": "c2",
            "name": RECALL_TOOL_NAME,
            "arguments": json.dumps({"handle": handle, "limit": 10**9}),
        },
        limit=1000,
    )
    assert smaller["output"].startswith(big[:1000] + "\n\n[recall ")


def test_a_result_that_fits_one_page_comes_back_alone(store: tuple[str, Any]) -> None:
    _, mgr = store
    compactor, messages = run_session(mgr, "alpha", 5)
    handle = markers(messages)["t1"][1]
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": RECALL_TOOL_NAME, "arguments": json.dumps({"handle": handle})},
    }
    assert compactor.handle_recall(call) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": original_text(output(1)),
    }


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"handle": "r-000000000000"}, "no archived original r-000000000000 in this session"),
        ({"handle": "../../etc/passwd"}, "is not a recall handle"),
        ({}, "handle is required"),
        ({"handle": 17}, "handle is required"),
        ({"handle": "HANDLE", "offset": -1}, "offset must be an int >= 0"),
        ({"handle": "HANDLE", "limit": 0}, "limit must be None or an int >= 1"),
        ({"handle": "HANDLE", "offset": 10**7}, "is past the end"),
        ("{not json", "not valid JSON"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_bad_recalls_give_a_tool_error_never_an_exception(
    store: tuple[str, Any], arguments: Any, error: str
) -> None:
    _, mgr = store
    compactor, messages = run_session(mgr, "alpha", 5)
    handle = markers(messages)["t0"][1]
    if isinstance(arguments, dict) and arguments.get("handle") == "HANDLE":
        arguments = {**arguments, "handle": handle}
    block = {"type": "tool_use", "id": "toolu_1", "name": RECALL_TOOL_NAME, "input": arguments}
    answer = compactor.handle_recall(block)
    assert answer["type"] == "tool_result" and answer["is_error"] is True
    assert answer["content"].startswith("Error: ") and error in answer["content"]
    call = {
        "id": "call_1",
        "type": "function",
        "function": {
            "name": RECALL_TOOL_NAME,
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }
    chat = compactor.handle_recall(call)
    assert chat["role"] == "tool" and error in chat["content"] and "is_error" not in chat


def test_a_call_of_another_tool_or_without_a_readable_archive_is_a_tool_error() -> None:
    compactor = Compactor(lambda prompt: "S")
    block = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"handle": "r-1"}}
    assert "not 'bash'" in compactor.handle_recall(block)["content"]
    block = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": RECALL_TOOL_NAME,
        "input": {"handle": "r-0123456789ab"},
    }
    answer = compactor.handle_recall(block)
    assert answer["is_error"] is True and "nothing can be recalled" in answer["content"]


def test_what_is_no_tool_call_at_all_is_a_caller_error() -> None:
    compactor = Compactor(lambda prompt: "S")
    with pytest.raises(TypeError, match="tool_call"):
        compactor.handle_recall("recall r-1")
    with pytest.raises(ValueError, match="tool_use block"):
        compactor.handle_recall({"role": "user", "content": "hi"})


def test_an_archive_that_fails_to_read_gives_a_tool_error_and_a_warning(
    store: tuple[str, Any], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, mgr = store
    compactor, messages = run_session(mgr, "alpha", 5)
    handle = markers(messages)["t0"][1]

    def broken(session_id: str, handle: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(mgr, "read_archived", broken)
    block = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": RECALL_TOOL_NAME,
        "input": {"handle": handle},
    }
    with caplog.at_level(logging.WARNING, logger="bareagent_compact.recall"):
        answer = compactor.handle_recall(block)
    assert answer["is_error"] is True and "could not be read" in answer["content"]
    assert "reading the archive failed" in caplog.text
    with pytest.raises(OSError):
        compactor.recall(handle)


def test_recall_arguments_of_the_wrong_type_are_caller_errors(store: tuple[str, Any]) -> None:
    _, mgr = store
    compactor, _ = run_session(mgr, "alpha", 4)
    with pytest.raises(TypeError, match="handle must be a str"):
        compactor.recall(17)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="offset"):
        compactor.recall("r-0123456789ab", offset=-1)
    with pytest.raises(ValueError, match="limit"):
        compactor.recall("r-0123456789ab", limit=0)
    with pytest.raises(ValueError, match="dialect"):
        recall_tool("gemini")
    with pytest.raises(TypeError):
        mgr.read_archived("alpha", None)


def test_archive_records_written_before_handles_still_load_and_match_nothing(
    tmp_path: Path,
) -> None:
    mgr = JsonlTranscriptManager(tmp_path)
    old = {"session_id": "alpha", "tool_use_id": "t0", "tool_name": "bash", "content": "old"}
    mgr.archive(old)
    assert mgr.load_archive("alpha") == [old]
    assert mgr.read_archived("alpha", "r-0123456789ab") is None
    sql = SqlTranscriptManager(tmp_path / "t.db")
    sql.archive(old)
    assert sql.load_archive("alpha") == [old]
    assert sql.read_archived("alpha", "r-0123456789ab") is None
    sql.close()


def test_read_archived_never_returns_a_record_of_another_session(store: tuple[str, Any]) -> None:
    _, mgr = store
    forged = {
        "session_id": "alpha",
        "tool_use_id": "t0",
        "tool_name": "bash",
        "content": "secret",
        "handle": "r-0123456789ab",
    }
    mgr.archive(forged)
    assert mgr.read_archived("alpha", "r-0123456789ab") == forged
    assert mgr.read_archived("beta", "r-0123456789ab") is None


def test_the_recall_tool_of_each_dialect() -> None:
    anthropic_tool = recall_tool("anthropic")
    assert set(anthropic_tool) == {"name", "description", "input_schema"}
    chat_tool = recall_tool("openai_chat")
    assert chat_tool["type"] == "function"
    assert chat_tool["function"]["parameters"] == anthropic_tool["input_schema"]
    responses_tool = recall_tool("openai_responses")
    assert responses_tool["parameters"] == anthropic_tool["input_schema"]
    assert responses_tool["name"] == chat_tool["function"]["name"] == RECALL_TOOL_NAME
    assert anthropic_tool["input_schema"]["required"] == ["handle"]
    assert "20000 characters" in anthropic_tool["description"]
    assert "500 characters" in recall_tool(limit=500)["description"]
    recall_tool()["input_schema"]["required"].append("x")
    assert recall_tool()["input_schema"]["required"] == ["handle"]  # a new dict each call


def test_the_async_compactor_recalls_too(tmp_path: Path) -> None:
    mgr = JsonlTranscriptManager(tmp_path)

    async def summarise(prompt: Any) -> str:
        return "S"

    compactor = AsyncCompactor(summarise, None, 10**9, "alpha", archive=mgr.archive)
    messages = tool_history(5, output=output)
    asyncio.run(compactor(messages))
    handle = markers(messages)["t0"][1]
    assert compactor.recall(handle) == output(0)


def test_the_docs_quote_the_tool_description_exactly() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "recall.md").read_text(encoding="utf-8")
    assert f"> {recall_tool()['description']}\n" in page


def test_the_tool_description_shows_both_markers_as_they_are_written() -> None:
    description = recall_tool()["description"]
    assert "[truncated: bash result, 4512 chars; recall r-1a2b3c4d5e6f]" in description
    cut = cut_marker(812_345, "o-1a2b3c4d5e6f").strip()
    assert cut == "[... 812,345 chars cut; recall o-1a2b3c4d5e6f ...]"
    assert cut in description
    for handle in ("r-1a2b3c4d5e6f", "o-1a2b3c4d5e6f"):
        assert f"(here {handle}" in description or f"or {handle})" in description


def _block_history(dialect: str, outputs: list[Any]) -> list[dict[str, Any]]:
    """A history of ``dialect`` whose tool results are ``outputs``, one round each."""
    text = "input_text" if dialect == "openai_responses" else "text"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    for turn, given in enumerate(outputs):
        content = [{**b, "type": text} if b.get("type") == "text" else b for b in given]
        if dialect == "anthropic":
            call = {"type": "tool_use", "id": f"t{turn}", "name": "bash", "input": {}}
            result = {"type": "tool_result", "tool_use_id": f"t{turn}", "content": content}
            messages.append({"role": "assistant", "content": [call]})
            messages.append({"role": "user", "content": [result]})
        elif dialect == "openai_chat":
            function = {"name": "bash", "arguments": "{}"}
            call = {"id": f"t{turn}", "type": "function", "function": function}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"t{turn}", "content": content})
        else:
            messages.append({"type": "function_call", "call_id": f"t{turn}", "name": "bash",
                             "arguments": "{}"})  # fmt: skip
            messages.append({"type": "function_call_output", "call_id": f"t{turn}",
                             "output": content})  # fmt: skip
    return messages


def _recall_call(dialect: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if dialect == "anthropic":
        return {"type": "tool_use", "id": "r1", "name": RECALL_TOOL_NAME, "input": arguments}
    if dialect == "openai_chat":
        function = {"name": RECALL_TOOL_NAME, "arguments": json.dumps(arguments)}
        return {"id": "r1", "type": "function", "function": function}
    return {"type": "function_call", "call_id": "r1", "name": RECALL_TOOL_NAME,
            "arguments": json.dumps(arguments)}  # fmt: skip


def _answer_content(dialect: str, answer: dict[str, Any]) -> Any:
    return answer["output"] if dialect == "openai_responses" else answer["content"]


HANDLE_RE = re.compile(r"recall ([a-z]-[0-9a-f]{12})\]")


@pytest.mark.parametrize("dialect", ["anthropic", "openai_chat", "openai_responses"])
def test_recall_gives_back_block_list_results_exactly(store: tuple[str, Any], dialect: str) -> None:
    _, mgr = store
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo" * 30}}  # fmt: skip
    outputs = [
        [{"type": "text", "text": f"块 {turn} ünï\n" * (turn + 5)}, {"type": "text", "text": "ok"}]
        + ([image] if dialect == "anthropic" and turn % 2 else [])
        for turn in range(8)
    ]
    originals = json.loads(json.dumps(outputs))
    messages = _block_history(dialect, outputs)
    compactor = Compactor(lambda prompt: "S", None, 10**9, "alpha", archive=mgr.archive)
    compactor(messages)
    handles = HANDLE_RE.findall(json.dumps(messages))
    assert len(handles) == 5  # all but the keep_recent=3 newest
    for turn, handle in enumerate(handles):
        answer = compactor.handle_recall(_recall_call(dialect, {"handle": handle}))
        expected = _block_history(dialect, [originals[turn]])[2]
        if dialect == "anthropic":
            expected = expected["content"][0]  # the tool_result block
        assert _answer_content(dialect, answer) == _answer_content(dialect, expected)


@pytest.mark.parametrize("dialect", ["anthropic", "openai_chat", "openai_responses"])
def test_a_long_block_list_comes_back_in_pages_of_blocks(
    store: tuple[str, Any], dialect: str
) -> None:
    _, mgr = store
    texts = ["".join(f"{n:06d}\n" for n in range(k * 1000, k * 1000 + 900)) for k in range(7)]
    outputs = [[{"type": "text", "text": text} for text in texts]] + [[{"type": "text",
               "text": "small"}]] * 3  # fmt: skip
    messages = _block_history(dialect, outputs)
    compactor = Compactor(lambda prompt: "S", None, 10**9, "alpha", archive=mgr.archive)
    compactor(messages)
    (handle,) = HANDLE_RE.findall(json.dumps(messages))
    pieces: list[str] = []
    offset, pages = 0, 0
    while True:
        answer = compactor.handle_recall(
            _recall_call(dialect, {"handle": handle, "offset": offset}), limit=10_000
        )
        blocks = _answer_content(dialect, answer)
        pages += 1
        assert isinstance(blocks, list)
        *body, note = blocks
        assert sum(len(block["text"]) for block in body) <= 10_000
        pieces.extend(block["text"] for block in body)
        found = re.search(r"with offset (\d+) for more\]$", note["text"])
        if found is None:
            assert note["text"].endswith("the end]")
            break
        offset = int(found.group(1))
    assert pages == 5
    assert "".join(pieces) == "".join(texts)


@pytest.mark.parametrize("dialect", ["anthropic", "openai_chat", "openai_responses"])
@pytest.mark.parametrize(
    "arguments",
    ["[" * 100_000 + "]" * 100_000, '{"handle": ' + "[" * 100_000 + "]" * 100_000 + "}"],
)
def test_recall_arguments_nested_too_deeply_give_an_error_result(
    store: tuple[str, Any], dialect: str, arguments: str
) -> None:
    _, mgr = store
    compactor, _ = run_session(mgr, "alpha", 4)
    call = _recall_call(dialect, {})
    if dialect == "anthropic":
        call["input"] = arguments  # a raw JSON text, as some clients pass it on
    elif dialect == "openai_chat":
        call["function"]["arguments"] = arguments
    else:
        call["arguments"] = arguments
    answer = compactor.handle_recall(call)
    text = _answer_content(dialect, answer)
    assert text.startswith("Error: ") and "nested too deeply" in text
