"""The character-weight token estimate of SPEC 11.5.

A cheap heuristic for "is the history getting long?", not a tokenizer. Each
character weighs, in this order of precedence: CJK 1.5, ASCII letter or digit
0.25, whitespace (``str.isspace``) 0.25, anything else 0.5. The grand total is
rounded up. Internally everything is counted in exact integer quarters.

The estimate runs at the start of every agent turn over the whole history, so
it does no per-character Python work:

- an ASCII string is classified by one ``bytes.translate`` of its bytes;
- a mostly ASCII string by its UTF-8 bytes: one ``translate`` settles every
  character up to U+00FF, and what is left decodes to the few characters above;
- any other string by Unicode block: its Latin-1 bytes (with ``ignore``) settle
  the characters up to U+00FF, and the high bytes of its UTF-16 code units put
  every other character in its 256-character block. Only the blocks that are
  partly CJK or partly whitespace, and astral characters, need a closer look,
  and only when they occur.

Short strings are joined into batches and long ones cut into slices, so that
the overhead of a call is paid rarely and the temporaries stay small: the
history is never copied. ``benchmarks/bench_estimate.py`` measures it.

Beyond the specification, a block with neither ``text`` nor ``content`` weighs
what it carries, as its dialect says: an image by its dimensions and the
provider's formula (:mod:`bareagent_compact.images`), a document by its size,
thinking as text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from bareagent_compact._json import to_json
from bareagent_compact._limits import MAX_DEPTH as MAX_DEPTH  # noqa: PLC0414 (re-exported)
from bareagent_compact._limits import too_deep
from bareagent_compact.dialects import BLOCK_PARTS, EXTRA_PARTS, TOOL_USE, Parts
from bareagent_compact.plain import dump_model, is_model
from bareagent_compact.text_weight import _LIGHT_Q, _OTHER_Q, _strings_quarters
from bareagent_compact.text_weight import CJK_RANGES as CJK_RANGES  # noqa: PLC0414 (re-exported)
from bareagent_compact.text_weight import text_quarters as text_quarters  # noqa: PLC0414
from bareagent_compact.validate import not_a_dict, not_a_list

_JSON_GROUP: Final = 32
"""Values weighed as JSON text are encoded this many at a time."""
_BLOCK_PARTS: Final = BLOCK_PARTS
"""What the blocks that carry neither ``text`` nor ``content`` weigh (images, files,
thinking), by type, as each registered dialect says."""


class _Parts:
    """The strings whose weights make up some content, gathered in order.

    Values weighed as their JSON text are encoded a group at a time when the
    strings are weighed. Should gathering fail, they are first encoded one by
    one, so that the error raised is the one met first in reading order.
    """

    __slots__ = ("fixed", "json_values", "strings")

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.json_values: list[Any] = []
        self.fixed: list[int] = []

    def add(self, values: Iterable[Any], depth: int) -> None:
        """Gather the parts of each of ``values``, found ``depth`` levels deep."""
        # The hot loop of the estimate: a block's text and content are read inline
        # (measured: a call per block costs a few per cent of every turn).
        add_string = self.strings.append
        for value in values:
            if isinstance(value, dict) and "type" in value:
                # A block (see dialects._content): tool_use counts its name and
                # input, others their text and content; a block without text may
                # weigh what it carries (an image, a file, thinking).
                if depth > MAX_DEPTH:
                    raise too_deep()
                get = value.get
                block_type = get("type")
                if block_type == TOOL_USE:
                    # Inline as well: every tool call of the history passes here.
                    name = get("name")
                    if isinstance(name, str):
                        add_string(name)
                    elif name is not None:
                        self.add((name,), depth + 1)
                    tool_input = get("input")
                    if isinstance(tool_input, str):
                        add_string(tool_input)
                    elif "input" in value:
                        self.json_values.append(tool_input)
                    continue
                text = get("text")
                if isinstance(text, str):
                    add_string(text)
                elif text is not None:
                    self.add((text,), depth + 1)
                content = get("content")
                if isinstance(content, str):
                    add_string(content)
                elif content is not None:
                    self.add((content,), depth + 1)
                elif text is None:
                    self._add_carried(value, block_type, depth)
            else:
                self._add_value(value, depth)

    def _add_carried(self, block: dict[str, Any], block_type: Any, depth: int) -> None:
        """A block with neither ``text`` nor ``content``: what it carries, as its dialect
        says (an image, a file, thinking), else nothing."""
        if type(block_type) is str and block_type in _BLOCK_PARTS:
            _BLOCK_PARTS[block_type](self, block, depth)

    def _add_value(self, value: Any, depth: int) -> None:
        """Anything but a block: a string as it is, a list's items, an SDK
        object's dict, else (numbers, booleans, dicts without a type ...) its JSON text;
        ``None`` weighs nothing."""
        if value is None:
            return
        if isinstance(value, str):
            self.strings.append(value)
        elif depth > MAX_DEPTH:
            raise too_deep()
        elif isinstance(value, list):
            self.add(value, depth + 1)
        elif is_model(value):
            self.add((dump_model(value),), depth + 1)  # an SDK object: what it stands for
        else:
            self.json_values.append(value)

    def check_json(self) -> None:
        """Encode the pending JSON values one by one, raising the first error met."""
        for value in self.json_values:
            to_json(value)

    def quarters(self) -> int:
        """The total weight of everything gathered."""
        quarters = _strings_quarters(self.strings) + 4 * sum(self.fixed)
        values = self.json_values
        for start in range(0, len(values), _JSON_GROUP):
            group = values[start : start + _JSON_GROUP]
            try:
                # The JSON of a list is its items' JSON, joined by ", " inside "[...]".
                joined = to_json(group)
            except Exception:
                # One value alone may fail differently (or not at all): one by one.
                quarters += sum([text_quarters(to_json(value)) for value in group])
                continue
            separators = 2 * _OTHER_Q + (len(group) - 1) * (_OTHER_Q + _LIGHT_Q)
            quarters += text_quarters(joined) - separators
        return quarters


def value_quarters(value: Any, depth: int = 0) -> int:
    """The weight of a message's ``content`` (or any part of it), in quarters."""
    if isinstance(value, str):
        return text_quarters(value)
    parts = _Parts()
    try:
        parts.add((value,), depth)
    except Exception:
        parts.check_json()
        raise
    return parts.quarters()


