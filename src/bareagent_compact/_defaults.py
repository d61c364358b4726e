"""Defaults that follow the threshold: a number known not to be chosen.

A budget left at its default (``max_message_tokens``, ``pin_facts_tokens``,
``user_turns_tokens``) follows the threshold; the same number given explicitly is
kept as given. Each such default is the one instance of a subclass of
:class:`RuleDefault`, told apart by its type, and shows its rule in a signature.
"""

from __future__ import annotations

from typing import ClassVar


class RuleDefault(int):
    """An ``int`` default whose ``repr`` is its rule (``RULE`` with the number in
    place of ``{}``), e.g. ``max(4000, threshold // 2)``."""

    __slots__ = ()
    RULE: ClassVar[str] = "{}"

    def __repr__(self) -> str:
        return self.RULE.format(int(self))
