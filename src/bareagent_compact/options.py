"""A compactor's configuration as one frozen, validated value.

:class:`Options` holds the constructor's options as given; building one checks
them all (the constructor's ``TypeError`` / ``ValueError``) and computes, in
:func:`derive`, every value that follows from them: the micro-compaction policy
(the ``micro`` preset filled in from the threshold), the summary texts (language
preset, custom prompt) and the token counter. Changing an option builds a new
value with :func:`dataclasses.replace`, so nothing derived can go stale.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

from bareagent_compact.facts import DEFAULT_PIN_FACTS_TOKENS, pin_budget
from bareagent_compact.micro_policy import (
    DEFAULT_CACHE_TTL,
    MICRO_SPEC,
    MicroOptions,
    MicroPolicy,
    check_cache_ttl,
    resolve_micro,
)
from bareagent_compact.oversize import (
    DEFAULT_MAX_MESSAGE_TOKENS,
    check_max_message_tokens,
    message_limit,
)
from bareagent_compact.prompts import (
    AUTO_LANGUAGE,
    DEFAULT_THRESHOLD,
    LANGUAGES,
    LanguagePreset,
    language_of,
)
from bareagent_compact.protocols import (
    AfterCompactHook,
    ArchiveHook,
    BeforeCompactHook,
    Message,
    TokenCounter,
)
from bareagent_compact.serialize import _plain_dicts, render_message, tool_names
from bareagent_compact.summarize import DEFAULT_SUMMARY_INPUT_TOKENS, MIN_BUDGET, check_budget
from bareagent_compact.tokens import estimate_tokens
from bareagent_compact.user_turns import DEFAULT_USER_TURNS_TOKENS, turns_budget
from bareagent_compact.validate import (
    check_int,
    check_summary_content,
    not_a_provider,
    threshold_tokens,
)


class _DefaultLanguage(str):
    """The default ``language``: equal to ``"zh"``, but known not to be chosen, so the
    texts may follow a custom ``system_prompt``'s language instead."""

    __slots__ = ()


DEFAULT_LANGUAGE: Final = _DefaultLanguage("zh")
"""The ``language`` default: ``"zh"``, unless a custom ``system_prompt`` is not Chinese."""

_HAN: Final = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
"""Chinese characters (CJK unified and compatibility ideographs)."""


def text_language(text: str) -> str:
    """``"zh"`` when ``text`` holds a Chinese character, else ``"en"``."""
    return "zh" if _HAN.search(text) else "en"


class RuleValue(int):
    """A derived number that follows its rule (an option left at its default):
    assigning it back to the attribute it was read from changes nothing, whereas
    the same number given as a plain ``int`` is a choice, kept as given."""

    __slots__ = ()


def _ruled(value: int, follows_rule: bool) -> int:
    return RuleValue(value) if follows_rule else value


def _ruled_limit(value: int | None, follows_rule: bool) -> int | None:
    return None if value is None else _ruled(value, follows_rule)


@dataclass(frozen=True, slots=True)
class Profile:
    """A set of defaults for a kind of use: what ``profile=`` names or is given.

    An option left at its default (``None``, or ``language`` not given) takes the
    profile's value; an option given explicitly wins. The one preset is
    :data:`AGENT`; ``AGENT.replace(clear_thinking_after_turns=None)`` is a profile
    of one's own. ``None`` in a profile leaves the option at the library's default.
    """

    name: str
    language: str | None = None
    pin_facts: bool | None = None
    keep_user_turns: bool | None = None
    clear_thinking_after_turns: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError("a Profile's name must be a non-empty str")
        if self.language is not None and self.language not in _LANGUAGE_NAMES:
            raise ValueError(f"language must be one of {_LANGUAGE_NAMES}, got {self.language!r}")
        for flag in ("pin_facts", "keep_user_turns"):
            if getattr(self, flag) not in (None, True, False):
                raise TypeError(f"a Profile's {flag} must be a bool or None")
        if self.clear_thinking_after_turns is not None:
            check_int("clear_thinking_after_turns", self.clear_thinking_after_turns)

    def replace(self, **changes: Any) -> Profile:
        """A new, checked profile with ``changes``."""
        return dataclasses.replace(self, **changes)


