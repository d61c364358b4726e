"""Server compaction artefacts (Anthropic blocks, Responses items): recognised,
never altered, counted from the newest one; old thinking cleared; check_request."""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
from typing import Any

import pytest

from bareagent_compact import Action, Compactor, check_request, estimate_tokens
from bareagent_compact.dialects import fixed_end, live_view, server_compaction_index
from bareagent_compact.plain import plain_messages, plain_view
from bareagent_compact.protocols import ServerCompactionRequest, ServerSummary
from bareagent_compact.thinking import CLEARED_TEXT

BLOCK = {"type": "compaction", "content": "Earlier: the user asked X.", "signature": "csig_1"}
ITEM = {"type": "compaction", "id": "cmp_1", "encrypted_content": "enc_1", "created_by": "srv"}


def big(text: str) -> str:
    return (text + " ") * 400


def anthropic_history() -> list[Any]:
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": big("old question")},
        {"role": "assistant", "content": big("old answer")},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": [dict(BLOCK), {"type": "text", "text": "ok"}]},
        {"role": "user", "content": big("live question")},
        {"role": "assistant", "content": big("live answer")},
        {"role": "user", "content": "latest"},
    ]


def responses_history() -> list[Any]:
    return [
        {"role": "user", "content": big("old question")},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": big("old answer"), "annotations": []}],
        },
        dict(ITEM),
        {"role": "user", "content": big("live question")},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": big("live answer"), "annotations": []}],
        },
        {"role": "user", "content": "latest"},
    ]


def test_the_newest_artefact_marks_where_the_server_reads_from() -> None:
    history = anthropic_history()
    assert server_compaction_index(history) == 4
    assert live_view(history) == [history[0], *history[4:]]
    assert server_compaction_index(responses_history()) == 2
    assert server_compaction_index([{"role": "user", "content": "x"}]) == -1


def test_the_count_leaves_out_the_dead_part() -> None:
    history = anthropic_history()
    compactor = Compactor(lambda *_: "summary", threshold=10**6)
    result = compactor(history)
    assert result.tokens_before == estimate_tokens(list(live_view(history)))
    assert result.tokens_before < estimate_tokens(history)


@pytest.mark.parametrize("make", [anthropic_history, responses_history])
def test_a_full_compaction_summarises_only_the_live_part(make: Any) -> None:
    history = make()
    index = server_compaction_index(history)
    before = copy.deepcopy(history[: index + 1])
    seen: list[str] = []

    def provider(prompt: list[Any]) -> str:
        seen.append(prompt[-1]["content"])
        return "live summary"

    result = Compactor(provider, threshold=100)(history, force=True)
    assert result.compacted
    assert history[: index + 1] == before  # in place, unchanged
    assert "old question" not in seen[0] and "live question" in seen[0]
    assert check_request(history, original=[BLOCK, ITEM]) == []


def test_prune_drops_the_dead_part_after_saving_it() -> None:
    saved: list[list[Any]] = []

    class Store:
        def save(self, messages: list[Any], session_id: str) -> None:
            saved.append(list(messages))

    history = anthropic_history()
    compactor = Compactor(
        lambda *_: "s", Store(), threshold=10**6, prune_before_server_compaction=True
    )
    result = compactor(history)
    assert result.pruned == 3 and len(saved[0]) == 8
    assert history[0]["role"] == "system" and history[1]["content"][0] == BLOCK
    assert compactor(history).pruned == 0


def test_prune_is_off_by_default() -> None:
    history = anthropic_history()
    Compactor(lambda *_: "s", threshold=10**6)(history)
    assert len(history) == 8


class FakeCompaction:
    """A pydantic-like SDK object, with a field the server sent as null."""

    type = "compaction"

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        if kwargs.get("exclude_unset"):
            return {"type": "compaction", "content": "S", "signature": None}
        return {"type": "compaction", "content": "S", "signature": None, "citations": None}


def test_an_sdk_compaction_block_becomes_exactly_the_fields_the_server_sent() -> None:
    history: list[Any] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [FakeCompaction()]},
        {"role": "user", "content": "r"},
    ]
    plain_messages(history)
    assert history[1]["content"][0] == {"type": "compaction", "content": "S", "signature": None}


