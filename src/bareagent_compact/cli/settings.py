"""The compactor options a verb's flags name, and the ``replay --compare`` grammar.

``--compare`` takes settings separated by commas; a setting is terms joined by
``+``, each applied in turn to the command line's own options::

    SETTINGS := SETTING ("," SETTING)*
    SETTING  := TERM ("+" TERM)*
    TERM     := "default" | "cache-friendly" | KEY "=" VALUE

``default`` changes nothing, ``cache-friendly`` is ``micro=cache-friendly``.
``KEY`` is one of :data:`_KEYS` (``-`` and ``_`` alike); a number may end in
``k`` (thousands) and hold ``_``; a flag is ``on``/``off`` (or ``true``/``false``,
``yes``/``no``, ``1``/``0``); ``max-message-tokens`` is a number or ``none`` (off).
The setting's label is its text.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from bareagent_compact.cli.common import CliError
from bareagent_compact.options import Options
from bareagent_compact.oversize import DEFAULT_MAX_MESSAGE_TOKENS

MAX_SETTINGS: Final = 8
"""At most this many settings in one ``--compare`` (one colour each on the chart)."""
_FLAGS: Final = {
    "on": True, "true": True, "yes": True, "1": True,
    "off": False, "false": False, "no": False, "0": False,
}  # fmt: skip


def _number(text: str) -> int:
    digits = text.replace("_", "")
    scale = 1000 if digits[-1:].lower() == "k" else 1
    digits = digits[:-1] if scale != 1 else digits
    if not digits.isdigit():
        raise ValueError(f"expected a whole number, got {text!r}")
    return int(digits) * scale


def _flag(text: str) -> bool:
    try:
        return _FLAGS[text.lower()]
    except KeyError:
        raise ValueError(f"expected on or off, got {text!r}") from None


def _limit(text: str) -> int | None:
    """A ``max_message_tokens`` value: ``none`` (off) or a whole number."""
    return None if text.strip().lower() == "none" else _number(text)


def max_message_tokens_arg(text: str) -> int | None:
    """``--max-message-tokens``: a whole number (``,`` and ``_`` allowed, ``k`` for
    thousands) or ``none``."""
    try:
        return _limit(text.replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or none, got {text!r}") from None


_KEYS: Final[dict[str, Callable[[str], object]]] = {
    "threshold": _number,
    "micro": str,
    "keep_recent": _number,
    "keep_tail_tokens": _number,
    "keep_tool_pairs": _flag,
    "pin_facts": _flag,
    "language": str,
    "max_message_tokens": _limit,
}
"""The options a ``--compare`` term may set, each with its value's reader."""


def compactor_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``Compactor`` options the verb's flags give (those left unset are not passed)."""
    options: dict[str, Any] = {
        "threshold": args.threshold,
        "keep_recent": args.keep_recent,
        "keep_tool_pairs": args.keep_tool_pairs,
        "micro": args.micro,
        "pin_facts": args.pin_facts,
        "keep_tail_tokens": args.keep_tail_tokens,
    }
    for name in ("language", "instructions"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    if args.max_message_tokens is not DEFAULT_MAX_MESSAGE_TOKENS:  # else the library's
        options["max_message_tokens"] = args.max_message_tokens
    return options


def checked(options: dict[str, Any]) -> Options:
    """``options`` as the ``Compactor`` reads them; a value it refuses is a usage error."""
    try:
        return Options(**options)
    except (TypeError, ValueError) as exc:
        raise CliError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class Setting:
    """One ``--compare`` setting: its label and the full options it replays with."""

    label: str
    options: dict[str, Any]


def _term(term: str) -> dict[str, object]:
    if term == "default":
        return {}
    if term == "cache-friendly":
        return {"micro": "cache-friendly"}
    key, equals, value = term.partition("=")
    name = key.strip().replace("-", "_")
    if not equals or name not in _KEYS:
        raise ValueError(
            f"unknown term {term!r}: expected default, cache-friendly or KEY=VALUE with KEY "
            f"one of {', '.join(k.replace('_', '-') for k in _KEYS)}"
        )
    try:
        return {name: _KEYS[name](value.strip())}
    except ValueError as exc:
        raise ValueError(f"{term!r}: {exc}") from None


def parse_compare(text: str, base: dict[str, Any]) -> list[Setting]:
    """The settings ``--compare`` names, each ``base`` with its terms applied (checked)."""
    labels = [label.strip() for label in text.split(",")]
    if not all(labels) or len(labels) > MAX_SETTINGS or len(set(labels)) != len(labels):
        raise CliError(
            f"--compare takes 1 to {MAX_SETTINGS} different settings separated by commas, "
            f"got {text!r}"
        )
    settings = []
    for label in labels:
        options = dict(base)
        try:
            for term in label.split("+"):
                options.update(_term(term.strip()))
        except ValueError as exc:
            raise CliError(f"--compare: {exc}") from None
        try:
            checked(options)
        except CliError as exc:
            raise CliError(f"--compare {label!r}: {exc}") from None
        settings.append(Setting(label, options))
    return settings
