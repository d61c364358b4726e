"""Micro-compaction policies: what ``micro=`` names or is given, and which due
results a policy truncates now (see :mod:`bareagent_compact.micro` for what is due)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, NamedTuple

from bareagent_compact.micro import DEFAULT_KEEP_RECENT, Due, check_keep_recent
from bareagent_compact.tokens import quarters_to_tokens, text_quarters, value_quarters
from bareagent_compact.validate import check_int

logger = logging.getLogger("bareagent_compact.micro")


MICRO_SPEC: Final = "spec"
"""``micro="spec"``: the specification's micro-compaction (the default)."""

MICRO_CACHE_FRIENDLY: Final = "cache-friendly"
"""``micro="cache-friendly"``: the policy :data:`CACHE_FRIENDLY`."""


class MicroOptions(NamedTuple):
    """The opt-in micro-compaction options; the defaults are the specification's behaviour.

    ``min_chars``: results whose text is shorter are never truncated, and no result
    is replaced by a marker that weighs as much as itself (``None``: off).
    ``exclude_tools``: tool names whose results are never truncated.
    ``clear_at_least``: estimated tokens a rewrite must free; below that nothing is
    truncated unless the history is over the threshold (``0``: every turn).
    ``short_over_threshold``: over the threshold (or forced), results shorter than
    ``min_chars`` are truncated too (those their marker shrinks), so that the history
    left is no larger than the specification's would be (the ``cache-friendly``
    policy's).
    """

    min_chars: int | None = None
    exclude_tools: frozenset[str] = frozenset()
    clear_at_least: int = 0
    short_over_threshold: bool = False

    @property
    def is_spec(self) -> bool:
        """True when no option is on: micro-compaction is the specification's."""
        return self.min_chars is None and not self.exclude_tools and not self.clear_at_least


@dataclass(frozen=True, slots=True)
class MicroPolicy:
    """A micro-compaction policy: what ``micro=`` names or is given.

    The presets are instances (:data:`SPEC`, :data:`CACHE_FRIENDLY`); a policy of
    one's own is ``CACHE_FRIENDLY.replace(min_chars=500)`` or a new value. The
    constructor's ``keep_recent``, ``micro_min_chars`` and ``clear_at_least``,
    when given, take the place of the policy's values, and nothing else changes:
    a preset given its own values behaves exactly as the preset.
    """

    name: str
    keep_recent: int
    min_chars: int | None
    clear_fraction: float
    """``clear_at_least`` as a fraction of the compactor's threshold."""
    short_over_threshold: bool = False
    """:attr:`MicroOptions.short_over_threshold`: over the threshold (or forced),
    results shorter than ``min_chars`` are truncated too."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError("a MicroPolicy's name must be a non-empty str")
        check_keep_recent(self.keep_recent)
        if self.min_chars is not None:
            check_int("micro_min_chars", self.min_chars)
        fraction = self.clear_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise TypeError(f"clear_fraction must be a number, got {type(fraction).__name__}")
        if not 0 <= fraction <= 1:  # NaN fails this too
            raise ValueError(f"clear_fraction must be in [0, 1], got {fraction!r}")
        if not isinstance(self.short_over_threshold, bool):
            raise TypeError("short_over_threshold must be a bool")

    def replace(self, **changes: Any) -> MicroPolicy:
        """A new, checked policy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def resolve(
        self,
        threshold: int,
        *,
        keep_recent: object,
        min_chars: object,
        exclude_tools: object,
        clear_at_least: object,
    ) -> tuple[int, MicroOptions]:
        """``keep_recent`` and the :class:`MicroOptions` in force: the options given
        (not ``None``), else this policy's values."""
        keep = self.keep_recent if keep_recent is None else check_keep_recent(keep_recent)
        chars = self.min_chars if min_chars is None else check_int("micro_min_chars", min_chars)
        if clear_at_least is None:
            clear = round(self.clear_fraction * threshold)
        else:
            clear = check_int("clear_at_least", clear_at_least)
        names = check_exclude_tools(exclude_tools)
        return keep, MicroOptions(chars, names, clear, self.short_over_threshold)


SPEC: Final = MicroPolicy(MICRO_SPEC, DEFAULT_KEEP_RECENT, None, 0.0)
"""``micro="spec"``: the specification's micro-compaction."""

CACHE_FRIENDLY: Final = MicroPolicy(
    MICRO_CACHE_FRIENDLY, keep_recent=1, min_chars=2000, clear_fraction=0.3,
    short_over_threshold=True,
)  # fmt: skip
"""``micro="cache-friendly"``: keep the newest result unit whole, leave results under
``min_chars`` whole (and never grow one) until the history is over the threshold,
and rewrite old results only when that frees 0.3 x threshold or the history is over
the threshold (values chosen by measurement, see ``docs/performance.md``)."""

PRESETS: Final = {policy.name: policy for policy in (SPEC, CACHE_FRIENDLY)}
"""The policies ``micro=`` may name; a new preset is one more entry."""

DEFAULT_CACHE_TTL: Final = 300
"""``cache_ttl``: the prompt cache's lifetime in seconds (Anthropic's default, 5
minutes). Once that long has passed since the last recorded request, a policy
that holds results back clears everything due at once (see :func:`select_micro`)."""