_LANGUAGE_NAMES: Final = [*sorted(LANGUAGES), AUTO_LANGUAGE]
"""What ``language=`` takes: a preset's name, or ``"auto"``."""

AGENT: Final = Profile(
    "agent",
    language=AUTO_LANGUAGE,
    pin_facts=True,
    keep_user_turns=True,
    clear_thinking_after_turns=0,
)
"""``profile="agent"``: what an agent loop should use. The summary texts in the
conversation's language, the user's own turns kept verbatim, standing
instructions, paths, URLs, errors and the last request pinned, and thinking of
finished turns cleared (the APIs drop it themselves: only the current tool loop
needs it). See ``docs/configuration.md``."""

PROFILES: Final = {profile.name: profile for profile in (AGENT,)}
"""The profiles ``profile=`` may name; a new one is one more entry."""


def resolve_profile(profile: object) -> Profile | None:
    """``profile`` (``None``, a name of :data:`PROFILES` or a :class:`Profile`) as a
    :class:`Profile` or ``None``; ``ValueError`` naming the known ones, else ``TypeError``."""
    if profile is None or isinstance(profile, Profile):
        return profile
    if not isinstance(profile, str):
        raise TypeError(f"profile must be a str, a Profile or None, got {type(profile).__name__}")
    found = PROFILES.get(profile)
    if found is None:
        raise ValueError(f"profile must be one of {sorted(PROFILES)} or None, got {profile!r}")
    return found


def source_language(source: list[Message]) -> str:
    """The language of the summarised part: ``"zh"`` when more than half of the
    letters of its messages (as the summariser reads them, role headers aside)
    are CJK, else ``"en"``."""
    messages = _plain_dicts(source)
    names = tool_names(messages)
    return language_of("\n".join(render_message(m, names) for m in messages))


@dataclass(frozen=True, slots=True)
class Derived:
    """What follows from the options: resolved micro policy, texts and counter."""

    keep_recent: int
    micro_options: MicroOptions
    system_prompt: str
    acknowledgement: str
    rolling_lead_in: str
    instructions_heading: str
    token_counter: TokenCounter
    custom_counter: bool
    """True when the caller gave a ``token_counter`` (the usage ledger is then off)."""
    pin_facts_tokens: int
    """The pinned block's budget: ``pin_facts_tokens``, or, left at its default,
    ``min(2000, threshold // 10)``."""
    max_message_tokens: int | None
    """The most one text may weigh before it is cut (``None``: off): the option, or,
    left at its default, ``max(4000, threshold // 2)``."""
    background_tokens: int | None = None
    """The count above which a summary starts in the background
    (``floor(background_at * threshold)``); ``None``: off."""
    user_turns_tokens: int = 0
    """The kept user turns' budget (``keep_user_turns``): ``user_turns_tokens``, or,
    left at its default, ``min(20000, threshold // 10)``."""
    language: str = DEFAULT_LANGUAGE
    """The language in force: ``language``, or, left at its default, a custom
    ``system_prompt``'s, else the profile's, else ``"zh"``; ``"auto"``: chosen at
    each compaction from the summarised part (:meth:`texts_for`)."""
    pin_facts: bool = False
    """``pin_facts``, or, left at its default, the profile's (off without one)."""
    keep_user_turns: bool = False
    """``keep_user_turns``, or, left at its default, the profile's (off without one)."""
    clear_thinking_after_turns: int | None = None
    """``clear_thinking_after_turns``, or, left at its default, the profile's."""
    auto_texts: tuple[LanguagePreset, ...] = ()
    """With ``language="auto"``: the texts of each language, by :data:`LANGUAGES`
    order (custom texts in place); else empty."""
    cache_ttl: float = float(DEFAULT_CACHE_TTL)
    """``cache_ttl`` in seconds."""
    threshold: int = DEFAULT_THRESHOLD
    """The absolute threshold in force: ``threshold`` as given (an ``int``), or, a
    ``float``, that share of ``context_window`` (a :class:`RuleValue`)."""

    @property
    def texts(self) -> LanguagePreset:
        """The texts in force when the language is fixed."""
        return LanguagePreset(
            self.system_prompt,
            self.acknowledgement,
            self.rolling_lead_in,
            self.instructions_heading,
        )

    def texts_for(self, source: list[Message]) -> LanguagePreset:
        """The texts of a compaction of ``source``: with ``language="auto"``, those
        of its language (:func:`source_language`), else :attr:`texts`."""
        if not self.auto_texts:
            return self.texts
        return dict(zip(LANGUAGES, self.auto_texts, strict=True))[source_language(source)]


