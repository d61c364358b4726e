"""A pre-send check: the documented causes of a 400 that can be seen in the list
itself, without a network call.

:func:`check_request` reads the part of the history the server reads (from the
newest server compaction artefact on, plus the system messages) and reports, one
line per problem: unpaired tool calls and results (both ways, with consecutive
``user`` messages read as the one turn the Messages API makes of them); text
before the ``tool_result`` blocks of a user turn; a compaction block that does
not open an assistant message, appears twice, or differs from the one the
server returned (when the original blocks are given); content that is no string
or list, a block that is no object, empty content, empty or whitespace-only
text; a thinking block that does not open its assistant message; with thinking
on, an assistant message last, or the assistant turn of the current tool loop,
not opening with a thinking block; a Responses ``reasoning`` item not followed
by the item the model produced with it; on request, Amazon Bedrock's rule that
the conversation opens with a user message. Each line names the message by its
index in the list given. None of the three APIs requires roles to alternate
(Anthropic merges consecutive messages of one role; Chat and Responses take
any order), so that is not reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact.pairs import api_turns, find_orphans
from bareagent_compact.plain import dump_model, is_model, plain_view
from bareagent_compact.validate import validate_messages

_ANSWERS: Final = ("function_call", "message", "custom_tool_call")
"""What follows a Responses reasoning item: an item the model produced with it."""

_THINKING: Final = ("thinking", "redacted_thinking")
"""The block types that carry the model's extended thinking."""

_ANTHROPIC: Final = (None, "anthropic")
"""The ``dialect`` values under which the Messages API's own rules are checked."""


def _key(block: Any) -> str:
    """The identity of an artefact: its JSON, fields sorted (an SDK object as the
    server sent it); ``repr`` for a value JSON cannot write that way."""
    value = dump_model(block) if is_model(block) else block
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):  # keys of mixed types, a cycle
        return repr(value)


def _orphan_errors(live: list[Any], at: Sequence[int]) -> list[str]:
    errors = []
    for orphan in find_orphans(live):
        half = "tool call" if orphan.kind == "tool_use" else "tool result"
        where = at[orphan.message_index]
        errors.append(f"message {where}: {half} {orphan.tool_use_id} unpaired")
    return errors


