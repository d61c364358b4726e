"""What both transcript stores share: session ids, the line format, the clock, corrupt data.

A snapshot is JSONL text, one message per line as a JSON object in UTF-8 with
non-ASCII kept readable, whichever store holds it (a file, or a database row);
an archive record is one such line. Encoding, decoding and their errors live
here so that the same bytes give the same result, or the same error, from
either store.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import datetime, timedelta, timezone
from typing import Any, Final, TypeAlias

from bareagent_compact._json import has_only_str_keys, log_renamed, with_plain_keys
from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.stores.errors import CorruptTranscriptError
from bareagent_compact.validate import check_name, not_a_dict, not_a_list

__all__ = [
    "DIRECTORY_MODE",
    "FILE_MODE",
    "MAX_SESSION_ID_BYTES",
    "MAX_SESSION_ID_CHARS",
    "MAX_STEM_BYTES",
    "ONE_MICROSECOND",
    "Clock",
    "check_clock",
    "check_flag",
    "check_session_id",
    "clock_time",
    "decode_jsonl",
    "decode_line",
    "encode_archive_record",
    "check_handle",
    "is_handle",
    "matching_record",
    "encode_line",
    "encode_snapshot",
    "file_stem",
    "legacy_stem",
    "log_fallbacks",
    "session_id_of_stem",
    "utc_now",
]

# Encoding warnings keep the logger they have always had, whichever store writes.
logger = logging.getLogger("bareagent_compact.transcripts")

Clock: TypeAlias = Callable[[], datetime]
"""Returns the current time; an aware value is converted to UTC, a naive one is used as is."""

MAX_SESSION_ID_CHARS: Final = 128
"""The longest session id, in characters."""

MAX_SESSION_ID_BYTES: Final = 200
"""The longest session id in UTF-8 bytes, so file names stay under the 255-byte limit."""

MAX_STEM_BYTES: Final = 222
"""The longest file-name form of a session id, so ``{stem}_{timestamp}.jsonl`` fits 255 bytes."""

DIRECTORY_MODE: Final = 0o700
"""The mode of a directory a store creates (transcripts may hold secrets)."""

FILE_MODE: Final = 0o600
"""The mode of a file a store creates."""

ONE_MICROSECOND: Final = timedelta(microseconds=1)

_SEPARATORS: Final = frozenset("/\\")
_NOT_IN_FILE_NAMES: Final = frozenset('<>:"|?*')
_ESCAPED_ASCII: Final = _NOT_IN_FILE_NAMES | _SEPARATORS | {"%"}
_ESCAPES_RE: Final = re.compile(r"(?:%[0-9A-F]{2})+")
_RESERVED_NAMES: Final = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{port}{n}" for port in ("COM", "LPT") for n in "0123456789\u00b9\u00b2\u00b3"}
)
_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")


# -- session ids ------------------------------------------------------------------


def _shown(session_id: str) -> str:
    """A bounded repr for error messages."""
    return repr(session_id[:40] + "...") if len(session_id) > 40 else repr(session_id)


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` (NFC-normalised) if the stores can keep it.

    It must be a non-empty ``str`` of at most 128 characters and 200 UTF-8 bytes,
    of printable characters only (no NUL, control or format characters).
    Anything printable is allowed (``team:alice``, spaces, ``? * " < > |``,
    ``CON``, ``/`` and ``\\``, ``.hidden``, ``..``): the JSONL store names its
    files by :func:`file_stem`, which escapes what a file name cannot hold.
    Raises ``TypeError`` or ``ValueError`` otherwise, before anything touches
    the disk. Both stores apply exactly these rules, so an id
    valid for one is valid for the other.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
    if not session_id:
        raise ValueError("session_id must not be empty")
    if len(session_id) <= MAX_SESSION_ID_CHARS:
        _check_characters(session_id)
        session_id = unicodedata.normalize("NFC", session_id)
    _check_name(session_id)
    file_stem(session_id)
    return session_id


def _check_characters(session_id: str) -> None:
    """Refuse a character that is not printable."""
    for char in session_id:
        if not char.isprintable():
            raise ValueError(
                f"session_id must be printable (no control or format character); "
                f"{char!r} is not allowed in {_shown(session_id)}"
            )


def _check_name(session_id: str) -> None:
    """Refuse an id too long."""
    if len(session_id) > MAX_SESSION_ID_CHARS:
        raise ValueError(
            f"session_id must be at most {MAX_SESSION_ID_CHARS} characters, "
            f"got {len(session_id)}: {_shown(session_id)}"
        )
    if len(session_id.encode("utf-8")) > MAX_SESSION_ID_BYTES:
        raise ValueError(
            f"session_id must be at most {MAX_SESSION_ID_BYTES} bytes in UTF-8, "
            f"got {_shown(session_id)}"
        )


# -- session ids in file names --------------------------------------------------------


def _is_device(name: str) -> bool:
    """Whether Windows reads ``name`` (or ``name.anything``) as a device."""
    return name.split(".", 1)[0].rstrip(" ").upper() in _RESERVED_NAMES


def _was_plain(session_id: str) -> bool:
    """Whether a checked id is a file name as it is (the only ids accepted before
    ids were escaped, named by themselves): none of ``< > : " | ? *``, no path
    separator, not starting with ``.``, no device."""
    return (
        _NOT_IN_FILE_NAMES.isdisjoint(session_id)
        and _SEPARATORS.isdisjoint(session_id)
        and not session_id.startswith(".")
        and not _is_device(session_id)
    )


def _literal(char: str) -> bool:
    """Whether ``char`` stays as it is in a file name: printable ASCII but upper-case
    letters, ``%``, ``/ \\`` and ``< > : " | ? *``; any other character without a
    case that is not a combining mark."""
    if char.isascii():
        return char.isprintable() and not char.isupper() and char not in _ESCAPED_ASCII
    # A combining mark is escaped: left as it is after an escape, it would join
    # the escape's last hex digit when the name is normalised (``%5C`` + U+0301).
    return char.lower() == char == char.upper() and not unicodedata.category(char).startswith("M")


def _escape(char: str) -> str:
    return char if _literal(char) else "".join(f"%{b:02X}" for b in char.encode("utf-8"))


def file_stem(session_id: str) -> str:
    """The name a checked session id gives its files (``{stem}_{timestamp}.jsonl``).

    Every character but lower-case ASCII letters, digits, ASCII punctuation
    other than ``% < > : " | ? * / \\``, and non-ASCII characters without a
    case, is written ``%XX`` per UTF-8 byte (upper-case hex), so distinct ids
    have names that differ even on a case-insensitive file system (``Alice`` is
    ``%41lice``); a leading ``.`` is written ``%2E`` (``..`` is ``%2E.``), and a
    name Windows reads as a device has its first letter escaped (``con`` is
    ``%63on``). :func:`session_id_of_stem` reverses it. An id that
    was a file name as it is and would escape to more than ``MAX_STEM_BYTES``
    is named by itself, as before ids were escaped; any other id that long is
    a ``ValueError``.
    """
    stem = "".join(map(_escape, session_id))
    if stem.startswith("."):  # never hidden, never "." or ".."
        stem = f"%2E{stem[1:]}"
    elif _is_device(stem):
        stem = f"%{ord(stem[0]):02X}{stem[1:]}"
    if len(stem.encode("utf-8")) <= MAX_STEM_BYTES:
        return stem
    if _was_plain(session_id):
        return session_id
    raise ValueError(
        f"session_id is too long for a file name once escaped ({len(stem.encode())} bytes, "
        f"at most {MAX_STEM_BYTES}): {_shown(session_id)}"
    )


def legacy_stem(session_id: str) -> str | None:
    """The name the files of a checked id had before ids were escaped, when that
    differs from :func:`file_stem` (``Alice``, ``café``); ``None`` otherwise."""
    if _was_plain(session_id) and file_stem(session_id) != session_id:
        return session_id
    return None


def _unescape(stem: str) -> str | None:
    """``stem`` with its ``%XX`` runs decoded as UTF-8; ``None`` when they are not."""
    try:
        text = _ESCAPES_RE.sub(
            lambda m: bytes.fromhex(m.group().replace("%", "")).decode("utf-8"), stem
        )
    except UnicodeDecodeError:
        return None
    return None if "%" in _ESCAPES_RE.sub("", stem) else text


def session_id_of_stem(stem: str) -> str | None:
    """The session id a file-name stem denotes, or ``None`` if it names none.

    A stem :func:`file_stem` writes is decoded; any other stem that is itself a
    valid id (a file written before ids were escaped, or by another program)
    is that id.
    """
    stem = unicodedata.normalize("NFC", stem)
    decoded = _unescape(stem)
    if decoded is not None:
        with suppress(ValueError):
            session_id = check_session_id(decoded)
            if file_stem(session_id) == stem:
                return session_id
    try:
        return check_session_id(stem)
    except ValueError:
        return None


# -- the clock --------------------------------------------------------------------


def utc_now() -> datetime:
    """The default clock: now, in UTC."""
    return datetime.now(timezone.utc)


def check_flag(name: str, value: object) -> bool:
    """Refuse an on/off option that is not a ``bool`` (``TypeError``)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value