def quarters_to_tokens(quarters: int) -> int:
    """Round a quarter count up to whole tokens (``math.ceil`` of the float sum)."""
    return -(-quarters // 4)


def estimate_tokens(messages: list[Any]) -> int:
    """Estimate the tokens of ``messages`` by character weights (SPEC 11.5).

    >>> estimate_tokens([{"role": "user", "content": "你好abc123"}])
    5
    """
    if not isinstance(messages, list):
        raise not_a_list(messages)
    return quarters_to_tokens(messages_quarters(messages))


def _gather(parts: _Parts, messages: list[Any]) -> None:
    """Gather the parts of every message: its ``content``, and what the dialect layer
    says it weighs beside (Chat tool calls, Responses items)."""
    if len(EXTRA_PARTS) > 2:
        _gather_all(parts, messages)  # a dialect registered beyond the built-in ones
        return
    strings = parts.strings
    add = parts.add
    # The dialects' (key, add_parts), Chat tool calls and Responses items, read inline
    # (a loop, or even one more test, per message costs a few per cent of the walk),
    # padded with a part that adds nothing.
    (key_a, add_a), (key_b, add_b) = (*EXTRA_PARTS, _NO_PARTS, _NO_PARTS)[:2]
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            message = _as_dict(index, message)  # noqa: PLW2901 (an SDK object: its dict)
        content = message.get("content")
        if isinstance(content, str):
            strings.append(content)
        elif isinstance(content, list):
            add(content, 1)
        elif content is not None:
            add((content,), 0)
        if key_a in message:
            add_a(parts, message)
        if key_b in message:
            add_b(parts, message)


def _gather_all(parts: _Parts, messages: list[Any]) -> None:
    """:func:`_gather` for any number of dialects that weigh extra parts."""
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            message = _as_dict(index, message)  # noqa: PLW2901 (an SDK object: its dict)
        content = message.get("content")
        if isinstance(content, str):
            parts.strings.append(content)
        elif isinstance(content, list):
            parts.add(content, 1)
        elif content is not None:
            parts.add((content,), 0)
        for key, add_parts in EXTRA_PARTS:
            if key in message:
                add_parts(parts, message)


def _add_nothing(parts: Parts, message: dict[str, Any]) -> None:
    return None


_NO_PARTS: Final = ("", _add_nothing)
"""A (key, add_parts) that adds nothing, even to a message holding the key."""


def _as_dict(index: int, message: Any) -> dict[str, Any]:
    if not is_model(message):
        raise not_a_dict(index, message)
    return dump_model(message)


def messages_quarters(messages: list[Any]) -> int:
    """The weight of ``messages``, in quarters: ``estimate_tokens`` before rounding
    (the weight of a list is the sum of its parts' weights)."""
    parts = _Parts()
    try:
        _gather(parts, messages)
    except Exception:
        parts.check_json()
        raise
    return parts.quarters()
