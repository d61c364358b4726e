"""``profile="agent"``: the defaults an agent loop should use, explicit keywords
winning; ``language="auto"``; and the probe of what stays word for word."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import Action, AsyncCompactor, Compactor, Options
from bareagent_compact.options import AGENT, OPTION_NAMES, PROFILES, Profile
from bareagent_compact.prompts import (
    DEFAULT_ACKNOWLEDGEMENT,
    DEFAULT_SUMMARY_PROMPT,
    ENGLISH_ACKNOWLEDGEMENT,
    ENGLISH_SUMMARY_PROMPT,
    SUMMARY_PREFIX,
    language_of,
)
from bareagent_compact.protocols import Message


def summarise(prompt: object) -> str:
    return "Work went on."


def test_the_agent_profile_turns_on_what_an_agent_loop_needs() -> None:
    derived = Options(profile="agent").derived
    assert derived.language == "auto"
    assert derived.pin_facts is True
    assert derived.keep_user_turns is True
    assert derived.clear_thinking_after_turns == 0
    assert derived.max_message_tokens == Options().derived.max_message_tokens  # on already
    compactor = Compactor(summarise, profile="agent")
    assert (compactor.pin_facts, compactor.keep_user_turns, compactor.language) == (
        True,
        True,
        "auto",
    )
    assert AsyncCompactor(summarise, profile="agent").options == compactor.options


def test_without_a_profile_the_compactor_is_the_specifications() -> None:
    compactor = Compactor(summarise)
    assert compactor.profile is None
    assert (compactor.pin_facts, compactor.keep_user_turns) == (False, False)
    assert compactor.clear_thinking_after_turns is None
    assert compactor.language == "zh"
    assert compactor.system_prompt == DEFAULT_SUMMARY_PROMPT
    assert compactor.acknowledgement == DEFAULT_ACKNOWLEDGEMENT


def test_explicit_keywords_win_over_the_profile() -> None:
    compactor = Compactor(
        summarise,
        profile="agent",
        pin_facts=False,
        language="zh",
        clear_thinking_after_turns=2,
    )
    assert compactor.pin_facts is False
    assert compactor.keep_user_turns is True  # left to the profile
    assert compactor.language == "zh"
    assert compactor.clear_thinking_after_turns == 2
    own = Options(profile=AGENT.replace(clear_thinking_after_turns=None))
    assert own.derived.clear_thinking_after_turns is None and own.derived.pin_facts


def test_a_custom_system_prompt_keeps_choosing_the_language_under_the_profile() -> None:
    compactor = Compactor(summarise, profile="agent", system_prompt="请总结。")
    assert compactor.language == "zh"
    assert compactor.acknowledgement == DEFAULT_ACKNOWLEDGEMENT


def test_an_unknown_profile_is_a_value_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"\['agent'\]"):
        Compactor(summarise, profile="agnet")
    with pytest.raises(TypeError, match="profile must be"):
        Options(profile=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="language must be one of"):
        Profile("mine", language="fr")
    assert sorted(PROFILES) == ["agent"]


def test_the_profile_round_trips_through_replace_and_assignment() -> None:
    options = Options(profile="agent", threshold=3000)
    plain = options.replace(profile=None)
    assert plain == Options(threshold=3000)
    assert plain.derived == Options(threshold=3000).derived
    assert plain.replace(profile="agent") == options
    compactor = Compactor(summarise, threshold=3000)
    compactor.profile = "agent"
    assert compactor.options == options and compactor.pin_facts is True
    compactor.profile = None
    assert compactor.pin_facts is False and compactor.language == "zh"


def test_assigning_every_option_its_own_value_under_the_profile_changes_nothing() -> None:
    compactor = Compactor(summarise, profile="agent", threshold=3000)
    before = compactor.options
    for name in sorted(OPTION_NAMES):
        setattr(compactor, name, getattr(compactor, name))
    assert compactor.options is before
    compactor.profile = None  # what was read back still follows the profile
    assert compactor.pin_facts is False and compactor.clear_thinking_after_turns is None


def test_language_of_counts_cjk_letters_against_all_letters() -> None:
    assert language_of("请修复 parse.py 里面的错误") == "zh"  # 8 CJK of 15 letters
    assert language_of("请修复 parse.py 里的错误") == "en"  # 7 of 14: not more than half
    assert language_of("Fix the bug in 解析") == "en"
    assert language_of("12345 !!!") == "en"


def _conversation(user: str, reply: str) -> list[Message]:
    return [
        {"role": "user", "content": user},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": user},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "?"},
    ]


def _compact(language: str, messages: list[Message]) -> tuple[list[Any], list[Message]]:
    prompts: list[Any] = []

    def provider(prompt: Any) -> str:
        prompts.append(prompt)
        return "摘要" if language_of(str(prompt[1]["content"])) == "zh" else "A summary."

    Compactor(provider, threshold=100_000, language=language)(messages, force=True)
    return prompts, messages


def test_auto_language_writes_the_texts_of_the_summarised_parts_language() -> None:
    english = _conversation("Please refactor the parser " * 20, "Done with the parser " * 20)
    prompts, messages = _compact("auto", english)
    assert prompts[0][0]["content"] == ENGLISH_SUMMARY_PROMPT
    assert messages[1] == {"role": "assistant", "content": ENGLISH_ACKNOWLEDGEMENT}
    chinese = _conversation("请重构解析器的代码" * 20, "解析器已经重构完成" * 20)
    prompts, messages = _compact("auto", chinese)
    assert prompts[0][0]["content"] == DEFAULT_SUMMARY_PROMPT
    assert messages[1] == {"role": "assistant", "content": DEFAULT_ACKNOWLEDGEMENT}
    assert messages[0]["content"].startswith(SUMMARY_PREFIX)


def test_auto_language_reads_the_other_languages_summary_as_its_own() -> None:
    chinese = _conversation("请重构解析器的代码" * 20, "解析器已经重构完成" * 20)
    _compact("auto", chinese)
    chinese[-1:] = _conversation("Now write the tests " * 40, "Tests written " * 40)
    prompts, _ = _compact("auto", chinese)
    assert prompts[0][1]["content"].startswith("The first message below is the summary")


def test_the_async_compactor_takes_the_profile() -> None:
    async def provider(prompt: Any) -> str:
        return "A summary."

    task = "Ship the release notes; never push to main." * 20
    messages = _conversation(task, "Working on it " * 40)
    compactor = AsyncCompactor(provider, profile="agent", threshold=100_000)
    asyncio.run(compactor(messages, force=True))
    assert task in messages[0]["content"]


def test_a_source_no_larger_than_the_user_turns_it_holds_is_not_summarised() -> None:
    task = (
        "Fix the flaky test in tests/test_io.py; never touch the fixtures. It fails one "
        "run in ten on the CI machines, always in the teardown, with a closed file. Keep "
        "the public API as it is, and tell me what the cause was before you change code."
    )
    messages: list[Message] = [
        {"role": "user", "content": task},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read",
                                           "input": {"path": "tests/test_io.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "x = 1\n" * 400}]},
    ]  # fmt: skip
    calls: list[object] = []

    def provider(prompt: object) -> str:
        calls.append(prompt)
        return "Tests."

    result = Compactor(provider, threshold=100, profile="agent", user_turns_tokens=200)(messages)
    assert result.action is Action.NONE and calls == []  # the task alone: nothing to gain
    assert messages[0] == {"role": "user", "content": task}
    plain = Compactor(provider, threshold=100, language="en")(messages)  # the task for 1 line
    assert plain.action is Action.FULL and task not in messages[0]["content"]


def _probe() -> Any:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_probe.py"
    spec = importlib.util.spec_from_file_location("bench_probe", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_probe", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("summariser", ["keeps nothing", "keeps its last paragraph"])
def test_the_probe_keeps_every_kind_word_for_word_within_the_targets(summariser: str) -> None:
    probe = _probe()
    rounds = probe.run_probe(probe.SUMMARISERS[summariser], profile="agent", rounds=3)
    for number, done in enumerate(rounds, 1):
        for kind, (kept, planted) in done.kept.items():
            assert kept >= 0.95 * planted, f"round {number}: {kind} {kept}/{planted}"
        assert done.added_share <= 0.15
        assert done.duplicates == 0
    default = probe.run_probe(probe.SUMMARISERS[summariser], profile=None, rounds=1)
    assert default[0].kept["rules"] == (0, 2)  # what the profile is measured against
