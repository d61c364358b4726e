"""The offline summariser: a provider that needs no model."""

from __future__ import annotations

from typing import Any

import pytest

from bareagent_compact import Action, Compactor, OfflineSummarizer, SummaryProvider
from conftest import tool_round


def sample_history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "请修复 src/app/config.py 里的配置加载错误"},
        *tool_round(
            "1",
            "bash",
            "Traceback (most recent call last):\nKeyError: 'retries'",
            {"command": "pytest"},
        ),
        *tool_round("2", "read_file", "1: import os", {"file_path": "src/app/config.py"}),
        *tool_round("3", "bash", "20 passed", {"command": "pytest -q"}),
        {"role": "assistant", "content": "Fixed: retries now defaults to 3."},
    ]


def summarize(messages: list[dict[str, Any]], **kwargs: Any) -> str:
    summarizer = OfflineSummarizer(**kwargs)
    captured: list[str] = []

    def provider(prompt: list[dict[str, Any]]) -> str:
        captured.append(summarizer(prompt))
        return captured[-1]

    Compactor(provider)(messages, force=True)
    return captured[0]


def test_offline_summary_lists_goals_tools_paths_errors_and_last_statement() -> None:
    summary = summarize(sample_history())
    assert "请修复 src/app/config.py 里的配置加载错误" in summary
    assert "bash×2" in summary and "read_file×1" in summary
    assert "src/app/config.py" in summary
    assert "KeyError: 'retries'" in summary
    assert "Fixed: retries now defaults to 3." in summary


def test_offline_summary_respects_its_length_bound() -> None:
    messages = sample_history()
    messages[1]["content"] = "goal " * 5000
    assert len(summarize(messages, max_chars=300)) <= 300


def test_offline_summary_is_deterministic() -> None:
    assert summarize(sample_history()) == summarize(sample_history())


def test_offline_summary_carries_an_earlier_summary_forward() -> None:
    summarizer = OfflineSummarizer()
    messages = sample_history()
    compactor = Compactor(summarizer)
    compactor(messages, force=True)
    messages += [
        {"role": "user", "content": "now add docs"},
        {"role": "assistant", "content": "ok"},
    ]
    assert compactor(messages, force=True).action is Action.FULL
    summary = messages[1]["content"]
    assert "请修复 src/app/config.py" in summary
    assert "now add docs" in summary
    assert "bash×2" in summary


def test_offline_summarizer_satisfies_the_provider_protocol() -> None:
    provider: SummaryProvider = OfflineSummarizer()
    assert isinstance(
        provider([{"role": "system", "content": "p"}, {"role": "user", "content": "[user]\nhi"}]),
        str,
    )


def test_offline_summarizer_rejects_a_tiny_bound() -> None:
    with pytest.raises(ValueError):
        OfflineSummarizer(max_chars=10)
    with pytest.raises(TypeError):
        OfflineSummarizer(max_chars="big")  # type: ignore[arg-type]
