"""smolagents: compact an agent's memory steps for good.

``CompactingMemory(agent, compactor)`` installs itself as a step callback. After
each action step it reads ``agent.memory`` as OpenAI Chat messages (an action
step's tool calls as an assistant ``tool_calls`` message, its observations as
``tool`` messages with the call ids), compacts them with
:meth:`Compactor.compacted`, and writes the outcome back: a truncated
observation goes back into its step's ``observations``, and a summary replaces
the summarised steps with one :class:`SummaryStep`. Steps compaction did not
change stay the same objects with every field.
"""

from __future__ import annotations

import json
import logging
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from smolagents.memory import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
    ActionStep,
    MemoryStep,
    TaskStep,
)
from smolagents.models import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
    ChatMessage,
    MessageRole,
)

from bareagent_compact.compactor import Compactor
from bareagent_compact.rebuild import is_own_output

logger = logging.getLogger(__name__)

__all__ = ["CompactingMemory", "Conversion", "SummaryStep", "steps_to_messages"]

_TASK_PREFIX = "New task:\n"
_ROLES = {MessageRole.TOOL_CALL: "assistant", MessageRole.TOOL_RESPONSE: "user"}


@dataclass
class SummaryStep(TaskStep):  # type: ignore[misc]
    """The summary of the steps it replaced (``task``, as the compactor wrote it) and
    the acknowledgement after it, rendered as a user and an assistant message of
    text blocks, in summary mode too (a task step, so smolagents shows it as one)."""

    acknowledgement: str | None = None

    def to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        messages = [ChatMessage(role=MessageRole.USER, content=_blocks(self.task))]
        if self.acknowledgement:
            messages.append(
                ChatMessage(role=MessageRole.ASSISTANT, content=_blocks(self.acknowledgement))
            )
        return messages


@dataclass(frozen=True)
class Origin:
    """Where a converted message came from: the step's index (``-1``: the system
    prompt) and what it holds (``"text"``, ``"task"``, ``"call"``, ``"result"``
    (the step's observations), ``"pointer"``, ``"error"``)."""

    step: int
    part: str


@dataclass
class Conversion:
    """Memory steps as Chat messages, with each message's origin and each step's span."""

    messages: list[dict[str, Any]]
    origins: list[Origin]
    spans: list[tuple[int, int]]


