"""The plug-ins of a compactor, resolved once: the only module that inspects one.

``archive=`` may be a store itself (``archive=store``), its bound ``archive``
method (``archive=store.archive``, as before), a ``functools.partial`` of that
method with no arguments of its own, or a function of the caller's. The store
behind it says what it can do through small protocols
(:class:`~bareagent_compact.protocols.ArchiveBatcher`,
:class:`~bareagent_compact.protocols.ArchiveReader`,
:class:`~bareagent_compact.protocols.SessionIdChecker`, and a write-behind writer);
:class:`Ports` asks it once, at construction and on every option change.

A wrapper of a store's method, found through ``__wrapped__`` (``functools.wraps``)
or in its closure, keeps recall handles and the session-id check; batching and
write-behind are used only when the store's own method is the archive (or the
store itself is given), since they would skip the wrapper. A function of the
caller's that merely uses a store (holds the store, not its method) is its own
hook: plain records, one call each, as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import cast

from bareagent_compact.protocols import ArchiveHook, ArchiveReader, ArchiveRecord, SessionIdChecker
from bareagent_compact.requests import is_async_callable
from bareagent_compact.validate import check_name

__all__ = [
    "Ports",
    "archive_callable",
]

Behind = Callable[..., "Future[list[BaseException | None]]"]
Batch = Callable[[list[ArchiveRecord]], object]


def _is_store(value: object) -> bool:
    """An object given as ``archive=`` that is not itself the hook: it has an
    ``archive`` method and is not callable."""
    return not callable(value) and callable(getattr(value, "archive", None))


def archive_callable(archive: object) -> ArchiveHook | None:
    """What is called with each record: ``archive``, or a store's ``archive`` method."""
    if archive is None:
        return None
    if _is_store(archive):
        return cast(ArchiveHook, archive.archive)  # type: ignore[attr-defined]
    return cast(ArchiveHook, archive)


def _own_method(archive: object) -> tuple[object, bool] | None:
    """The store whose ``archive`` method ``archive`` is, and whether it is that
    method itself (through no-argument partials), not a wrapper of it."""
    direct = True
    for _ in range(16):  # wrappers of wrappers, never a cycle
        if isinstance(archive, functools.partial):
            if archive.args or archive.keywords:
                return None
            archive = archive.func
            continue
        owner = getattr(archive, "__self__", None)
        if owner is not None:
            # Another method of the store (or any bound method) still reads back
            # and checks ids through its owner; batching only through ``archive``.
            return owner, direct and getattr(archive, "__name__", None) == "archive"
        wrapped = getattr(archive, "__wrapped__", None)
        if wrapped is None:
            return None
        archive, direct = wrapped, False
    return None


def _in_closure(archive: object) -> object | None:
    """A store's bound ``archive`` method that a plain function holds in its
    closure (a wrapper of it), or ``None``."""
    for cell in getattr(archive, "__closure__", None) or ():
        try:
            value: object = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        found = _own_method(value)
        if found is not None and found[1]:
            return value
    return None


def _defined_at(owner: object, name: str) -> int:
    """How far down ``owner``'s class hierarchy ``name`` is defined (-1: on the object)."""
    if name in getattr(owner, "__dict__", ()):
        return -1
    mro = type(owner).__mro__
    return next((depth for depth, cls in enumerate(mro) if name in vars(cls)), len(mro))


def _batch_of(owner: object, archive: object) -> Batch | None:
    many = getattr(owner, "archive_many", None)
    if not callable(many) or is_async_callable(many) != is_async_callable(archive):
        return None
    if _defined_at(owner, "archive_many") > _defined_at(owner, "archive"):
        return None  # a subclass that overrides archive alone keeps having it called
    return cast(Batch, many)


def _behind_of(owner: object) -> Behind | None:
    if getattr(owner, "write_behind", False) is not True:
        return None
    behind = getattr(owner, "archive_behind", None)
    if not callable(behind) or is_async_callable(behind):
        return None
    if _defined_at(owner, "archive_behind") > _defined_at(owner, "archive"):
        return None
    return cast(Behind, behind)


class Ports:
    """The archive hook, the store behind it and the transcript manager, resolved
    from the options once."""

    __slots__ = ("archive", "direct", "store", "transcript_mgr")

    def __init__(self, archive: object, transcript_mgr: object = None) -> None:
        self.transcript_mgr = transcript_mgr
        self.archive = archive_callable(archive)
        """What is called with one record, or ``None``."""
        self.store: object | None = None
        """The store behind the archive, when there is one."""
        self.direct = False
        """Whether the archive is the store's own method (batching and
        write-behind may then be used: they skip nothing)."""
        if archive is None:
            return
        if _is_store(archive):
            self.store, self.direct = archive, True
            return
        found = _own_method(archive)
        if found is None:
            wrapped = _in_closure(archive)
            found = None if wrapped is None else _own_method(wrapped)
            direct = False
        else:
            direct = found[1]
        if found is not None:
            self.store, self.direct = found[0], direct

    @property
    def reader(self) -> ArchiveReader | None:
        """The store when it reads records back by handle (recall)."""
        store = self.store
        if store is not None and callable(getattr(store, "read_archived", None)):
            return cast(ArchiveReader, store)
        return None

    def batch(self) -> Batch | None:
        """The ``archive_many`` to call once with all the records of a call, or
        ``None`` to call the archive record by record."""
        if not self.direct or self.archive is None:
            return None
        return _batch_of(self.store, self.archive)

    def behind(self) -> Behind | None:
        """The ``archive_behind`` of a store opened with ``write_behind=True`` (asked
        every time: a closed store stops writing behind), or ``None``."""
        return _behind_of(self.store) if self.direct else None

    def checkers(self) -> Iterator[SessionIdChecker]:
        """The transcript manager and the archive's store, when they check ids."""
        for owner in (self.transcript_mgr, self.store):
            if callable(getattr(owner, "check_session_id", None)):
                yield cast(SessionIdChecker, owner)

    def check_session_id(self, session_id: object) -> str:
        """``session_id`` as a non-empty ``str`` that the transcript manager and the
        archive's store accept when they can say, so a bad id fails now rather
        than every turn."""
        checked = check_name("session_id", session_id)
        for checker in self.checkers():
            checker.check_session_id(checked)
        return checked
