"""The archive methods both stores share: records written on the caller's thread,
or handed to a writer thread (``write_behind=True``).

A store says how a record is encoded (``_encode_record``) and how encoded records
are made durable, all at once or none (``_write_records``: one append and
``fsync`` per file, or one transaction). The writer thread's module,
:mod:`~bareagent_compact.stores.behind`, is imported only by a store that uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from bareagent_compact.protocols import ArchiveRecord
from bareagent_compact.stores import codec

if TYPE_CHECKING:
    from bareagent_compact.stores.behind import ArchiveWriter, Ticket

E = TypeVar("E")


class ArchiveWrites(Generic[E]):
    """``archive``, ``archive_many``, ``archive_behind``, ``write_behind`` and
    ``flush`` of a store whose encoded records are ``E``."""

    _writer: ArchiveWriter[E] | None

    def _encode_record(self, record: ArchiveRecord) -> E:
        """The encoded record; ``TypeError``/``ValueError`` for one that cannot be."""
        raise NotImplementedError

    def _write_records(self, encoded: Sequence[E]) -> None:
        """Make ``encoded`` durable, every record or none (raising)."""
        raise NotImplementedError

    def _open_writer(self, write_behind: bool, on_exit: Callable[[], object] | None = None) -> None:
        """A writer thread with ``write_behind`` (checked to be a ``bool``); ``on_exit``
        runs on it as it ends."""
        self._writer = None
        if codec.check_flag("write_behind", write_behind):
            from bareagent_compact.stores.behind import ArchiveWriter  # noqa: PLC0415

            self._writer = ArchiveWriter(self._write_records, on_exit=on_exit)

    def archive(self, record: ArchiveRecord) -> None:
        """Archive one truncated tool result (the ``archive=`` hook of ``Compactor``).

        ``record`` is what ``Compactor`` passes its ``archive`` hook: ``session_id``,
        ``tool_use_id``, ``tool_name`` and the original ``content``. It is durable
        (appended and ``fsync``-ed to its session's archive file, or committed)
        before this returns; any failure raises, so the compactor keeps the
        result whole.
        """
        self.archive_many([record])

    def archive_many(self, records: Sequence[ArchiveRecord]) -> None:
        """Archive several records at once (what ``Compactor`` passes when
        ``archive=store.archive``: all the records of one call): one write and one
        ``fsync`` per archive file, or one transaction.

        Every record is encoded before anything is written, so a record that cannot
        be encoded writes none. Any failure raises, and the compactor then keeps
        every one of these results whole. With ``write_behind=True`` the writer
        thread writes them, and this returns once it has.
        """
        encoded = [self._encode_record(record) for record in records]
        if self._writer is None:
            self._write_records(encoded)
        elif encoded:
            from bareagent_compact.stores.behind import known, wait  # noqa: PLC0415

            wait(self._writer.submit([known(item) for item in encoded]))

    def archive_behind(self, records: Sequence[ArchiveRecord], *, block: bool = True) -> Ticket:
        """Hand records to the writer thread (``write_behind=True``) and return at once.

        A record whose content is a ``str`` is encoded by the writer (do not
        change the record after handing it over); any other is encoded here, and
        one that cannot be encoded raises: none is handed over. The returned
        future is done once the writer has made them durable (appended and
        ``fsync``-ed, or committed; in one group with whatever else it holds),
        with one entry per record: ``None`` once it is durable, or the exception
        that kept it from the archive (a failed group is written again record by
        record). Waits while the writer holds ``WRITE_BEHIND_QUEUE`` records, or
        with ``block=False`` raises ``queue.Full``. Without ``write_behind`` the
        records are written now and the future is done when this returns.
        """
        from bareagent_compact.stores.behind import encoders, write_now  # noqa: PLC0415

        items = encoders(self._encode_record, records)
        if self._writer is None:
            return write_now(self._write_records, items)
        return self._writer.submit(items, block=block)

    @property
    def write_behind(self) -> bool:
        """Whether archive records are written by a writer thread (``write_behind=True``);
        ``False`` once a ``BaseException`` stopped that thread (records are then
        written on the caller's thread, until :meth:`close`)."""
        return self._writer is not None and not self._writer.stopped

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the writer thread has written every record handed to it so far
        (``write_behind=True``); ``False`` when ``timeout`` seconds passed first, or
        when the thread stopped (a ``BaseException`` in a write) before writing
        records handed to it: their futures fail with ``OSError``."""
        return self._writer is None or self._writer.flush(timeout)