def test_real_sdk_objects_round_trip_unchanged() -> None:
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    anthropic_construct = importlib.import_module("anthropic._models").construct_type
    openai_construct = importlib.import_module("openai._models").construct_type

    wire = {"type": "compaction", "content": "S", "tool_changes": None, "signature": "x"}
    block = anthropic_construct(type_=anthropic.types.beta.BetaCompactionBlock, value=wire)
    item_wire = dict(ITEM)
    item = openai_construct(type_=openai.types.responses.ResponseCompactionItem, value=item_wire)
    history: list[Any] = [{"role": "assistant", "content": [block]}, item]
    plain_messages(history)
    assert history == [{"role": "assistant", "content": [wire]}, item_wire]


def streamed_anthropic_reply(blocks: list[dict[str, Any]]) -> Any:
    """The final message of a streamed reply through the real ``anthropic`` client
    over a mocked transport: each compaction block as the API streams it (the start
    event with ``content: null``, then one ``compaction_delta`` with the content)."""
    anthropic = pytest.importorskip("anthropic")
    http = pytest.importorskip("httpx2" if importlib.util.find_spec("httpx2") else "httpx")
    start = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []}
    usage = {"input_tokens": 10, "output_tokens": 5}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": {**start, "stop_reason": None, "usage": usage}})
    ]
    for index, block in enumerate(blocks):
        delta = {"type": "compaction_delta", "content": block["content"]}
        opening = {**block, "content": None}
        events += [
            ("content_block_start", {"index": index, "content_block": opening}),
            ("content_block_delta", {"index": index, "delta": delta}),
            ("content_block_stop", {"index": index}),
        ]
    events += [
        ("message_delta", {"delta": {"stop_reason": "compaction"}, "usage": usage}),
        ("message_stop", {}),
    ]
    body = "".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events
    )

    def handle(request: Any) -> Any:
        headers = {"content-type": "text/event-stream"}
        return http.Response(200, headers=headers, content=body.encode())

    client = anthropic.Anthropic(
        api_key="offline",
        base_url="http://fake.invalid",
        max_retries=0,
        http_client=http.Client(transport=http.MockTransport(handle)),
    )
    request = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "q"}]}
    with client.beta.messages.stream(**request) as stream:
        return stream.get_final_message()


def test_a_streamed_compaction_block_comes_back_with_no_field_the_server_left_out() -> None:
    sent = {"type": "compaction", "content": "Earlier: the user asked X.", "signature": "csig_9"}
    reply = streamed_anthropic_reply([sent])
    history: list[Any] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": "next"},
    ]
    assert plain_view(history)[1]["content"] == [sent]
    plain_messages(history)
    assert history[1]["content"] == [sent]
    assert check_request(history, original=[sent]) == []


def test_a_compaction_block_inside_a_message_object_keeps_the_fields_the_server_sent() -> None:
    anthropic = pytest.importorskip("anthropic")
    construct = importlib.import_module("anthropic._models").construct_type
    failed = {"type": "compaction", "content": None}
    wire = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [failed, {"type": "text", "text": "ok", "citations": None}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }  # fmt: skip
    message = construct(type_=anthropic.types.beta.BetaMessage, value=wire)
    history: list[Any] = [{"role": "user", "content": "q"}, message]
    plain_messages(history)
    assert history[1]["content"] == [failed, {"type": "text", "text": "ok"}]


def tool_turn(n: int, text: str) -> list[Any]:
    """One Anthropic tool call (after a thinking block) and its result."""
    call = {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"n": n}}
    thinking = {"type": "thinking", "thinking": f"why {n}", "signature": f"s{n}"}
    result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": text}
    return [
        {"role": "assistant", "content": [thinking, call]},
        {"role": "user", "content": [result]},
    ]


