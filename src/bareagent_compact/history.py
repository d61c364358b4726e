"""What a compactor remembers of the history between calls (the history cache).

An agent loop calls the compactor at the start of every turn with the same list,
grown by a message or three. Reading it all again each time costs about one
``json.dumps`` of it; this cache keeps container copies of the messages seen last
(dicts and lists copied, strings and numbers shared), so that one C-level ``==``
tells which messages are new or changed, and only those are read again: checked,
weighed (their estimate, in quarters, is kept per message) and looked at by
micro-compaction.

Blind spot: ``==`` cannot see a change of type between equal values (``1`` to
``True`` or ``1.0``, a list inside a message to an equal ``UserList``). A history
holding anything else than dicts, lists, strings, numbers, booleans and ``None``
(an SDK object, a tuple, a message that is not a ``dict``) is not cached: such
calls read everything, as they do without the cache.
"""

from __future__ import annotations

from collections.abc import MutableSequence, Sequence
from itertools import compress, islice, repeat
from operator import is_not, ne
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact._limits import MAX_DEPTH
from bareagent_compact.tokens import messages_quarters, quarters_to_tokens

_LEAVES: Final = frozenset((str, int, float, bool, type(None)))
_DICTS: Final = frozenset((dict,))
_Calls = tuple[tuple[str, str], ...]


class _Opaque(Exception):
    """A value the cache does not copy."""


