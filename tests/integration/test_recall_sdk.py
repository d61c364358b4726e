"""The recall tool through the real SDKs: its definitions are each SDK's tool param
type, and the Anthropic example loop sends it and gets an original back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

import anthropic_loop
from _fake_server import FakeServer, anthropic_client, type_errors
from anthropic.types import ToolParam, ToolUseBlock
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageToolCall
from openai.types.responses import FunctionToolParam, ResponseFunctionToolCall

from bareagent_compact import RECALL_TOOL_NAME, Compactor, JsonlTranscriptManager, recall_tool


@pytest.mark.parametrize(
    ("dialect", "param"),
    [
        ("anthropic", ToolParam),
        ("openai_chat", ChatCompletionFunctionToolParam),
        ("openai_responses", FunctionToolParam),
    ],
)
def test_the_recall_tool_is_the_sdks_tool_param(dialect: str, param: Any) -> None:
    assert type_errors(recall_tool(dialect), param, "tool") == []


def test_the_anthropic_loop_sends_the_recall_tool_and_gets_the_bytes_back(tmp_path: Path) -> None:
    server = FakeServer(keep_bodies=True)
    client = anthropic_client(server)
    store = JsonlTranscriptManager(tmp_path)
    report = anthropic_loop.run(client, "fake-model", 15, 4000, lambda line: None, archive=store)
    assert server.stats.rejections == []
    assert server.stats.recalls == report.recalls == report.recalled_exact == 1
    offered = [body["tools"] for path, body in server.stats.bodies if body.get("tools")]
    assert all(tools[-1] == recall_tool("anthropic") for tools in offered)


def test_sdk_tool_call_objects_of_every_dialect_are_answered(tmp_path: Path) -> None:
    store = JsonlTranscriptManager(tmp_path)
    compactor = Compactor(lambda prompt: "S", None, 10**9, "alpha", archive=store.archive)
    store.archive({"session_id": "alpha", "tool_use_id": "t0", "tool_name": "bash",
                   "content": "original", "handle": "r-0123456789ab"})  # fmt: skip
    arguments = {"handle": "r-0123456789ab"}
    block = ToolUseBlock(type="tool_use", id="toolu_1", name=RECALL_TOOL_NAME, input=arguments)
    assert compactor.handle_recall(block) == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "original",
    }
    chat = ChatCompletionMessageToolCall.model_validate(
        {"id": "call_1", "type": "function",
         "function": {"name": RECALL_TOOL_NAME, "arguments": json.dumps(arguments)}}
    )  # fmt: skip
    assert compactor.handle_recall(chat)["content"] == "original"
    item = ResponseFunctionToolCall(
        type="function_call", call_id="call_2", name=RECALL_TOOL_NAME,
        arguments=json.dumps(arguments), id="fc_1", status="completed",
    )  # fmt: skip
    assert compactor.handle_recall(item) == {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": "original",
    }
