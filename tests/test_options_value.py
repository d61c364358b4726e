"""Options as one public value: the constructor's keywords, `options=`, `replace`,
and attributes that read back what they are given."""

from __future__ import annotations

import inspect
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import AsyncCompactor, Compactor, Options
from bareagent_compact.options import OPTION_NAMES

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def summarise(prompt: object) -> str:
    return "summary"


def test_options_holds_every_keyword_of_the_constructor_but_provider_and_session_id() -> None:
    parameters = inspect.signature(Compactor).parameters
    keywords = set(parameters) - {"provider", "session_id", "options"}
    assert keywords == OPTION_NAMES
    for name in OPTION_NAMES:
        default = next(f.default for f in fields(Options) if f.name == name)
        assert parameters[name].default is default, name


def test_the_async_compactor_takes_the_same_options() -> None:
    assert inspect.signature(AsyncCompactor).parameters == inspect.signature(Compactor).parameters


def test_the_options_keyword_and_the_keyword_form_are_equivalent() -> None:
    chosen = {"threshold": 5000, "micro": "cache-friendly", "language": "en", "pin_facts": True}
    by_keywords = Compactor(summarise, **chosen)
    by_value = Compactor(summarise, options=Options(**chosen))
    assert by_value.options == by_keywords.options
    assert by_value.micro_options == by_keywords.micro_options
    assert by_value.acknowledgement == by_keywords.acknowledgement
    copy = Compactor(summarise, options=by_keywords.options)
    assert copy.options is by_keywords.options


def test_options_and_a_keyword_at_once_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="threshold given with options="):
        Compactor(summarise, threshold=10, options=Options())
    with pytest.raises(TypeError, match="options must be an Options"):
        Compactor(summarise, options={"threshold": 10})  # type: ignore[arg-type]


def test_replace_takes_the_constructor_keywords_and_validates() -> None:
    options = Options(threshold=10_000)
    smaller = options.replace(threshold=2000)
    assert smaller.threshold == 2000 and options.threshold == 10_000
    assert smaller.derived.max_message_tokens == 4000
    with pytest.raises(TypeError, match="unknown option"):
        options.replace(treshold=2000)
    with pytest.raises(ValueError):
        options.replace(threshold=-1)


def test_assigning_options_configures_as_the_constructor_does() -> None:
    compactor = Compactor(summarise)
    compactor.options = Options(threshold=1234, language="en")
    assert compactor.threshold == 1234
    assert compactor.options.language == "en"


def _every_setting() -> list[dict[str, Any]]:
    return [
        {},
        {"micro": "cache-friendly"},
        {"system_prompt": "Summarise the work so far."},
        {"threshold": 100_000, "pin_facts": True},
        {"token_counter": len, "background_at": None},
    ]


@pytest.mark.parametrize("setting", _every_setting())
def test_assigning_every_option_its_own_value_changes_nothing(setting: dict[str, Any]) -> None:
    compactor = Compactor(summarise, **setting)
    before = compactor.options
    derived = before.derived
    for name in sorted(OPTION_NAMES):
        setattr(compactor, name, getattr(compactor, name))
    assert compactor.options is before
    assert compactor.options.derived == derived


def test_a_derived_value_assigned_back_keeps_following_its_rule() -> None:
    compactor = Compactor(summarise, threshold=10_000)
    compactor.pin_facts_tokens = compactor.pin_facts_tokens  # 1000, from the threshold
    compactor.threshold = 50_000
    assert compactor.pin_facts_tokens == Compactor(summarise, threshold=50_000).pin_facts_tokens
    preset = Compactor(summarise, micro="cache-friendly")
    preset.keep_recent = preset.keep_recent
    preset.micro = "spec"
    assert preset.keep_recent == Compactor(summarise).keep_recent
    english = Compactor(summarise, system_prompt="Summarise the work so far.")
    english.acknowledgement = english.acknowledgement
    chinese = "请总结之前的工作。"
    english.system_prompt = chinese
    assert english.acknowledgement == Compactor(summarise, system_prompt=chinese).acknowledgement


def test_the_signature_shows_the_rule_of_max_message_tokens() -> None:
    assert "max(4000, threshold // 2)" in str(inspect.signature(Compactor))


def _documented_options() -> dict[str, str]:
    """The rows of docs/configuration.md's option table: name -> default cell."""
    rows = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\|\s*`(\w+)`\s*\|\s*([^|]*)\|", line)
        if match:
            rows[match.group(1)] = match.group(2).strip()
    return rows


def test_the_configuration_table_lists_every_option() -> None:
    documented = _documented_options()
    missing = sorted(OPTION_NAMES - set(documented))
    assert not missing, f"docs/configuration.md lacks rows for {missing}"


def test_a_plain_int_equal_to_the_derived_value_is_a_choice_kept_as_given() -> None:
    compactor = Compactor(summarise)  # keep_recent follows the spec preset: 3
    compactor.keep_recent = 3  # a choice, not the value read back
    compactor.micro = "cache-friendly"
    assert compactor.keep_recent == 3
    followed = Compactor(summarise)
    followed.keep_recent = followed.keep_recent
    followed.micro = "cache-friendly"
    assert followed.keep_recent == 1