def check_clock(clock: object) -> None:
    """Refuse a ``clock`` that cannot be called (when a store is made, not at a save)."""
    if not callable(clock):
        raise TypeError(f"clock must be callable, got {type(clock).__name__}")


def clock_time(clock: Clock) -> datetime:
    """The clock's time as a naive value: UTC when the clock says which zone it is in."""
    now = clock()
    if not isinstance(now, datetime):
        raise TypeError(f"clock must return a datetime, got {type(now).__name__}")
    if now.tzinfo is not None:
        now = now.astimezone(timezone.utc).replace(tzinfo=None)
    return now


# -- encoding ---------------------------------------------------------------------


def encode_line(value: Any, fallbacks: Counter[str], renamed: Counter[str]) -> bytes:
    """One JSON line in UTF-8, non-ASCII kept readable.

    Values JSON cannot encode (and dict keys it cannot) become their ``str`` and
    are counted by type in ``fallbacks``. Keys of one dict that JSON would write
    alike (``1`` and ``"1"``) are kept apart by a ``#n`` suffix on the later one,
    counted in ``renamed``. Cyclic or too deeply nested data raises
    ``ValueError``. Unpaired surrogates are written as ``\\uXXXX`` escapes.
    """
    counted: Counter[str] = Counter()
    collided: Counter[str] = Counter()

    def fallback(obj: object) -> str:
        counted[type(obj).__name__] += 1
        return str(obj)

    try:
        if has_only_str_keys(value):
            text = json.dumps(value, ensure_ascii=False, default=fallback)
        else:  # keys JSON would write as text: they may collide with other keys
            plain = with_plain_keys(value, counted, collided, set())
            text = json.dumps(plain, ensure_ascii=False, default=fallback)
    except RecursionError:
        raise ValueError("message content is nested too deeply to encode as JSON") from None
    except ValueError as exc:
        raise ValueError(f"message content cannot be encoded as JSON: {exc}") from None
    fallbacks.update(counted)
    renamed.update(collided)
    return _utf8(text) + b"\n"


