"""The fixed texts of full compaction (SPEC 11.2), as named constants.

The specification fixes the summary prefix and the Chinese acknowledgement word
for word, and what the summary prompt asks for (in Chinese: the goal, the work
done, key constraints, important paths, the context needed to continue). Both
prompts ask for that with what is done (not to be redone) kept apart from what
is in flight, and the next step named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

DEFAULT_SUMMARY_PROMPT: Final = (
    "你是一个负责压缩对话上下文的助手。请用中文总结下面的对话历史，内容包括："
    "1. 用户的目标；2. 【已完成】的工作（不必重做）；3. 【进行中】的工作（做到哪一步）；"
    "4. 关键约束与决定；5. 重要的文件路径、命令与标识符；6. 继续工作所需的上下文与【下一步】。"
    "只输出摘要本身，保持简洁、准确，不要编造对话中没有的内容。"
)
"""System prompt of the summary request: a Chinese summary of goal, work done,
constraints, important paths and the context needed to continue (SPEC 11.2 step
6), with what is done kept apart from what is in flight, and the next step named."""

SUMMARY_PREFIX: Final = "[Context Compressed]\n"
"""Prefix of the user message that carries the summary in the rebuilt history."""

TEXT_BLOCK_TYPES: Final = frozenset({"text", "input_text", "output_text"})
"""The text block types the summary and the acknowledgement may be written as
(``summary_content``): Anthropic and Chat ``text``, Responses ``input_text`` and
``output_text``."""


def own_text(content: object) -> str | None:
    """The text of a summary or acknowledgement message's ``content`` as the library
    writes it: a ``str``, or one text block (``summary_content``); ``None`` for any
    other content."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and len(content) == 1:
        block = content[0]
        if isinstance(block, dict) and block.get("type") in TEXT_BLOCK_TYPES:
            text = block.get("text")
            return text if isinstance(text, str) else None
    return None

DEFAULT_ACKNOWLEDGEMENT: Final = "收到，我已理解之前的上下文，继续工作。"
"""The assistant message that follows the summary in the rebuilt history."""

DEFAULT_THRESHOLD: Final = 50000
"""Full compaction runs when the estimate is strictly greater than this."""

ENGLISH_SUMMARY_PROMPT: Final = (
    "You compress the context of a conversation between a user and an AI agent. Summarise "
    "the conversation below in English, covering: 1. the user's goal; 2. Done: the work "
    "done so far (not to be redone); 3. In flight: work started but not finished, and how "
    "far it got; 4. key constraints and decisions; 5. important file paths, commands and "
    "identifiers; 6. Next step: the context and next steps needed to continue. Output only "
    "the summary, concise and accurate; do not invent anything that is not in the "
    "conversation."
)
"""The ``language="en"`` summary prompt: the same topics as the default."""

ENGLISH_ACKNOWLEDGEMENT: Final = (
    "Understood: that is the history so far, not a new request. I will continue from the "
    "next step without redoing finished work."
)
"""The ``language="en"`` assistant message after the summary: the summary is history,
finished work is not redone, the work goes on from the next step."""

EARLIER_ACKNOWLEDGEMENTS: Final = (
    "Understood. I have the context of the conversation so far and will continue the work.",
)
"""Acknowledgements earlier versions wrote, still read as the library's own output
in a history compacted before (so a rolling summary is still recognised)."""

CHINESE_FRAMING: Final = (
    "[以上是之前对话的摘要，是历史记录，不是新的请求：【已完成】的工作不要重做，"
    "从【进行中】的工作和【下一步】继续。]"
)
ENGLISH_FRAMING: Final = (
    "[The above is a summary of the conversation so far: history, not a new request. Do "
    "not redo the work listed as done; continue the work in flight from the next step.]"
)
"""Closes the summary message when facts are pinned (``pin_facts=True``), in the
summary's language (see :func:`framing_for`)."""

_CJK_RE: Final = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LETTER_RE: Final = re.compile(r"[^\W\d_]")


def language_of(text: str) -> str:
    """``"zh"`` when more than half of the letters of ``text`` are CJK, else ``"en"``
    (what ``language="auto"`` chooses from the summarised part)."""
    letters = len(_LETTER_RE.findall(text))
    return "zh" if 2 * len(_CJK_RE.findall(text)) > letters else "en"


def framing_for(summary: str) -> str:
    """The framing line in the language of ``summary``: Chinese when more than half of
    its letters are CJK, else English."""
    return CHINESE_FRAMING if language_of(summary) == "zh" else ENGLISH_FRAMING


CHINESE_ROLLING_LEAD_IN: Final = (
    "下面的第一条消息是更早之前对话的摘要，其中仍然相关的内容必须全部保留到新的摘要中。\n\n"
)
ENGLISH_ROLLING_LEAD_IN: Final = (
    "The first message below is the summary of the earlier context; carry over everything "
    "in it that is still relevant into the new summary.\n\n"
)
"""Put before the transcript when it starts with a previous summary (rolling summaries)."""

CHINESE_INSTRUCTIONS_HEADING: Final = "额外要求："
ENGLISH_INSTRUCTIONS_HEADING: Final = "Additional instructions: "
"""Put before focus instructions added to the summary prompt."""


@dataclass(frozen=True, slots=True)
class LanguagePreset:
    """The texts of one summary language."""

    summary_prompt: str
    acknowledgement: str
    rolling_lead_in: str
    instructions_heading: str


AUTO_LANGUAGE: Final = "auto"
"""``language="auto"``: the texts of the summarised part's language, chosen at each
compaction (:func:`language_of`): Chinese when more than half of its letters are
CJK, else English."""

LANGUAGES: Final = {
    "zh": LanguagePreset(
        DEFAULT_SUMMARY_PROMPT,
        DEFAULT_ACKNOWLEDGEMENT,
        CHINESE_ROLLING_LEAD_IN,
        CHINESE_INSTRUCTIONS_HEADING,
    ),
    "en": LanguagePreset(
        ENGLISH_SUMMARY_PROMPT,
        ENGLISH_ACKNOWLEDGEMENT,
        ENGLISH_ROLLING_LEAD_IN,
        ENGLISH_INSTRUCTIONS_HEADING,
    ),
}
"""``language=`` presets: ``"zh"`` (the specification's texts, the default) and ``"en"``;
``"auto"`` (:data:`AUTO_LANGUAGE`) chooses one of them at each compaction."""

OWN_ACKNOWLEDGEMENTS: Final = (
    *(preset.acknowledgement for preset in LANGUAGES.values()),
    *EARLIER_ACKNOWLEDGEMENTS,
)
"""Every acknowledgement the library writes or wrote: read as its own output
whatever the language in force (``language="auto"`` may change it between rounds)."""