def _artefacts(messages: Sequence[Any]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(message index, position, artefact)`` for every compaction block and item."""
    for index, message in enumerate(messages):
        if message.get("type") == dialects.COMPACTION_TYPE:
            yield index, 0, message  # an item (or a message typed as one)
            continue
        content = message.get("content")
        for position in dialects.compaction_positions(message):
            if isinstance(content[position], dict):
                yield index, position, content[position]


def _misplaced(message: Any, position: int) -> bool:
    """An Anthropic block anywhere but first in an assistant message's content."""
    return "role" in message and (position != 0 or message["role"] != "assistant")


def _compaction_errors(messages: Sequence[Any], original: Iterable[Any] | None) -> list[str]:
    errors: list[str] = []
    seen: set[str] = set()
    known = None if original is None else {_key(block) for block in original}
    for index, position, artefact in _artefacts(messages):
        where = f"message {index}"
        if _misplaced(messages[index], position):
            errors.append(f"{where}: compaction block misplaced (must open an assistant message)")
        key = _key(artefact)
        if key in seen and artefact.get("content", "") is not None:
            errors.append(f"{where}: compaction artefact duplicated")
        seen.add(key)
        if known is not None and key not in known:
            errors.append(f"{where}: compaction artefact altered (not as the server returned it)")
        if artefact.get("content") == "":
            errors.append(f"{where}: compaction block with empty content")
    return errors


def _blank(text: Any) -> bool:
    """A string of whitespace only (not empty)."""
    return isinstance(text, str) and bool(text) and not text.strip()


def _block_error(block: Any, anthropic: bool) -> str | None:
    """What is wrong with one block of a message's ``content``, if anything."""
    if not isinstance(block, dict):
        return f"content block that is no object ({type(block).__name__})"
    if block.get("type") != "text":
        return None
    if block.get("text") == "":
        return "empty text block"
    if anthropic and _blank(block.get("text")):
        return "whitespace-only text block"
    return None


def _is_empty(message: Any, last: bool, anthropic: bool) -> bool:
    """Empty content the API refuses: all but an Anthropic final assistant message's
    (and a Chat message carrying tool calls)."""
    if message.get("content") not in ("", []) or message.get("tool_calls"):
        return False
    return not (anthropic and last and message.get("role") == "assistant")


def _content_error(message: Any, last: bool, anthropic: bool) -> str | None:
    """What is wrong with a role message's ``content``, if anything (the first thing)."""
    content = message.get("content")
    if _is_empty(message, last, anthropic):
        return "empty content"
    if isinstance(content, list):
        return next(filter(None, (_block_error(b, anthropic) for b in content)), None)
    if isinstance(content, str) or content is None:  # None: a Chat message with calls
        return "whitespace-only content" if anthropic and _blank(content) else None
    return f"content that is neither a string nor a list ({type(content).__name__})"


def _content_errors(live: Sequence[Any], at: Sequence[int], dialect: str | None) -> list[str]:
    errors = []
    anthropic = dialect in _ANTHROPIC
    for position, (index, message) in enumerate(zip(at, live, strict=True)):
        if dialects.typed_item(message) is not None or dialects.is_system(message):
            continue
        problem = _content_error(message, position == len(live) - 1, anthropic)
        if problem is not None:
            errors.append(f"message {index}: {problem}")
    return errors


def _reasoning_errors(live: Sequence[Any], at: Sequence[int]) -> list[str]:
    errors = []
    for index, message in enumerate(live):
        if dialects.typed_item(message) != "reasoning":
            continue
        following = live[index + 1] if index + 1 < len(live) else None
        follower = None if following is None else following.get("type", "message")
        if (
            not isinstance(follower, str)
            or follower not in _ANSWERS
            or (
                follower == "message"
                and following is not None
                and following.get("role") != "assistant"
            )
        ):
            errors.append(f"message {at[index]}: reasoning item without its following item")
    return errors


# -- the Messages API's own rules ------------------------------------------------------


def _is_user(message: Any) -> bool:
    return message.get("role") == "user" and dialects.typed_item(message) is None


def _is_assistant(message: Any) -> bool:
    return message.get("role") == "assistant" and dialects.typed_item(message) is None


def _blocks(message: Any) -> list[Any]:
    """A message's content as blocks: a string is one text block."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _is_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == dialects.TOOL_RESULT


def _late_result(live: Sequence[Any], turn: list[int]) -> int | None:
    """The position in ``live`` of the first message of a user turn holding a
    ``tool_result`` block after some other block or text, else ``None``."""
    other = False
    for position in turn:
        for block in _blocks(live[position]):
            if not _is_result(block):
                other = True
            elif other:
                return position
    return None


def _placement_errors(live: Sequence[Any], at: Sequence[int]) -> list[str]:
    """Text before the ``tool_result`` blocks of a user turn (the consecutive user
    messages the API joins): the results must open it."""
    errors = []
    for turn in api_turns(live):
        if not all(_is_user(live[position]) for position in turn):
            continue
        late = _late_result(live, turn)
        if late is not None:
            errors.append(
                f"message {at[late]}: text before tool_result blocks (they must open the user turn)"
            )
    return errors


def _opens_with_thinking(message: Any) -> bool:
    blocks = _blocks(message)
    first = blocks[0] if blocks else None
    return isinstance(first, dict) and first.get("type") in _THINKING


def _opens_with_compaction(message: Any) -> bool:
    blocks = _blocks(message)
    return bool(blocks) and isinstance(blocks[0], dict) and blocks[0].get("type") == "compaction"


def _thinking_order_errors(live: Sequence[Any], at: Sequence[int]) -> list[str]:
    """An assistant message holding thinking blocks must open with one."""
    errors = []
    for index, message in zip(at, live, strict=True):
        if not _is_assistant(message) or _opens_with_thinking(message):
            continue
        if any(isinstance(b, dict) and b.get("type") in _THINKING for b in _blocks(message)):
            errors.append(f"message {index}: thinking block not first in its assistant message")
    return errors


def _final_assistant(live: Sequence[Any]) -> tuple[int, bool] | None:
    """Where the assistant turn the API checks with thinking on opens (the first of
    its consecutive assistant messages), and whether it is last in the request;
    ``None`` when no such turn is there (the last turn is user input, not results)."""
    turns = api_turns(live)
    if not turns:
        return None
    last = turns[-1]
    if all(_is_assistant(live[p]) for p in last):
        return last[0], True
    holds_results = any(_is_result(b) for p in last for b in _blocks(live[p]))
    if not holds_results or len(turns) < 2 or not _is_assistant(live[turns[-2][0]]):
        return None
    return turns[-2][0], False


def _thinking_errors(live: Sequence[Any], at: Sequence[int]) -> list[str]:
    """With thinking on: the final assistant turn (a prefill last, or the turn whose
    tool calls the last user turn answers) must open with a thinking block."""
    found = _final_assistant(live)
    if found is None:
        return []
    position, last = found
    message = live[position]
    if _opens_with_thinking(message) or _opens_with_compaction(message):
        return []
    if last:
        return [
            f"message {at[position]}: assistant message last with thinking on, "
            "not opening with a thinking block"
        ]
    return [
        f"message {at[position]}: tool-loop assistant turn without its thinking block "
        "(refused with thinking on)"
    ]


def _bedrock_errors(live: Sequence[Any], at: Sequence[int]) -> list[str]:
    """Amazon Bedrock: the conversation opens with a user message."""
    for index, message in zip(at, live, strict=True):
        if dialects.is_system(message):
            continue
        if _is_user(message):
            return []
        return [f"message {index}: the conversation opens with no user message (Bedrock)"]
    return []


def _anthropic_errors(
    live: Sequence[Any], at: Sequence[int], *, thinking: bool, bedrock: bool
) -> list[str]:
    errors = _placement_errors(live, at) + _thinking_order_errors(live, at)
    if thinking:
        errors += _thinking_errors(live, at)
    if bedrock:
        errors += _bedrock_errors(live, at)
    return errors


def check_request(
    messages: Sequence[Any],
    dialect: str | None = None,
    *,
    original: Iterable[Any] | None = None,
    thinking: bool = False,
    bedrock: bool = False,
) -> list[str]:
    """What in ``messages`` would make the API refuse the request, one line each
    (empty: nothing seen). ``dialect`` narrows the rules to one API
    (``"anthropic"``, ``"openai_chat"``, ``"openai_responses"``); ``original``, the
    compaction blocks and items as the server returned them, adds the check that
    each one sent is among them, unchanged. ``thinking``: the request turns
    Anthropic's extended thinking on (the last assistant turn must then open with
    a thinking block). ``bedrock``: the request goes to Amazon Bedrock, which
    refuses a conversation that does not open with a user message (Anthropic's
    own API takes it). Nothing is sent and the list is not changed.

    A ``messages`` that is no sequence, an item that is no dict, or a message
    without a string role raises ``TypeError`` naming its index (as
    :func:`~bareagent_compact.find_orphans` does); anything else malformed is
    reported as a line, never raised.
    """
    if dialect is not None and dialect not in dialects.DIALECTS:
        names = sorted(dialects.DIALECTS)
        raise ValueError(f"dialect must be one of {names} or None, got {dialect!r}")
    view = plain_view(messages)
    validate_messages(view)
    at = dialects.live_indices(view)  # problems are reported where they are in ``messages``
    live = [view[i] for i in at]
    errors = _orphan_errors(live, at) + _compaction_errors(view, original)
    errors += _content_errors(live, at, dialect)
    if dialect in _ANTHROPIC:
        errors += _anthropic_errors(live, at, thinking=thinking, bedrock=bedrock)
    if dialect in (None, "openai_responses"):
        errors += _reasoning_errors(live, at)
    return errors