def _blocks(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _text_of(content: Any) -> str:
    """The text of a content (a ``str`` or a list of text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _arguments(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)


def _action(step: ActionStep) -> list[tuple[dict[str, Any], str]]:
    """An action step's messages: the call (with the model's text), one ``tool``
    message per call (the first holds the observations, which smolagents keeps as
    one text per step), and the error as smolagents words it."""
    out: list[tuple[dict[str, Any], str]] = []
    text = step.model_output.strip() if isinstance(step.model_output, str) else ""
    calls = step.tool_calls or []
    if calls:
        tool_calls = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": _arguments(c.arguments)}}
            for c in calls
        ]  # fmt: skip
        out.append(({"role": "assistant", "content": _blocks(text) if text else None,
                     "tool_calls": tool_calls}, "call"))  # fmt: skip
        out.append(({"role": "tool", "tool_call_id": calls[0].id,
                     "content": step.observations or ""}, "result"))  # fmt: skip
        pointer = f"(this step's observations are in the result of call {calls[0].id})"
        out.extend(
            ({"role": "tool", "tool_call_id": c.id, "content": pointer}, "pointer")
            for c in calls[1:]
        )
    elif text:
        out.append(({"role": "assistant", "content": _blocks(text)}, "text"))
    if step.observations is not None and not calls:
        out.append(({"role": "user", "content": _blocks(step.observations)}, "text"))
    if step.error is not None:
        error = _text_of(step.to_messages()[-1].content)
        out.append(({"role": "user", "content": _blocks(error)}, "error"))
    return out


def _rendered(step: MemoryStep) -> list[tuple[dict[str, Any], str]]:
    """Any other step as smolagents renders it, its text blocks only, the tool roles
    mapped as smolagents maps them for the APIs."""
    out: list[tuple[dict[str, Any], str]] = []
    for message in step.to_messages():
        text = _text_of(message.content)
        if text:
            role = _ROLES.get(message.role, str(MessageRole(message.role).value))
            part = "task" if type(step) is TaskStep else "text"
            out.append(({"role": role, "content": _blocks(text)}, part))
    return out


def steps_to_messages(system_prompt: str | None, steps: Sequence[MemoryStep]) -> Conversion:
    """Memory steps (and the system prompt) as OpenAI Chat message dicts."""
    conv = Conversion([], [], [])
    if system_prompt:
        conv.messages.append({"role": "system", "content": _blocks(system_prompt)})
        conv.origins.append(Origin(-1, "system"))
    for index, step in enumerate(steps):
        start = len(conv.messages)
        parts = _action(step) if isinstance(step, ActionStep) else _rendered(step)
        for message, part in parts:
            conv.messages.append(message)
            conv.origins.append(Origin(index, part))
        conv.spans.append((start, len(conv.messages)))
    return conv


def _unchanged(out: Sequence[Any], messages: list[dict[str, Any]]) -> bool:
    """Whether compaction handed every message back as it was."""
    return len(out) == len(messages) and all(
        a is b for a, b in zip(out, messages, strict=True)
    )


def _same_place(new: dict[str, Any], old: dict[str, Any]) -> bool:
    return new.get("role") == old.get("role") and new.get("tool_call_id") == old.get(
        "tool_call_id"
    )


def _tail(
    conv: Conversion, out: list[Any], full: bool, ack: str
) -> tuple[int, SummaryStep | None] | None:
    """Where the messages kept in ``out`` begin in the conversion, and the summary
    step a full compaction wrote; ``None`` when ``out`` cannot be read back."""
    if not full:
        return (0, None) if len(out) == len(conv.messages) else None
    mine = {id(m) for m in conv.messages}
    new = [i for i, m in enumerate(out) if id(m) not in mine and is_own_output(m, ack)]
    if not new or any(
        m.get("role") != "system" and i not in new for i, m in enumerate(out[: new[-1] + 1])
    ):
        return None
    summary = next((out[i] for i in new if out[i].get("role") == "user"), None)
    if summary is None:
        return None
    reply = [_text_of(out[i]["content"]) for i in new if out[i].get("role") == "assistant"]
    ack_text = reply[-1] if reply else None
    step = SummaryStep(task=_text_of(summary["content"]), acknowledgement=ack_text)
    kept = len(out) - new[-1] - 1
    return len(conv.messages) - kept, step


def rebuild_steps(
    conv: Conversion, steps: Sequence[MemoryStep], out: list[Any], full: bool, ack: str
) -> list[MemoryStep] | None:
    """The steps after compaction (edited steps changed in place); ``None`` (and a
    warning) when the compacted messages cannot be read back."""
    found = _tail(conv, out, full, ack)
    if found is None:
        logger.warning("the compacted messages could not be read back; memory left as it was")
        return None
    start, summary = found
    tail = out[len(out) - (len(conv.messages) - start) :]
    pairs = list(zip(tail, conv.messages[start:], strict=True))
    if not all(new is old or _same_place(new, old) for new, old in pairs):
        logger.warning("the compacted messages could not be read back; memory left as it was")
        return None
    for offset, (new, old) in enumerate(pairs):
        if new is not old:
            _write_back(steps, conv.origins[start + offset], new)
    kept = [
        step
        for step, (first, end) in zip(steps, conv.spans, strict=True)
        if end > start or (first == end and first >= start)
    ]
    return [summary, *kept] if summary is not None else kept


def _write_back(steps: Sequence[MemoryStep], origin: Origin, message: dict[str, Any]) -> None:
    """An edited message (a truncated result, a cut task) written into its step."""
    step = steps[origin.step] if origin.step >= 0 else None
    text = _text_of(message.get("content"))
    if origin.part == "result" and isinstance(step, ActionStep):
        step.observations = text
    elif origin.part == "task" and isinstance(step, TaskStep) and text.startswith(_TASK_PREFIX):
        step.task = text.removeprefix(_TASK_PREFIX)
    else:
        logger.debug("an edit of a %s message is not written back", origin.part)


class CompactingMemory:
    """Keeps a smolagents agent's memory compacted: ``CompactingMemory(agent,
    compactor)`` registers itself for the agent's action steps, or pass
    ``CompactingMemory(compactor=compactor)`` in ``step_callbacks=[...]``.

    ``session_id``: the conversation the compactor keys its state, snapshots and
    archive by; by default one of its own per agent.
    """

    def __init__(
        self, agent: Any = None, compactor: Compactor | None = None, *,
        session_id: str | None = None,
    ) -> None:  # fmt: skip
        if not isinstance(compactor, Compactor):
            raise TypeError(
                "CompactingMemory needs a Compactor (smolagents runs steps synchronously), "
                f"got {type(compactor).__name__}"
            )
        self.compactor = compactor
        self.session_id = session_id
        self._sessions: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        if agent is not None:
            agent.step_callbacks.register(ActionStep, self)

    def session_of(self, agent: Any) -> str:
        """The session id used for ``agent``."""
        if self.session_id is not None:
            return self.session_id
        if agent not in self._sessions:
            self._sessions[agent] = f"smolagents-{uuid.uuid4().hex[:12]}"
        return self._sessions[agent]

    def __call__(self, memory_step: MemoryStep, agent: Any = None) -> None:
        """After an action step (not yet in ``agent.memory.steps``): record its usage
        against the request it was made from, then compact the memory with it."""
        if agent is None or not isinstance(memory_step, ActionStep):
            return
        session = self.session_of(agent)
        system = agent.memory.system_prompt.system_prompt
        before = list(agent.memory.steps)
        usage = memory_step.token_usage
        if usage is not None and usage.input_tokens:
            sent = steps_to_messages(system, before).messages
            self.compactor.record_usage(sent, usage.input_tokens, session_id=session)
        steps = [*before, memory_step]
        conv = steps_to_messages(system, steps)
        out, result = self.compactor.compacted(conv.messages, session_id=session)
        if _unchanged(out, conv.messages):
            return
        rebuilt = rebuild_steps(
            conv, steps, list(out), result.compacted, str(self.compactor.acknowledgement)
        )
        if rebuilt is None:
            return
        if rebuilt and rebuilt[-1] is memory_step:
            rebuilt.pop()  # smolagents appends it after the callbacks
        agent.memory.steps[:] = rebuilt