def _check_callable(name: str, value: object, *, optional: bool) -> None:
    if (value is not None or not optional) and not callable(value):
        raise TypeError(f"{name} must be callable, got {type(value).__name__}")


def _check_texts(options: Options) -> None:
    language = options.language
    if not isinstance(language, str) or language not in _LANGUAGE_NAMES:
        raise ValueError(f"language must be one of {_LANGUAGE_NAMES}, got {language!r}")
    for name in ("system_prompt", "acknowledgement", "instructions"):
        text = getattr(options, name)
        if text is not None and not isinstance(text, str):
            raise TypeError(f"{name} must be a str, got {type(text).__name__}")


def check_background_at(value: object) -> float | None:
    """``None`` or a number in ``(0, 1]``, as a ``float``; else ``TypeError`` /
    ``ValueError``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"background_at must be a float or None, got {type(value).__name__}")
    if not 0 < value <= 1:  # NaN fails this too
        raise ValueError(f"background_at must be in (0, 1], got {value!r}")
    return float(value)


def _background_tokens(options: Options, threshold: int) -> int | None:
    share = options.background_at
    return None if share is None else math.floor(share * threshold)


def check_provider(provider: object) -> None:
    """The summarising model must be callable."""
    if not callable(provider):
        raise not_a_provider(provider)


def _check_archive(archive: object) -> None:
    """``None``, a callable taking one record, or a store with an ``archive`` method."""
    if archive is None or callable(archive) or callable(getattr(archive, "archive", None)):
        return
    raise TypeError(
        "archive must be callable or a store with an archive(record) method, got "
        f"{type(archive).__name__}"
    )


def _check_values(options: Options) -> None:
    """Every check of the constructor, in its order, before anything is derived."""
    manager = options.transcript_mgr
    if manager is not None and not callable(getattr(manager, "save", None)):
        raise TypeError(
            "transcript_mgr must have a save(messages, session_id) method, got "
            f"{type(manager).__name__}"
        )
    _check_texts(options)
    threshold_tokens(options.threshold, options.context_window)
    check_int("summary_input_tokens", options.summary_input_tokens, MIN_BUDGET)
    check_int("pin_facts_tokens", options.pin_facts_tokens)
    check_int("keep_tail_tokens", options.keep_tail_tokens)
    check_int("user_turns_tokens", options.user_turns_tokens)
    check_max_message_tokens(options.max_message_tokens)
    for name in ("token_counter", "before_compact", "after_compact"):
        _check_callable(name, getattr(options, name), optional=True)
    _check_archive(options.archive)
    check_background_at(options.background_at)
    if options.clear_thinking_after_turns is not None:
        check_int("clear_thinking_after_turns", options.clear_thinking_after_turns)
    resolve_profile(options.profile)
    check_cache_ttl(options.cache_ttl)
    _check_callable("clock", options.clock, optional=False)
    check_summary_content(options.summary_content)


def _language(options: Options, profile: Profile | None) -> str:
    """The language in force: an explicit ``language`` wins; left at its default,
    a custom ``system_prompt``'s language (Chinese characters or not), else the
    profile's, else the default."""
    language = options.language
    if type(language) is not _DefaultLanguage:
        return language
    if options.system_prompt is not None:
        return text_language(options.system_prompt)
    if profile is not None and profile.language is not None:
        return profile.language
    return language


