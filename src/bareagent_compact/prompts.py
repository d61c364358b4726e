"""The fixed texts of full compaction (SPEC 11.2), as named constants."""

from __future__ import annotations

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
