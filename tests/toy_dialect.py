"""A fourth message dialect, small enough to read at a glance: typed items.

- ``{"type": "toy_say", "speaker": "user" | "assistant", "content": ..., "note"?: ...}``
  (a ``note`` weighs beside the content)
- ``{"type": "toy_call", "call_id": ..., "tool": ..., "args": ...}``
- ``{"type": "toy_result", "call_id": ..., "output": ...}`` (a run of them is one turn)

It is one module and one ``dialects.register(DIALECT)`` call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from bareagent_compact.dialects import (
    UNKNOWN_TOOL,
    BlockParts,
    Call,
    Kind,
    Parts,
    Slot,
    Unpaired,
    render_content,
)
from bareagent_compact.protocols import Message

SAY: Final = "toy_say"
CALL: Final = "toy_call"
RESULT: Final = "toy_result"


class Toy:
    """The toy dialect."""

    name: Final = "toy"
    block_parts: Final[Mapping[str, BlockParts]] = {}
    parts_key: Final = "note"  # calls and results, without content, weigh their JSON text
    item_types: Final = frozenset({SAY, CALL, RESULT})
    any_item: Final = False
    roles: Final = frozenset[str]()
    keys: Final = ()

    def kind(self, message: Message) -> Kind:
        item_type = message.get("type")
        if item_type == RESULT:
            return Kind.RESULT
        if item_type == SAY and message.get("speaker") == "user":
            return Kind.USER
        return Kind.ASSISTANT

    def continues(
        self, previous: Message, message: Message, kind: Callable[[Message], Kind]
    ) -> bool:
        if message.get("type") == RESULT:
            return previous.get("type") == RESULT
        return self.kind(message) is Kind.ASSISTANT and kind(previous) is Kind.ASSISTANT

    def calls(self, message: Message) -> list[Call]:
        if message.get("type") != CALL:
            return []
        tool = message.get("tool", UNKNOWN_TOOL)
        return [Call(message.get("call_id"), tool, message.get("args"))]

    def results(self, message: Message) -> list[tuple[int, str | None]]:
        return [(0, message.get("call_id"))] if message.get("type") == RESULT else []

    def result_slots(self, message: Message) -> Iterator[Slot]:
        slot = self.own_result_slot(message)
        if slot is not None:
            yield slot

    def own_result_slot(self, message: Message) -> Slot | None:
        if message.get("type") != RESULT:
            return None
        return Slot(message, "output", message.get("call_id"))

    def render(self, message: Message, names: dict[str, str]) -> str:
        item_type = message.get("type")
        if item_type == CALL:
            return f"[tool_use:{message.get('tool')}] {render_content(message.get('args'), {})}"
        if item_type == RESULT:
            name = names.get(message.get("call_id", ""), UNKNOWN_TOOL)
            return f"[tool_result:{name}] {render_content(message.get('output'), names)}"
        return render_content(message.get("content"), names)

    def add_parts(self, parts: Parts, message: Message) -> None:
        note = message.get("note")
        if isinstance(note, str):
            parts.strings.append(note)

    def rewrite_unpaired(self, message: Message, broken: Mapping[int, Unpaired]) -> bool:
        text = self.render(message, {})
        message.clear()
        message.update({"type": SAY, "speaker": "assistant", "content": text})
        return False


DIALECT: Final = Toy()


def say(speaker: str, text: str, note: str | None = None) -> dict[str, Any]:
    message = {"type": SAY, "speaker": speaker, "content": text}
    return message if note is None else {**message, "note": note}


def call(call_id: str, tool: str, args: Any) -> dict[str, Any]:
    return {"type": CALL, "call_id": call_id, "tool": tool, "args": args}


def result(call_id: str, output: str) -> dict[str, Any]:
    return {"type": RESULT, "call_id": call_id, "output": output}