def history_with_a_dead_part() -> list[Any]:
    """Tool turns with long results, a long user text and old thinking before a
    compaction block (the dead part), then the same after it."""
    history: list[Any] = [{"role": "system", "content": "be brief"}]
    history.append({"role": "user", "content": "dead user text " * 800})
    for n in range(4):
        history += tool_turn(n, f"dead result {n} " * 800)
    history.append({"role": "user", "content": "go on"})
    history.append({"role": "assistant", "content": [dict(BLOCK)]})
    history.append({"role": "user", "content": "live user text " * 800})
    for n in range(4, 8):
        history += tool_turn(n, f"live result {n} " * 800)
    thinking = {"type": "thinking", "thinking": "done", "signature": "s8"}
    history.append({"role": "assistant", "content": [thinking, {"type": "text", "text": "ok"}]})
    history.append({"role": "user", "content": "and now?"})
    return history


def test_the_dead_part_is_left_byte_for_byte() -> None:
    history = history_with_a_dead_part()
    dead_end = server_compaction_index(history)
    before = json.dumps(history[:dead_end])
    compactor = Compactor(
        lambda *_: "s",
        threshold=10**6,
        keep_recent=1,
        max_message_tokens=500,
        clear_thinking_after_turns=0,
    )
    result = compactor(history)
    assert result.action is Action.MICRO, result
    assert json.dumps(history[:dead_end]) == before
    live = json.dumps(history[dead_end:])
    assert "[truncated: bash result" in live  # micro-compaction ran on the live part
    assert "chars cut" in live  # and so did the oversize cut
    assert result.thinking_cleared > 0  # and the clearing of old thinking
    compactor(history, force=False)
    assert json.dumps(history[:dead_end]) == before


def responses_tool_turn(n: int, text: str) -> list[Any]:
    return [
        {"type": "function_call", "call_id": f"c{n}", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": f"c{n}", "output": text},
    ]


def test_the_dead_part_of_a_responses_history_is_left_byte_for_byte() -> None:
    history: list[Any] = [{"role": "user", "content": "dead user text " * 800}]
    for n in range(4):
        history += responses_tool_turn(n, f"dead result {n} " * 800)
    history.append(dict(ITEM))
    history.append({"role": "user", "content": "live user text " * 800})
    for n in range(4, 8):
        history += responses_tool_turn(n, f"live result {n} " * 800)
    dead_end = server_compaction_index(history)
    before = json.dumps(history[:dead_end])
    compactor = Compactor(lambda *_: "s", threshold=10**6, keep_recent=1, max_message_tokens=500)
    assert compactor(history).action is Action.MICRO
    assert json.dumps(history[:dead_end]) == before
    live = json.dumps(history[dead_end:])
    assert "[truncated: bash result" in live and "chars cut" in live


def thinking_turn(n: int, call: bool) -> list[Any]:
    content: list[Any] = [{"type": "thinking", "thinking": f"t{n}", "signature": f"s{n}"}]
    if call:
        content.append({"type": "tool_use", "id": f"c{n}", "name": "ls", "input": {}})
        return [
            {"role": "assistant", "content": content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"c{n}", "content": "ok"}],
            },
        ]
    return [{"role": "assistant", "content": content}, {"role": "user", "content": f"q{n}"}]


def test_old_thinking_is_cleared_but_never_in_the_current_tool_loop() -> None:
    history: list[Any] = [{"role": "user", "content": "start"}]
    for n in range(4):
        history += thinking_turn(n, call=False)
    history += thinking_turn(4, call=True) + thinking_turn(5, call=True)
    compactor = Compactor(lambda *_: "s", threshold=10**6, clear_thinking_after_turns=1)
    result = compactor(history)
    assert result.thinking_cleared == 4
    assert history[1]["content"] == [{"type": "text", "text": CLEARED_TEXT}]
    # the current tool loop (after the last user input "q3") keeps its thinking
    assert history[9]["content"][0]["type"] == "thinking"
    assert history[11]["content"][0]["type"] == "thinking"
    assert check_request(history) == []


def test_old_reasoning_items_are_dropped_but_not_the_current_turns() -> None:
    history: list[Any] = [
        {"role": "user", "content": "a"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        },
        {"role": "user", "content": "b"},
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {"type": "function_call", "call_id": "c", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "ok"},
    ]
    result = Compactor(lambda *_: "s", threshold=10**6, clear_thinking_after_turns=0)(history)
    assert result.thinking_cleared == 1
    assert [m.get("id") for m in history if m.get("type") == "reasoning"] == ["rs_2"]
    assert check_request(history, "openai_responses") == []


