"""Recall: handles on archived originals, the recall tool of each dialect, its answers.

When a compactor's ``archive`` hook is the ``archive`` method of a store that can
read records back (its owner is an :class:`~bareagent_compact.protocols.ArchiveReader`),
every truncated result gets a handle: the marker reads
``[truncated: bash result, 4512 chars; recall r-1a2b3c4d5e6f]`` and the archive
record carries ``"handle": "r-1a2b3c4d5e6f"``. The model asks for the original
with the ``recall_truncated`` tool (:func:`recall_tool`); the compactor answers
the call (:func:`answer_recall`) with one page of it.

A handle is ``{prefix}-`` and the first 12 hex digits of a SHA-256 over the
session id, the prefix, the record's key (a tool result's call id) and its
content, so the same result of the same session always gets the same handle
(in any process, on any retry) and no state is kept to number them. A handle
names a record only within its session: the store is asked for that session's
records, never another's. A second kind of archived record takes its own
prefix (:func:`make_handle`); recall finds any record by its ``handle`` key. A
text cut by ``max_message_tokens`` is one (:mod:`bareagent_compact.oversize`):
its marker reads ``[... 812,345 chars cut; recall o-1a2b3c4d5e6f ...]``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any, Final, NamedTuple, cast

from bareagent_compact import dialects
from bareagent_compact.dialects import DIALECTS, RESULT_KEY, TOOL_RESULT, TOOL_ROLE, UNKNOWN_TOOL
from bareagent_compact.micro import Due, truncation_marker
from bareagent_compact.plain import dump_model, is_model
from bareagent_compact.protocols import ArchiveReader, ArchiveRecord, Message

__all__ = [
    "DEFAULT_RECALL_LIMIT",
    "DIALECTS",
    "HANDLE_KEY",
    "RECALL_TOOL_NAME",
    "RESULT_PREFIX",
    "answer_recall",
    "make_handle",
    "page",
    "read_original",
    "recall_tool",
    "with_handles",
]

logger = logging.getLogger(__name__)

RECALL_TOOL_NAME: Final = "recall_truncated"
"""The name of the recall tool."""

DEFAULT_RECALL_LIMIT: Final = 20_000
"""The most characters one recall answer holds (a page)."""

HANDLE_KEY: Final = "handle"
"""The archive record key holding a record's handle."""

RESULT_PREFIX: Final = "r"
"""The handle prefix of a truncated tool result (``r-1a2b3c4d5e6f``)."""

_HANDLE_RE: Final = re.compile(r"[a-z]-[0-9a-f]{12}")
_DIGITS: Final = 12


# -- handles ----------------------------------------------------------------------


def make_handle(
    session_id: str, key: str | None, content: object, *, prefix: str = RESULT_PREFIX
) -> str | None:
    """The stable handle of an archived original: ``{prefix}-`` and 12 hex digits.

    ``key`` tells records of one session apart (a tool result's call id);
    ``prefix`` is one lower-case letter naming the kind of record. ``None`` when
    the content cannot be encoded as JSON (cyclic, too deep): that result is
    truncated with the plain marker.
    """
    if not re.fullmatch(r"[a-z]", prefix):
        raise ValueError(f"prefix must be one lower-case ASCII letter, got {prefix!r}")
    try:
        body = "s" + content if isinstance(content, str) else "j" + _json_text(content)
    except (TypeError, ValueError, RecursionError):
        return None
    import hashlib  # noqa: PLC0415 (only where a readable archive asks for handles)

    digest = hashlib.sha256()
    for part in (session_id, prefix, key or "", body):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return f"{prefix}-{digest.hexdigest()[:_DIGITS]}"


def _json_text(content: object) -> str:
    return json.dumps(content, ensure_ascii=False, sort_keys=True, default=repr)


Handles = dict[tuple[str, str | None, int], tuple[object, str | None]]
"""Handles already made, by session, key and the ``id`` of the content (kept with it)."""