def _copy(value: Any, depth: int) -> Any:
    """A copy of the dicts and lists in ``value``, everything else shared."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if depth > MAX_DEPTH:
        raise _Opaque
    if kind is dict:
        copy = value.copy()
        for key, item in value.items():
            if type(item) not in _LEAVES:
                copy[key] = _copy(item, depth + 1)
        return copy
    if kind is list:
        return [item if type(item) in _LEAVES else _copy(item, depth + 1) for item in value]
    raise _Opaque


def container_copy(value: Any) -> Any | None:
    """A copy of the dicts and lists in ``value``, everything else shared; ``None``
    when it holds a value this module does not copy (an object, a tuple)."""
    try:
        return _copy(value, 0)
    except _Opaque:
        return None


def _calls_of(message: dict[str, Any]) -> _Calls:
    return tuple((c.call_id, c.name) for c in dialects.calls(message) if c.call_id)


class HistoryCache:
    """Container copies of the last history seen, its weight and its tool calls."""

    __slots__ = (
        "_calls", "_copies", "_gone", "_names", "_names_upto", "_quarters", "_unread",
        "_unweighed", "uncopied",
    )  # fmt: skip

    def __init__(self) -> None:
        self._copies: list[dict[str, Any]] = []
        self._quarters: int | None = None  # the weight of the copies, less _gone, plus _unweighed
        self._gone: list[dict[str, Any]] = []  # copies replaced since, still in the weight
        self._unweighed: set[int] = set()  # indices whose messages are not in the weight yet
        self._calls: list[_Calls | None] = []  # each message's tool calls, once read
        self._unread: set[int] = set()  # indices whose calls are not known yet
        self._names: dict[str, str] | None = None  # of the calls of the first messages
        self._names_upto = 0  # how many messages ``_names`` covers
        self.uncopied: list[int] | None = None
        """After a :meth:`sync` that returned ``None``: the indices of the messages that
        could not be copied (SDK objects among them), when known."""

    @property
    def copies(self) -> list[dict[str, Any]]:
        """The copies, in the order of the history the last :meth:`sync` saw."""
        return self._copies

    @property
    def empty(self) -> bool:
        """True when nothing is held (before the first call, after :meth:`forget`)."""
        return not self._copies

    def forget(self) -> None:
        """Drop everything: the next :meth:`sync` reads every message."""
        self.__init__()  # type: ignore[misc]

    def sync(self, messages: MutableSequence[Any], start: int = 0) -> list[int] | None:
        """Bring the copies up to ``messages``; the indices of the messages that are
        new or differ from the copies (empty: nothing changed), or ``None`` when
        ``messages`` cannot be copied (an SDK object, a tuple: the copies are kept).
        ``start``: the messages before it are known to be unchanged (only what
        follows is compared)."""
        self.uncopied = None
        if not self._readable(messages):
            if type(messages) is list:
                self.uncopied = list(
                    compress(range(len(messages)), map(is_not, map(type, messages), repeat(dict)))
                )
            return None
        copies = self._copies
        known = len(copies)
        common = min(known, len(messages))
        start = min(start, common)
        if start == 0 and common == known == len(messages):
            same = messages == copies  # the steady call: no slices
        else:
            same = messages[start:common] == copies[start:common]
        if same and common == len(messages) == known:
            return []
        if same:
            changed: list[int] = []
        else:
            changed = list(
                compress(
                    range(start, common), map(ne, islice(messages, start, common), copies[start:])
                )
            )
        try:
            replaced = [_copy(messages[index], 0) for index in changed]  # dicts: see _readable
            tail = [_copy(message, 0) for message in messages[common:]]
        except _Opaque:
            self.uncopied = [*changed, *range(common, len(messages))]
            return None  # the copies still stand for the last history seen
        self._leave_weight(changed, common)
        self._drop_calls(changed, common, len(messages))
        for index, copy in zip(changed, replaced, strict=True):
            copies[index] = copy
        del copies[common:]
        copies += tail
        changed.extend(range(common, len(messages)))
        self._unweighed.update(changed)
        return changed

    def _readable(self, messages: MutableSequence[Any]) -> bool:
        """Whether ``messages`` is a list of dicts; another sequence drops the copies,
        a list holding something else keeps them (a message equal to its copy may
        still be another mapping, such as a ``UserDict``)."""
        if type(messages) is not list:
            self.forget()
            return False
        return _DICTS.issuperset(map(type, messages))

    def _leave_weight(self, changed: list[int], common: int) -> None:
        """The copies of changed and removed messages leave the weight (those in it);
        when more has left than is held, the weight is simply read again."""
        if self._quarters is None:
            return
        pending = self._unweighed
        copies = self._copies
        gone = self._gone
        gone += [copies[i] for i in changed if i not in pending]
        gone += [copies[i] for i in range(common, len(copies)) if i not in pending]
        if len(gone) > len(copies):
            self._quarters, self._gone, self._unweighed = None, [], set()

    def _drop_calls(self, changed: list[int], common: int, length: int) -> None:
        """Forget the calls of changed and removed messages; the names map too if
        any of them made a call (or is not known to have made none)."""
        calls = self._calls
        gone = [calls[i] for i in changed]
        gone += calls[common:]
        del calls[common:]
        for index in changed:
            calls[index] = None
        calls += [None] * (length - common)
        self._unread.update(changed, range(common, length))
        if any(c is None or c for c in gone):
            self._names = None

    def tool_names(self, messages: Sequence[Any]) -> dict[str, str]:
        """``dialects.tool_names(messages)``, for the list the last :meth:`sync` saw,
        reading only the messages not read before."""
        calls = self._calls
        unread: Sequence[int] = sorted(i for i in self._unread if i < len(calls))
        self._unread = set()
        names = self._names
        for index in unread:
            found = calls[index] = _calls_of(messages[index])
            if found and index < self._names_upto:
                names = None  # a call amid those read: the last one wins, so in order
        if names is None:
            names = {}
            unread = range(len(calls))
        for index in unread:
            names.update(calls[index] or ())
        self._names, self._names_upto = names, len(calls)
        return names

    def tokens(self, messages: Sequence[Any]) -> int:
        """``estimate_tokens(messages)``, for the list the last :meth:`sync` saw,
        weighing only the messages not weighed before."""
        quarters = self._quarters
        if quarters is None:
            quarters = messages_quarters(list(messages))
        elif self._unweighed or self._gone:
            size = len(messages)
            fresh = [messages[i] for i in sorted(self._unweighed) if i < size]
            quarters += messages_quarters(fresh) - messages_quarters(self._gone)
        self._quarters, self._gone, self._unweighed = quarters, [], set()
        return quarters_to_tokens(quarters)