def test_check_request_reports_the_causes_it_can_see() -> None:
    orphan = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"}]}
    ]
    assert any("unpaired" in e for e in check_request(orphan))
    misplaced = [{"role": "user", "content": [{"type": "text", "text": "q"}, dict(BLOCK)]}]
    assert any("misplaced" in e for e in check_request(misplaced))
    twice = [
        {"role": "assistant", "content": [dict(BLOCK)]},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [dict(BLOCK)]},
        {"role": "user", "content": "q"},
    ]
    assert any("duplicated" in e for e in check_request(twice))
    altered = [
        {"role": "assistant", "content": [{**BLOCK, "citations": None}]},
        {"role": "user", "content": "q"},
    ]
    assert any("altered" in e for e in check_request(altered, original=[BLOCK]))
    assert any("empty" in e for e in check_request([{"role": "user", "content": ""}]))
    lone = [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "id": "r", "summary": []},
        {"role": "user", "content": "again"},
    ]
    assert any("reasoning" in e for e in check_request(lone))
    with pytest.raises(ValueError, match="dialect"):
        check_request([], "gemini")


def test_fixed_end_keeps_the_results_of_the_blocks_own_calls() -> None:
    history = [
        {
            "role": "assistant",
            "content": [dict(BLOCK), {"type": "tool_use", "id": "a", "name": "n", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "r"}]},
        {"role": "user", "content": "q"},
    ]
    assert fixed_end(history) == 2


FAILED_BLOCK = {"type": "compaction", "content": None, "signature": None}


class FailedCompaction:
    """An SDK object of a failed compaction block (``content`` is ``None``)."""

    type = "compaction"
    content = None

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return {"type": "compaction", "content": None}


@pytest.mark.parametrize("failed", [FAILED_BLOCK, FailedCompaction()], ids=["dict", "sdk-object"])
def test_a_failed_compaction_block_stands_for_nothing(failed: Any) -> None:
    # content: null is a no-op to the server: everything before it is still read.
    history: list[Any] = [
        {"role": "user", "content": big("old question")},
        {"role": "assistant", "content": big("old answer")},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": [failed, {"type": "text", "text": "ok"}]},
        {"role": "user", "content": "latest"},
    ]
    assert server_compaction_index(history) == -1
    assert live_view(history) is history
    whole = estimate_tokens(plain_view(history))
    result = Compactor(lambda *_: "s", threshold=10**6, prune_before_server_compaction=True)(
        history
    )
    assert result.pruned == 0 and len(history) == 5
    assert result.tokens_before == whole
    # A block with content after it is still the boundary.
    history.append({"role": "assistant", "content": [dict(BLOCK)]})
    assert server_compaction_index(history) == 5


def test_failed_blocks_are_not_reported_as_duplicates() -> None:
    history: list[Any] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [dict(FAILED_BLOCK), {"type": "text", "text": "a"}]},
        {"role": "user", "content": "r"},
        {"role": "assistant", "content": [dict(FAILED_BLOCK), {"type": "text", "text": "b"}]},
        {"role": "user", "content": "s"},
    ]
    assert check_request(history) == []
    history[3]["content"] = [dict(BLOCK), {"type": "text", "text": "b"}]
    history[1]["content"][0] = dict(BLOCK)
    assert check_request(history) == ["message 3: compaction artefact duplicated"]


def test_check_request_takes_the_originals_as_sdk_objects() -> None:
    history: list[Any] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [FakeCompaction()]},
        {"role": "user", "content": "r"},
    ]
    assert check_request(history, original=[FakeCompaction()]) == []
    plain_messages(history)
    assert check_request(history, original=[FakeCompaction()]) == []
    history[1]["content"][0]["content"] = "edited"
    assert check_request(history, original=[FakeCompaction()]) == [
        "message 1: compaction artefact altered (not as the server returned it)"
    ]