def with_handles(
    planned: list[Due], session_id: str, reader: object, memo: Handles | None = None
) -> list[Due]:
    """The planned truncations with a handle in their marker and archive record, when
    the archive has a ``reader`` (an :class:`ArchiveReader`, or ``None``); otherwise
    ``planned`` as it is.

    ``memo``: the handles of the last call's plan (a result due but kept whole, as
    the cache preset does, is planned on every call); on return it holds this plan's.
    """
    known = dict(memo) if memo else {}
    if memo is not None:
        memo.clear()  # only what is due now is held
    if not planned or reader is None:
        return planned
    handled: list[Due] = []
    for due in planned:
        record = due.record
        handle = _remembered(session_id, record, known, memo)
        if handle is None:
            handled.append(due)
            continue
        marker = truncation_marker(record["tool_name"], due.chars, handle)
        handled.append(due._replace(marker=marker, record={**record, HANDLE_KEY: handle}))
    return handled


def _remembered(
    session_id: str, record: ArchiveRecord, known: Handles, memo: Handles | None
) -> str | None:
    """The handle of ``record``, taken from ``known`` when its content is the very
    same string; noted in ``memo``."""
    key, content = record.get("tool_use_id"), record.get("content")
    slot = (session_id, key, id(content))
    seen = known.get(slot)
    if seen is not None and seen[0] is content and isinstance(content, str):
        handle = seen[1]
    else:
        handle = make_handle(session_id, key, content)
    if memo is not None:
        memo[slot] = (content, handle)
    return handle


# -- reading back -----------------------------------------------------------------


def as_text(content: object) -> str:
    """An archived original as text: a ``str`` as it was; any other content (a list
    of blocks) as the JSON the archive holds it in."""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def read_content(reader: ArchiveReader, session_id: str, handle: object) -> object:
    """The original content ``handle`` names in ``session_id``'s archive, as it was
    archived: a ``str``, or a list of blocks.

    ``TypeError`` for a handle that is not a ``str``; ``LookupError`` for one
    that names nothing in this session (malformed, unknown, or another
    session's).
    """
    if not isinstance(handle, str):
        raise TypeError(f"handle must be a str, got {type(handle).__name__}")
    if _HANDLE_RE.fullmatch(handle) is None:
        raise LookupError(f"{handle[:40]!r} is not a recall handle (like r-1a2b3c4d5e6f)")
    record = reader.read_archived(session_id, handle)
    if (
        not isinstance(record, dict)
        or record.get(HANDLE_KEY) != handle
        or record.get("session_id") != session_id
    ):
        raise LookupError(
            f"no archived original {handle} in this session (unknown, or from another session)"
        )
    return record.get("content")


def read_original(reader: ArchiveReader, session_id: str, handle: object) -> str:
    """The original ``handle`` names in ``session_id``'s archive as text (see
    :func:`read_content` and :func:`as_text`)."""
    return as_text(read_content(reader, session_id, handle))


