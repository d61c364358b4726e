"""The fixed texts of full compaction (SPEC 11.2), as named constants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DEFAULT_SUMMARY_PROMPT: Final = (
    "你是一个负责压缩对话上下文的助手。请用中文总结下面的对话历史，内容包括："
    "1. 用户的目标；2. 已完成的工作；3. 关键约束与决定；"
    "4. 重要的文件路径、命令与标识符；5. 继续工作所需的上下文与下一步。"
    "只输出摘要本身，保持简洁、准确，不要编造对话中没有的内容。"
)
"""System prompt of the summary request: a Chinese summary of goal, work done,
constraints, important paths and the context needed to continue."""

SUMMARY_PREFIX: Final = "[Context Compressed]\n"
"""Prefix of the user message that carries the summary in the rebuilt history."""

DEFAULT_ACKNOWLEDGEMENT: Final = "收到，我已理解之前的上下文，继续工作。"
"""The assistant message that follows the summary in the rebuilt history."""

DEFAULT_THRESHOLD: Final = 50000
"""Full compaction runs when the estimate is strictly greater than this."""

ENGLISH_SUMMARY_PROMPT: Final = (
    "You compress the context of a conversation between a user and an AI agent. Summarise "
    "the conversation below in English, covering: 1. the user's goal; 2. the work done so "
    "far; 3. key constraints and decisions; 4. important file paths, commands and "
    "identifiers; 5. the context and next steps needed to continue. Output only the "
    "summary, concise and accurate; do not invent anything that is not in the conversation."
)
"""The ``language="en"`` summary prompt: the same five sections as the default."""

ENGLISH_ACKNOWLEDGEMENT: Final = (
    "Understood. I have the context of the conversation so far and will continue the work."
)
"""The ``language="en"`` assistant message after the summary."""

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
"""``language=`` presets: ``"zh"`` (the specification's texts, the default) and ``"en"``."""