def test_a_server_summariser_is_sent_the_system_messages_before_the_artefact() -> None:
    seen: list[Any] = []

    def summarise(request: ServerCompactionRequest) -> ServerSummary:
        seen.append(list(request.messages))
        block = {"type": "compaction", "content": "newer summary"}
        return ServerSummary(({"role": "assistant", "content": [block]},), "newer summary")

    summarise.server_compaction = True  # type: ignore[attr-defined]
    history = anthropic_history()  # a system message, then the dead part, then a block
    history.insert(6, {"role": "system", "content": "reminder: stay on task"})
    result = Compactor(summarise, threshold=100)(history, force=True)
    assert result.action is Action.FULL
    sent = seen[0]
    systems = [m["content"] for m in sent if m.get("role") == "system"]
    assert systems == ["be brief", "reminder: stay on task"]
    assert sent[len(systems)]["content"][0] == BLOCK  # then the live part, from the block
    assert all("old question" not in str(m.get("content")) for m in sent)


def test_check_request_names_every_problem_by_its_index_in_the_list() -> None:
    history = anthropic_history()  # the block is message 4; system message 0 is live
    history.append({"role": "assistant", "content": ""})
    history.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"}]}
    )
    assert check_request(history) == [
        "message 9: tool result x unpaired",
        "message 8: empty content",
    ]
    items = responses_history()  # the item is message 2
    items.append({"type": "reasoning", "id": "rs_1", "summary": []})
    items.append({"role": "user", "content": "again"})
    assert check_request(items) == ["message 6: reasoning item without its following item"]


def test_thinking_of_a_tool_loop_followed_by_a_user_text_reminder_is_kept() -> None:
    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    history: list[Any] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [dict(thinking), {"type": "text", "text": "old"}]},
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": [
                dict(thinking),
                {"type": "tool_use", "id": "c1", "name": "bash", "input": {}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "r"}]},
        {"role": "user", "content": "<system-reminder>stay on task</system-reminder>"},
    ]
    result = Compactor(lambda *_: "s", threshold=10**6, clear_thinking_after_turns=0)(history)
    assert history[3]["content"][0] == thinking  # the tool loop still going on
    assert result.thinking_cleared == 1 and history[1]["content"] == [
        {"type": "text", "text": "old"}
    ]


def tool_loop_history() -> list[Any]:
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": big("old question")},
        {"role": "assistant", "content": big("old answer")},
        {"role": "user", "content": big("live question")},
        {"role": "assistant", "content": big("live answer")},
        {"role": "user", "content": "latest"},
    ]


UNANSWERED = {"role": "assistant", "content": [
    {"type": "compaction", "content": "s"},
    {"type": "tool_use", "id": "toolu_gone", "name": "bash", "input": {}},
]}  # fmt: skip
ORPHAN_RESULT = {"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "out"},
]}  # fmt: skip


@pytest.mark.parametrize(
    "artefact",
    [
        (UNANSWERED,),
        ({"role": "assistant", "content": [{"type": "compaction", "content": "s"}]}, ORPHAN_RESULT),
    ],
    ids=["unanswered tool_use", "orphan tool_result"],
)
def test_a_server_artefact_that_breaks_tool_pairing_is_a_failed_step(
    artefact: tuple[dict[str, Any], ...], caplog: pytest.LogCaptureFixture
) -> None:
    def summarise(request: ServerCompactionRequest) -> ServerSummary:
        return ServerSummary(copy.deepcopy(artefact), "s")

    summarise.server_compaction = True  # type: ignore[attr-defined]
    history = tool_loop_history()
    before = copy.deepcopy(history)
    result = Compactor(summarise, threshold=100)(history, force=True)
    assert result.action is Action.FAILED and result.reason == "unusable summary"
    assert history == before
    assert "unpaired" in caplog.text


def test_a_server_artefact_holding_a_message_that_is_not_one_is_a_failed_step(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def summarise(request: ServerCompactionRequest) -> ServerSummary:
        return ServerSummary(({"content": "no role"},), "s")

    summarise.server_compaction = True  # type: ignore[attr-defined]
    history = tool_loop_history()
    before = copy.deepcopy(history)
    result = Compactor(summarise, threshold=100)(history, force=True)
    assert result.action is Action.FAILED and result.reason == "unusable summary"
    assert history == before