def check_cache_ttl(cache_ttl: object) -> float:
    """``cache_ttl`` in seconds: a number or a :class:`~datetime.timedelta`, greater
    than 0 (``math.inf``: never cold); else ``TypeError`` / ``ValueError``."""
    if isinstance(cache_ttl, timedelta):
        seconds = cache_ttl.total_seconds()
    elif isinstance(cache_ttl, bool) or not isinstance(cache_ttl, int | float):
        raise TypeError(
            f"cache_ttl must be seconds (an int or float) or a timedelta, got "
            f"{type(cache_ttl).__name__}"
        )
    else:
        try:
            seconds = float(cache_ttl)
        except OverflowError:  # an int past the largest float
            seconds = float("inf")
    if not seconds > 0:  # NaN fails this too
        raise ValueError(f"cache_ttl must be more than 0 seconds, got {cache_ttl!r}")
    return seconds


def check_exclude_tools(exclude_tools: object) -> frozenset[str]:
    """Validate ``exclude_tools``: a collection of tool names (``str``), not one ``str``."""
    if exclude_tools is None:
        return frozenset()
    if isinstance(exclude_tools, str | bytes) or not isinstance(exclude_tools, Iterable):
        raise TypeError(
            "exclude_tools must be a collection of tool names (e.g. a list of str), got "
            f"{type(exclude_tools).__name__}"
        )
    names = frozenset(exclude_tools)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"exclude_tools must hold str tool names, got {type(name).__name__}")
    return names


def resolve_micro(
    micro: object,
    threshold: int,
    *,
    keep_recent: object,
    min_chars: object,
    exclude_tools: object,
    clear_at_least: object,
) -> tuple[int, MicroOptions]:
    """Check ``micro`` (a preset's name or a :class:`MicroPolicy`) and fill the unset
    options (``None``) from it; returns ``keep_recent`` and the :class:`MicroOptions`."""
    if isinstance(micro, MicroPolicy):
        policy = micro
    elif isinstance(micro, str):
        found = PRESETS.get(micro)
        if found is None:
            raise ValueError(f"micro must be one of {sorted(PRESETS)}, got {micro!r}")
        policy = found
    else:
        raise TypeError(f"micro must be a str or a MicroPolicy, got {type(micro).__name__}")
    return policy.resolve(
        threshold,
        keep_recent=keep_recent,
        min_chars=min_chars,
        exclude_tools=exclude_tools,
        clear_at_least=clear_at_least,
    )


def _freed_quarters(due: Due) -> int:
    """What truncating ``due`` saves, in quarter tokens of the built-in estimate."""
    return value_quarters(due.record["content"]) - text_quarters(due.marker)


def _would_grow(due: Due, freed: int) -> bool:
    """True for a result its marker would not shrink (in estimated weight, and for
    text also in characters)."""
    if freed <= 0:
        return True
    content = due.record["content"]
    return isinstance(content, str) and len(due.marker) >= len(content)


def select_micro(
    planned: Sequence[Due], options: MicroOptions, must_clear: Callable[[], bool]
) -> list[Due]:
    """The planned results micro-compaction truncates now under ``options``.

    Results of excluded tools, and with ``min_chars`` short results and those a
    marker would not shrink, are left whole. With ``clear_at_least`` it is all of
    the rest or none: all when together they free at least that many estimated
    tokens or when ``must_clear()`` says so (the history is over the threshold,
    a full compaction is forced, or the prompt cache has expired: the prefix is
    written again anyway), so the prefix of the history changes rarely and in
    one go. With ``short_over_threshold``, when ``must_clear()`` says so the
    short results go too (all but those a marker would not shrink).
    """
    if options.short_over_threshold and planned:
        if must_clear():
            return _all_shrinking(planned, options.exclude_tools)
        must_clear = _not_over  # asked once per call
    return _select(planned, options, must_clear)


def _select(
    planned: Sequence[Due], options: MicroOptions, must_clear: Callable[[], bool]
) -> list[Due]:
    """:func:`select_micro` with ``min_chars`` applied whatever the count."""
    chosen = _eligible(planned, options)
    if not chosen or (options.min_chars is None and not options.clear_at_least):
        return chosen
    freed = [_freed_quarters(due) for due in chosen]
    if options.min_chars is not None:
        chosen, freed = _shrinking(chosen, freed)
    if not chosen or not options.clear_at_least:
        return chosen
    if quarters_to_tokens(sum(freed)) >= options.clear_at_least or must_clear():
        return chosen
    return []


def _not_over() -> bool:
    return False


def _all_shrinking(planned: Sequence[Due], exclude: frozenset[str]) -> list[Due]:
    """The planned results not of an excluded tool that their marker shrinks."""
    chosen = [due for due in planned if due.record["tool_name"] not in exclude]
    return _shrinking(chosen, [_freed_quarters(due) for due in chosen])[0]


def _eligible(planned: Sequence[Due], options: MicroOptions) -> list[Due]:
    """The planned results not of an excluded tool, nor shorter than ``min_chars``."""
    exclude = options.exclude_tools
    min_chars = options.min_chars
    return [
        due
        for due in planned
        if due.record["tool_name"] not in exclude and (min_chars is None or due.chars >= min_chars)
    ]


def _shrinking(chosen: list[Due], freed: list[int]) -> tuple[list[Due], list[int]]:
    """The results (with what each frees) that their marker shrinks."""
    kept = [
        (due, saved)
        for due, saved in zip(chosen, freed, strict=True)
        if not _would_grow(due, saved)
    ]
    return [due for due, _ in kept], [saved for _, saved in kept]