def check_span(offset: object, limit: object) -> tuple[int, int | None]:
    """Validate a recall's ``offset`` (an ``int >= 0``) and ``limit`` (``None`` or an
    ``int >= 1``)."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be an int >= 0, got {offset!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be None or an int >= 1, got {limit!r}")
    return offset, limit


# -- the tool ---------------------------------------------------------------------


def _description(limit: int) -> str:
    return (
        "Read back the full original of a tool result or message that was shortened "
        "to save context. A shortened result reads like "
        "`[truncated: bash result, 4512 chars; recall r-1a2b3c4d5e6f]`; a text cut "
        "to its start and end has `[... 812,345 chars cut; recall o-1a2b3c4d5e6f ...]` "
        "between them: pass the handle after `recall` (here r-1a2b3c4d5e6f or "
        "o-1a2b3c4d5e6f). Long originals come back in "
        f"pages of at most {limit} characters; when a page ends with a line giving "
        "the next offset, call again with that offset to read on. Only handles "
        "shown in this conversation work."
    )


def _schema(limit: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "handle": {
                "type": "string",
                "description": "The handle after `recall` in a truncation or cut marker.",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "The character to start at (default 0).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": f"The most characters to return (default and at most {limit}).",
            },
        },
        "required": ["handle"],
        "additionalProperties": False,
    }


def recall_tool(dialect: str = "anthropic", *, limit: int = DEFAULT_RECALL_LIMIT) -> dict[str, Any]:
    """The ``recall_truncated`` tool definition for ``dialect`` (``"anthropic"``,
    ``"openai_chat"`` or ``"openai_responses"``), a new dict each call.

    ``limit`` is the page size the description promises; give the same to the
    compactor's ``handle_recall``.
    """
    _check_dialect(dialect)
    _check_limit(limit)
    name, text, schema = RECALL_TOOL_NAME, _description(limit), _schema(limit)
    if dialect == "anthropic":
        return {"name": name, "description": text, "input_schema": schema}
    if dialect == "openai_chat":
        function = {"name": name, "description": text, "parameters": schema}
        return {"type": "function", "function": function}
    return {"type": "function", "name": name, "description": text, "parameters": schema,
            "strict": False}  # fmt: skip


def _check_dialect(dialect: object) -> str:
    if not isinstance(dialect, str):
        raise TypeError(f"dialect must be a str, got {type(dialect).__name__}")
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {list(DIALECTS)}, got {dialect!r}")
    return dialect


def _check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be an int >= 1, got {limit!r}")
    return limit


# -- answering a call -------------------------------------------------------------


class ToolCall(NamedTuple):
    """One tool call as read from any dialect."""

    dialect: str
    call_id: str | None
    name: str
    arguments: Any


class _Refusal(Exception):
    """A recall the tool answers with an error result."""


def _wrapped(dialect: str, call: Message) -> Message:
    """The message holding ``call`` in ``dialect``, for the dialect operations to read."""
    if dialect == "anthropic":
        return {"role": "assistant", "content": [call]}
    if dialect == "openai_chat":
        return {"role": "assistant", "tool_calls": [call]}
    return call


def read_tool_call(tool_call: object) -> ToolCall:
    """Read an Anthropic ``tool_use`` block, a Chat ``tool_calls`` entry or a Responses
    ``function_call`` item (a dict or the SDK's object)."""
    call = dump_model(tool_call) if is_model(tool_call) else tool_call
    if not isinstance(call, dict):
        raise TypeError(f"tool_call must be a dict or an SDK object, got {type(call).__name__}")
    for dialect in ("openai_responses", "anthropic", "openai_chat"):
        found = dialects.calls(_wrapped(dialect, call))
        if len(found) == 1 and found[0].name != UNKNOWN_TOOL:
            return ToolCall(dialect, found[0].call_id, found[0].name, found[0].arguments)
    raise ValueError(
        "tool_call must be an Anthropic tool_use block, an OpenAI Chat tool_calls entry "
        "or a Responses function_call item"
    )


def tool_result(call: ToolCall, text: str | list[Any], *, error: bool = False) -> dict[str, Any]:
    """The answer to ``call`` in its dialect: an Anthropic ``tool_result`` block (with
    ``is_error`` on an error), a Chat ``tool`` message or a Responses
    ``function_call_output`` item."""
    if call.dialect == "anthropic":
        block: dict[str, Any] = {"type": TOOL_RESULT, "tool_use_id": call.call_id, "content": text}
        if error:
            block["is_error"] = True
        return block
    if call.dialect == "openai_chat":
        return {"role": TOOL_ROLE, "tool_call_id": call.call_id, "content": text}
    return {"type": "function_call_output", "call_id": call.call_id, RESULT_KEY: text}


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise _Refusal("the arguments are not valid JSON") from None
        except RecursionError:
            raise _Refusal("the arguments are nested too deeply to read") from None
    if not isinstance(raw, dict):
        raise _Refusal("the arguments must be a JSON object with a handle")
    return cast(dict[str, Any], raw)


def _span(arguments: dict[str, Any], limit: int) -> tuple[str, int, int]:
    """The handle, offset and page size a call asks for (the size at most ``limit``)."""
    handle = arguments.get("handle")
    if not isinstance(handle, str) or not handle:
        raise _Refusal("handle is required: the text after `recall` in a truncation or cut marker")
    try:
        offset, asked = check_span(arguments.get("offset", 0), arguments.get("limit", limit))
    except ValueError as exc:
        raise _Refusal(str(exc)) from None
    return handle, offset, min(asked or limit, limit)


def page(text: str, handle: str, offset: int, limit: int) -> str:
    """``limit`` characters of ``text`` from ``offset``; when that is not all of it, a
    last line says which part this is and how to read on. ``ValueError`` for an
    ``offset`` past the end."""
    total = len(text)
    if offset > total or (offset == total and total):
        raise ValueError(f"offset {offset} is past the end of {handle} ({total} characters)")
    end = min(total, offset + limit)
    if offset == 0 and end == total:
        return text
    where = f"[recall {handle}: characters {offset} to {end} of {total}"
    if end < total:
        return f"{text[offset:end]}\n\n{where}; call {RECALL_TOOL_NAME} with offset {end} for more]"
    return f"{text[offset:end]}\n\n{where}; the end]"


def _spans(blocks: list[Any]) -> list[tuple[int, int, bool]]:
    """Where each block's text lies in the list's text (the blocks one a line, as
    the truncation marker counted them), and whether it is a text block to cut."""
    spans, start = [], 0
    for block in blocks:
        text = dialects.render_block(block, {})
        cuttable = isinstance(block, dict) and block.get("text") == text
        spans.append((start, start + len(text), cuttable))
        start += len(text) + 1
    return spans


def page_blocks(
    blocks: list[Any], handle: str, offset: int, limit: int, text_type: str
) -> list[Any]:
    """A page of a list of blocks, as blocks: the list itself when it fits ``limit``
    characters from offset 0; otherwise the text blocks cut to the characters
    ``offset`` to ``offset + limit`` of the list's text, any other block whole on
    the page where it starts, then a ``text_type`` block saying which part this
    is and how to read on. ``ValueError`` for an ``offset`` past the end."""
    spans = _spans(blocks)
    total = spans[-1][1] if spans else 0
    if offset > total or (offset == total and total):
        raise ValueError(f"offset {offset} is past the end of {handle} ({total} characters)")
    end = min(total, offset + limit)
    if offset == 0 and end == total:
        return list(blocks)
    found = _cut(blocks, spans, offset, end)
    where = f"[recall {handle}: characters {offset} to {end} of {total}"
    more = f"call {RECALL_TOOL_NAME} with offset {end} for more]" if end < total else "the end]"
    return [*found, {"type": text_type, "text": f"{where}; {more}"}]


def _cut(blocks: list[Any], spans: list[tuple[int, int, bool]], offset: int, end: int) -> list[Any]:
    """The blocks of the characters ``offset`` to ``end``: text blocks cut to them,
    any other block whole where it starts."""
    found: list[Any] = []
    for block, (start, stop, cuttable) in zip(blocks, spans, strict=True):
        if cuttable and start < end and stop > offset:
            found.append({**block, "text": block["text"][max(offset - start, 0) : end - start]})
        elif offset <= start < end:
            found.append(block)
    return found


def _page_of(call: ToolCall, content: object, handle: str, offset: int, size: int) -> Any:
    """The page of an original a call asks for: of its text, or of its blocks."""
    if isinstance(content, list):
        text_type = "input_text" if call.dialect == "openai_responses" else "text"
        try:
            return page_blocks(content, handle, offset, size, text_type)
        except RecursionError:
            pass  # blocks nested too deeply to read: their JSON text instead
    return page(as_text(content), handle, offset, size)


def answer_recall(
    read: Callable[[str], object], tool_call: object, *, limit: int = DEFAULT_RECALL_LIMIT
) -> dict[str, Any]:
    """The tool result answering ``tool_call`` in its dialect; ``read(handle)`` gives the
    original (a ``str`` or a list of blocks; raising ``LookupError`` for a handle
    it does not know). A list of blocks comes back as blocks (see
    :func:`page_blocks`), a text as text (see :func:`page`).

    A call of another tool, bad arguments, an unknown or foreign handle or an
    archive that cannot be read give an error result (``is_error`` for
    Anthropic), never an exception; only a ``tool_call`` that is no tool call
    at all is a ``TypeError`` / ``ValueError``.
    """
    limit = _check_limit(limit)
    call = read_tool_call(tool_call)
    try:
        if call.name != RECALL_TOOL_NAME:
            raise _Refusal(f"this answers {RECALL_TOOL_NAME} calls, not {call.name[:80]!r}")
        handle, offset, size = _span(_arguments(call.arguments), limit)
        content = _read(read, handle)
        return tool_result(call, _page_of(call, content, handle, offset, size))
    except (_Refusal, ValueError) as exc:  # ValueError: an offset past the end
        return tool_result(call, f"Error: {exc}", error=True)


def _read(read: Callable[[str], object], handle: str) -> object:
    try:
        return read(handle)
    except LookupError as exc:
        raise _Refusal(str(exc).strip("'\"")) from None
    except Exception:
        logger.warning("recall: reading the archive failed", exc_info=True)
        raise _Refusal("the archive could not be read; try again later") from None
