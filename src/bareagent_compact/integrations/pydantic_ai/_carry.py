"""The dicts of the processor's last output, carried into its next call.

Pydantic AI keeps what the processor returned as the history, so the next call's
history opens with those very ``ModelMessage`` objects. Handing the compactor the
very dicts it returned for them (not fresh copies) lets it recognise its own
output (a summary made in the background is swapped in), and only the new
messages are converted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic_ai import messages as pm

from bareagent_compact.integrations.pydantic_ai._to_dicts import Converted, add_message

LOOKAHEAD: Final = 4
"""How many compacted dicts past the last one matched a dict is looked for among."""


def continued(known: Converted | None, messages: Sequence[pm.ModelMessage]) -> Converted:
    """``messages`` as dicts: those of the leading messages that are the very objects
    ``known`` stands for are ``known``'s own dicts; only the others are converted."""
    out = Converted(list(messages))
    count = 0
    if known is not None:
        limit = min(len(known.messages), len(out.messages))
        while count < limit and out.messages[count] is known.messages[count]:
            count += 1
    if count:
        assert known is not None
        for message, source in zip(known.dicts, known.sources, strict=True):
            if source.message < count:
                out.add(message, source)
        out.tool_names.update(known.tool_names)
    for index in range(count, len(out.messages)):
        add_message(out, index)
    return out


def _blocks(content: object) -> object:
    """A ``str`` content as the one text block it stands for."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _same(made: Mapping[str, Any], compacted: Mapping[str, Any]) -> bool:
    """Whether ``compacted`` holds what ``made`` does (a ``str`` content and a lone
    text block being the same)."""
    if made is compacted:
        return True
    if made.get("role") != compacted.get("role"):
        return False
    return bool(_blocks(made.get("content")) == _blocks(compacted.get("content")))


def adopted(converted: Converted, compacted: Sequence[dict[str, Any]]) -> Converted:
    """``converted`` (the output's dicts) with each dict replaced by the compacted
    dict it stands for, matched in order, so that the next call hands the compactor
    its own dicts back."""
    dicts = list(converted.dicts)
    start = 0
    for i, made in enumerate(dicts):
        for j in range(start, min(start + LOOKAHEAD, len(compacted))):
            if _same(made, compacted[j]):
                dicts[i], start = compacted[j], j + 1
                break
    out = Converted(converted.messages, tool_names=converted.tool_names)
    for message, source in zip(dicts, converted.sources, strict=True):
        out.add(message, source)
    return out