def _texts(options: Options, language: str) -> LanguagePreset:
    """The summary texts of ``language`` (a preset's name), custom texts in place."""
    preset = LANGUAGES[language]
    prompt, acknowledgement = options.system_prompt, options.acknowledgement
    return LanguagePreset(
        preset.summary_prompt if prompt is None else prompt,
        preset.acknowledgement if acknowledgement is None else acknowledgement,
        preset.rolling_lead_in,
        preset.instructions_heading,
    )


def _flag(given: bool | None, profile: Profile | None, name: str) -> bool:
    """A flag in force: as given, or, left at its default (``None``), the profile's."""
    if given is not None:
        return bool(given)
    value = None if profile is None else getattr(profile, name)
    return bool(value)


def _thinking(options: Options, profile: Profile | None) -> int | None:
    given = options.clear_thinking_after_turns
    if given is not None or profile is None or profile.clear_thinking_after_turns is None:
        return given
    return RuleValue(profile.clear_thinking_after_turns)


def _checked_texts(
    options: Options, language: str
) -> tuple[tuple[LanguagePreset, ...], LanguagePreset]:
    """The texts of every language (``language="auto"``; else none) and the texts
    in force, each system prompt checked against ``summary_input_tokens``: it must
    leave the history its share of every summary request (in the built-in estimate;
    with a token_counter each request is checked too)."""
    auto = language == AUTO_LANGUAGE
    every = tuple(_texts(options, name) for name in LANGUAGES) if auto else ()
    texts = every[-1] if auto else _texts(options, language)
    for checked in every or (texts,):
        prompt = [{"role": "system", "content": checked.summary_prompt}]
        check_budget(options.summary_input_tokens, estimate_tokens(prompt))
    return every, texts


def derive(options: Options) -> Derived:
    """Check ``options`` and compute everything that follows from them (the one place)."""
    _check_values(options)
    threshold = threshold_tokens(options.threshold, options.context_window)
    keep_recent, micro_options = resolve_micro(
        options.micro,
        threshold,
        keep_recent=options.keep_recent,
        min_chars=options.micro_min_chars,
        exclude_tools=options.exclude_tools,
        clear_at_least=options.clear_at_least,
    )
    profile = resolve_profile(options.profile)
    language = _language(options, profile)
    every, texts = _checked_texts(options, language)
    counter = options.token_counter
    return Derived(
        _ruled(keep_recent, options.keep_recent is None),
        micro_options,
        texts.summary_prompt,
        texts.acknowledgement,
        texts.rolling_lead_in,
        texts.instructions_heading,
        estimate_tokens if counter is None else counter,
        counter is not None,
        _ruled(
            pin_budget(options.pin_facts_tokens, threshold),
            options.pin_facts_tokens is DEFAULT_PIN_FACTS_TOKENS,
        ),
        _ruled_limit(
            message_limit(options.max_message_tokens, threshold),
            options.max_message_tokens is DEFAULT_MAX_MESSAGE_TOKENS,
        ),
        _background_tokens(options, threshold),
        _ruled(
            turns_budget(options.user_turns_tokens, threshold),
            options.user_turns_tokens is DEFAULT_USER_TURNS_TOKENS,
        ),
        language,
        _flag(options.pin_facts, profile, "pin_facts"),
        _flag(options.keep_user_turns, profile, "keep_user_turns"),
        _thinking(options, profile),
        every,
        check_cache_ttl(options.cache_ttl),
        _ruled(threshold, isinstance(options.threshold, float)),
    )


