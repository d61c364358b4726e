"""Write-behind for the stores' archives: records written off the caller's thread.

A store opened with ``write_behind=True`` hands the records to an
:class:`ArchiveWriter`: one thread per store that takes everything queued,
encodes it (a record whose content is a list of blocks is encoded on the
caller's thread, before anything can change it), writes it with one group
commit (one ``fsync`` per archive file, one transaction) and reports each
record's outcome on the :class:`~concurrent.futures.Future` its submission
got. The queue is bounded: a submission waits (or, asked not to block, raises
``queue.Full``) while ``WRITE_BEHIND_QUEUE`` records wait to be written.

The thread starts on the first submission and ends after ``IDLE_SECONDS``
without work, or on ``close()``; ``flush()`` waits for what is queued, and
every writer still holding records is flushed at interpreter exit. A child
process forked while records were queued does not write them (the parent
does): their futures fail there, so the child's compactor keeps those results
whole and archives them again.

A ``BaseException`` in a write (``SystemExit``, ``CancelledError``) stops the
thread: every record it held fails (``OSError``, the exception as its cause), an
error is logged, ``flush()`` answers ``False`` and later submissions are written
on the caller's thread, until ``close()`` (which answers ``False`` too) lets a
later submission start a new thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any, Final, Generic, TypeAlias, TypeVar

from bareagent_compact.protocols import ArchiveRecord

__all__ = [
    "IDLE_SECONDS",
    "WRITE_BEHIND_QUEUE",
    "ArchiveWriter",
    "Ticket",
    "commit",
    "encoders",
    "known",
    "wait",
    "write_now",
]

logger = logging.getLogger("bareagent_compact.transcripts")

WRITE_BEHIND_QUEUE: Final = 1024
"""How many records may wait for the writer; a submission beyond that waits."""

IDLE_SECONDS: Final = 60.0
"""How long the writer thread waits for work before it ends (the next submission
starts a new one)."""

E = TypeVar("E")

Ticket: TypeAlias = "Future[list[BaseException | None]]"
"""What a submission gets: done once every record of it was written or failed,
with one entry per record (``None``: durable; else the exception)."""

_Job: TypeAlias = "tuple[Future[list[BaseException | None]], list[Callable[[], E]]]"

_WRITERS: Final[weakref.WeakSet[ArchiveWriter[Any]]] = weakref.WeakSet()


class ArchiveWriter(Generic[E]):
    """A thread writing encoded records with ``write`` (all of a group at once, or
    raising for all), in the order they were submitted; ``on_exit`` runs on the
    thread as it ends (to release what it opened)."""

    def __init__(
        self,
        write: Callable[[list[E]], object],
        *,
        limit: int = WRITE_BEHIND_QUEUE,
        idle: float = IDLE_SECONDS,
        on_exit: Callable[[], object] | None = None,
    ) -> None:
        self._write = write
        self._on_exit = on_exit
        self._limit = limit
        self._idle = idle
        self._fresh_state()
        _WRITERS.add(self)

    def _fresh_state(self) -> None:
        self._changed = threading.Condition(threading.Lock())
        self._jobs: list[_Job[E]] = []  # submitted, not yet taken
        self._taken: list[_Job[E]] = []  # the group being written
        self._queued = 0  # records submitted and not yet reported
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._stopped: BaseException | None = None  # what ended the thread, when it died

    def submit(self, items: list[Callable[[], E]], *, block: bool = True) -> Ticket:
        """Queue records (each as the function that encodes it, see :func:`encoders`);
        their future. Waits while the queue is full, or raises ``queue.Full`` when
        ``block`` is false."""
        ticket: Ticket = Future()
        with self._changed:
            while self._queued and self._queued + len(items) > self._limit:
                if not block:
                    raise queue.Full
                self._changed.wait()
            direct = self._stopped is not None
            if not direct:
                self._queue(ticket, items)
        if direct:
            commit(self._write, [(ticket, items)])
        return ticket

    def _queue(self, ticket: Ticket, items: list[Callable[[], E]]) -> None:
        """Hold a submission for the thread (holding the lock), starting it when needed."""
        self._jobs.append((ticket, items))
        self._queued += len(items)
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="bareagent-archive-writer", daemon=True
            )
            self._thread.start()
        self._changed.notify_all()

    @property
    def stopped(self) -> bool:
        """Whether a ``BaseException`` stopped the thread (records are written on the
        caller's thread until :meth:`close`)."""
        with self._changed:
            return self._stopped is not None

    @property
    def pending(self) -> int:
        """Records submitted and not yet written (or failed)."""
        with self._changed:
            return self._queued

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record submitted so far is written (or failed); ``False``
        when ``timeout`` seconds passed first, or when the thread stopped before
        writing records handed to it (see :attr:`stopped`)."""
        with self._changed:
            drained = self._changed.wait_for(lambda: not self._queued, timeout)
            return drained and self._stopped is None

    def close(self, timeout: float | None = None) -> bool:
        """Flush, then end the thread (a later submission starts a new one, also
        after the thread :attr:`stopped`); ``False`` as :meth:`flush` says."""
        drained = self.flush(timeout)
        with self._changed:
            thread = self._thread
            self._stopping = thread is not None
            self._stopped = None
            self._changed.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return drained

    def _run(self) -> None:
        try:
            self._work()
        except BaseException as exc:  # reported on every record it held
            self._stop(exc)
        finally:
            if self._on_exit is not None:
                self._on_exit()

    def _stop(self, cause: BaseException) -> None:
        """The thread ends on ``cause``: fail every record it held, and write later
        submissions on the caller's thread."""
        logger.error(
            "the archive writer thread stopped (%r); records handed to it are not "
            "written, later ones are written on the caller's thread",
            cause,
            exc_info=cause,
        )
        error = OSError(f"the archive writer thread stopped ({cause!r}) before writing this record")
        error.__cause__ = cause
        with self._changed:
            jobs = self._taken + self._jobs
            self._jobs, self._taken, self._queued = [], [], 0
            self._thread, self._stopping, self._stopped = None, False, cause
            self._changed.notify_all()
        _fail(jobs, error)

    def _work(self) -> None:
        while True:
            with self._changed:
                if not self._await_work():
                    return
                jobs, self._jobs = self._jobs, []
                self._taken = jobs
            commit(self._write, jobs)  # a BaseException leaves them taken: _stop fails them
            with self._changed:
                self._queued -= sum(len(items) for _, items in jobs)
                self._taken = []
                self._changed.notify_all()

    def _await_work(self) -> bool:
        """Wait (holding the lock) for jobs; ``False`` when the thread is to end:
        nothing queued and closed, or idle for ``idle`` seconds."""
        while not self._jobs:
            if self._stopping or (not self._changed.wait(self._idle) and not self._jobs):
                self._thread, self._stopping = None, False
                return False
        return True

    def _forked(self) -> None:
        """In a forked child: the parent writes what was queued; it fails here."""
        jobs = self._taken + self._jobs
        self._fresh_state()
        _fail(jobs, OSError("queued in the parent process before a fork"))


def _fail(jobs: list[_Job[E]], error: Exception) -> None:
    """Fail every ticket of ``jobs`` not done yet with ``error``."""
    for ticket, _ in jobs:
        if ticket.done():
            continue
        if ticket.running() or ticket.set_running_or_notify_cancel():
            ticket.set_exception(error)


def commit(write: Callable[[list[E]], object], jobs: list[_Job[E]]) -> None:
    """Encode the records of ``jobs``, write them in one group and report each; when
    the group fails and held more than one, each is written on its own, so that
    one record the store refuses fails alone."""
    live = [job for job in jobs if job[0].set_running_or_notify_cancel()]
    encoded = [_encode(items) for _, items in live]
    group = [value for values, _ in encoded for value in values if value is not None]
    failure = _attempt(write, group) if group else None
    if failure is not None:
        _retry(write, encoded, failure, len(group))
    for (ticket, _), (_, errors) in zip(live, encoded, strict=True):
        ticket.set_result(errors)


def _encode(items: list[Callable[[], E]]) -> tuple[list[E | None], list[BaseException | None]]:
    """Each item's encoded record, or ``None`` and the exception encoding it raised."""
    values: list[E | None] = []
    errors: list[BaseException | None] = []
    for item in items:
        try:
            values.append(item())
            errors.append(None)
        except Exception as exc:
            values.append(None)
            errors.append(exc)
    return values, errors


def _retry(
    write: Callable[[list[E]], object],
    encoded: list[tuple[list[E | None], list[BaseException | None]]],
    failure: BaseException,
    size: int,
) -> None:
    """After a failed group of ``size`` records: its ``failure`` for each, or when
    it held more than one, what writing each alone gave."""
    if size > 1:
        logger.info("writing %d archive records failed; writing them one by one", size)
    for values, errors in encoded:
        for position, value in enumerate(values):
            if value is not None:
                errors[position] = failure if size == 1 else _attempt(write, [value])


def encoders(
    encode: Callable[[ArchiveRecord], E], records: Sequence[ArchiveRecord]
) -> list[Callable[[], E]]:
    """What encodes each record: on the writer's thread when its content is a
    ``str`` (which nothing can change meanwhile), else now (raising as ``encode``
    does), so that later edits of a list of blocks do not reach the archive."""
    found: list[Callable[[], E]] = []
    for record in records:
        if isinstance(record, dict) and type(record.get("content")) is str:
            found.append(partial(encode, record))
        else:
            found.append(known(encode(record)))
    return found


def known(value: E) -> Callable[[], E]:
    """An encoder of a record encoded already."""
    return lambda: value


def write_now(write: Callable[[list[E]], object], items: list[Callable[[], E]]) -> Ticket:
    """What :meth:`ArchiveWriter.submit` gives, written on the caller's thread."""
    ticket: Ticket = Future()
    commit(write, [(ticket, items)])
    return ticket


def wait(ticket: Ticket) -> None:
    """Wait for a submission to be written; raise the first record's failure."""
    for error in ticket.result():
        if error is not None:
            raise error


def _attempt(write: Callable[[list[E]], object], group: list[E]) -> BaseException | None:
    try:
        write(group)
    except Exception as exc:
        return exc
    return None


def _flush_all() -> None:
    """At exit: write what every writer still holds."""
    for writer in list(_WRITERS):
        writer.close()


def _after_fork() -> None:
    for writer in list(_WRITERS):
        writer._forked()


atexit.register(_flush_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