def _utf8(text: str) -> bytes:
    """``text`` in UTF-8; unpaired surrogates (only ever inside JSON strings) escaped."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        escaped = _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
        return escaped.encode("utf-8")


def log_fallbacks(
    what: str, session_id: str, fallbacks: Counter[str], renamed: Counter[str]
) -> None:
    """Warn once per write about renamed keys and values written as their ``str``."""
    log_renamed(f"{what} for session {session_id!r}", renamed, logger)
    if fallbacks:
        logger.warning(
            "%s for session %r: %d value(s) JSON cannot encode were written as their str() "
            "(types: %s)",
            what,
            session_id,
            sum(fallbacks.values()),
            ", ".join(sorted(fallbacks)),
        )


def encode_snapshot(messages: Sequence[Message], session_id: str) -> list[bytes]:
    """One JSON line per message of a snapshot, with the encoding fallbacks logged.

    Raises ``TypeError`` for a value that is not a list of dicts, ``ValueError``
    for cyclic or too deeply nested content; nothing is written by either.
    """
    if not isinstance(messages, list | tuple):
        raise not_a_list(messages)
    fallbacks: Counter[str] = Counter()
    renamed: Counter[str] = Counter()
    lines = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise not_a_dict(index, message)
        lines.append(encode_line(message, fallbacks, renamed))
    log_fallbacks("snapshot", session_id, fallbacks, renamed)
    return lines


def encode_archive_record(record: ArchiveRecord) -> tuple[str, bytes]:
    """The checked session id of an archive record and its JSON line.

    Raises ``TypeError`` for a record that is not a dict, ``ValueError`` for one
    without a valid ``session_id`` or with content JSON cannot encode.
    """
    if not isinstance(record, dict):
        raise TypeError(f"archive record must be a dict, got {type(record).__name__}")
    if "session_id" not in record:
        raise ValueError("archive record has no 'session_id'")
    session_id = check_session_id(record["session_id"])
    fallbacks: Counter[str] = Counter()
    renamed: Counter[str] = Counter()
    line = encode_line(record, fallbacks, renamed)
    log_fallbacks("archive record", session_id, fallbacks, renamed)
    return session_id, line


# -- reading an archived record back by its handle ------------------------------------

HANDLE_KEY: Final = "handle"
"""The key of an archive record holding its recall handle (records written before
handles existed have none, and still load)."""


_HANDLE_RE: Final = re.compile(r"[a-z]-[0-9a-f]{12}")


def check_handle(handle: object) -> str:
    """Refuse a handle that is not a non-empty ``str`` (``TypeError`` / ``ValueError``)."""
    return check_name("handle", handle)


def is_handle(handle: str) -> bool:
    """Whether ``handle`` has the form of a recall handle (``r-1a2b3c4d5e6f``): any
    other string names no record, and a store answers ``None`` without reading."""
    return _HANDLE_RE.fullmatch(handle) is not None


def matching_record(
    records: Sequence[ArchiveRecord], session_id: str, handle: str
) -> ArchiveRecord | None:
    """The first record of ``session_id`` whose handle is ``handle``, or ``None``."""
    for record in records:
        if record.get(HANDLE_KEY) == handle and record.get("session_id") == session_id:
            return record
    return None


# -- decoding ---------------------------------------------------------------------


def decode_line(where: object, number: int, raw: bytes | str) -> dict[str, Any]:
    """Parse one line into a dict, or raise ``CorruptTranscriptError`` naming where it is.

    ``where`` names the file (or the database row) and ``number`` the line; the
    message never quotes the line itself.
    """
    prefix = f"corrupt transcript {where}, line {number}"
    if isinstance(raw, str):
        text = raw
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptTranscriptError(f"{prefix}: invalid UTF-8 at byte {exc.start}") from None
    value = _parse_json(prefix, text)
    if not isinstance(value, dict):
        raise CorruptTranscriptError(
            f"{prefix}: expected a JSON object, got {type(value).__name__}"
        )
    return value


def _parse_json(prefix: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptTranscriptError(
            f"{prefix}: invalid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except RecursionError:
        raise CorruptTranscriptError(f"{prefix}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer longer than Python converts
        raise CorruptTranscriptError(f"{prefix}: invalid JSON value ({exc})") from None


def decode_jsonl(where: object, data: bytes | str) -> list[dict[str, Any]]:
    """Every line of a JSONL text as a dict, blank lines skipped (see :func:`decode_line`)."""
    lines: list[bytes | str] = []
    lines.extend(data.split(b"\n") if isinstance(data, bytes) else data.split("\n"))
    found = []
    for number, raw in enumerate(lines, start=1):
        if raw.strip():
            found.append(decode_line(where, number, raw))
    return found