@dataclass(frozen=True, slots=True)
class Options:
    """The options of a compactor: every keyword of the constructor but
    ``provider`` and ``session_id`` (see ``docs/configuration.md``).

    ``Compactor(provider, options=Options(threshold=50_000))`` is the same as
    ``Compactor(provider, threshold=50_000)``. ``None`` means "the default",
    resolved in :attr:`derived`, never stored. Building one raises the
    constructor's ``TypeError`` / ``ValueError``; :meth:`replace` gives a new,
    validated value. The flags are stored as ``bool`` and ``exclude_tools`` as a
    ``frozenset``."""

    transcript_mgr: Any = None
    threshold: int | float = DEFAULT_THRESHOLD
    keep_recent: int | None = None
    system_prompt: str | None = None
    acknowledgement: str | None = None
    token_counter: TokenCounter | None = None
    keep_tool_pairs: bool = True
    archive: ArchiveHook | None = None
    require_snapshot: bool = True
    summary_input_tokens: int = DEFAULT_SUMMARY_INPUT_TOKENS
    language: str = DEFAULT_LANGUAGE
    instructions: str | None = None
    rolling_summaries: bool = True
    pin_facts: bool | None = None
    pin_facts_tokens: int = DEFAULT_PIN_FACTS_TOKENS
    keep_tail_tokens: int = 0
    before_compact: BeforeCompactHook | None = None
    after_compact: AfterCompactHook | None = None
    micro: str | MicroPolicy = MICRO_SPEC
    micro_min_chars: int | None = None
    exclude_tools: Iterable[str] | None = None
    clear_at_least: int | None = None
    max_message_tokens: int | None = DEFAULT_MAX_MESSAGE_TOKENS
    background_at: float | None = None
    prune_before_server_compaction: bool = False
    clear_thinking_after_turns: int | None = None
    keep_user_turns: bool | None = None
    user_turns_tokens: int = DEFAULT_USER_TURNS_TOKENS
    profile: str | Profile | None = None
    cache_ttl: float | timedelta = DEFAULT_CACHE_TTL
    clock: Callable[[], float] = time.monotonic
    context_window: int | None = None
    summary_content: str = "str"
    derived: Derived = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        derived = derive(self)
        setattr_ = object.__setattr__
        setattr_(self, "derived", derived)
        for flag in (
            "keep_tool_pairs",
            "require_snapshot",
            "rolling_summaries",
            "pin_facts",
            "prune_before_server_compaction",
            "keep_user_turns",
        ):
            value = getattr(self, flag)
            if value is None and flag in _PROFILE_FLAGS:
                continue  # left to the profile
            if not isinstance(value, int):  # bool, or 0 and 1 as before; never "no" or None
                raise TypeError(f"{flag} must be a bool, got {type(value).__name__}")
            setattr_(self, flag, bool(value))
        if self.background_at is not None:
            setattr_(self, "background_at", float(self.background_at))
        if self.exclude_tools is not None:  # an iterator is read once, here
            setattr_(self, "exclude_tools", derived.micro_options.exclude_tools)

    def replace(self, **changes: Any) -> Options:
        """A new value with ``changes`` (the constructor's keyword names), checked
        and derived again; ``TypeError`` for a name that is no option."""
        unknown = sorted(set(changes) - OPTION_NAMES)
        if unknown:
            raise TypeError(f"unknown option(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **changes)


_PROFILE_FLAGS: Final = frozenset({"pin_facts", "keep_user_turns"})
"""The flags whose default, ``None``, is the profile's value (off without one)."""

OPTION_NAMES: Final = frozenset(
    f.name for f in dataclasses.fields(Options) if f.init
)
"""The names of every option (the constructor's keywords but provider and session_id)."""
