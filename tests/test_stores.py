"""Both transcript stores alike: one codec, one read interface, the same errors, old formats."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import bareagent_compact
from bareagent_compact import sqlstore, stores, transcripts
from bareagent_compact.cli import main
from bareagent_compact.stores import codec
from bareagent_compact.stores import open as stores_open
from bareagent_compact.stores.errors import CorruptTranscriptError, SnapshotNotFoundError
from bareagent_compact.stores.jsonl import JsonlTranscriptManager
from bareagent_compact.stores.sql import SqlTranscriptManager
from conftest import dialogue

DATA = Path(__file__).parent / "data" / "stores"
T0 = datetime(2025, 1, 2, 3, 4, 5, 123456)
KINDS = ("jsonl", "sqlite")


def ticking_clock(start: datetime = T0) -> Callable[[], datetime]:
    moments = iter(start + timedelta(seconds=n) for n in range(1, 10_000))
    return lambda: next(moments)


def history(n: int = 3) -> list[dict[str, Any]]:
    return dialogue(n)


@dataclass
class Kind:
    """One store under test, and how to damage what it holds from outside."""

    name: str
    store: Any
    location: Path

    def replace_line(self, session_id: str, number: int, raw: bytes) -> None:
        """Overwrite line ``number`` of the newest snapshot of ``session_id`` with ``raw``."""
        if self.name == "jsonl":
            path = self.store.snapshots(session_id)[0].path
            lines = path.read_bytes().split(b"\n")
            lines[number - 1] = raw
            path.write_bytes(b"\n".join(lines))
            return
        with closing(sqlite3.connect(self.location)) as db, db:
            seq, body = db.execute(
                "SELECT seq, body FROM bareagent_snapshots WHERE session_id = ?"
                " ORDER BY seq DESC LIMIT 1",
                (session_id,),
            ).fetchone()
            lines = body.encode("utf-8").split(b"\n")
            lines[number - 1] = raw
            joined = b"\n".join(lines)
            try:  # stored as text when it is text, as a BLOB otherwise
                value: str | bytes = joined.decode("utf-8")
            except UnicodeDecodeError:
                value = joined
            db.execute(
                "UPDATE bareagent_snapshots SET body = ? WHERE session_id = ? AND seq = ?",
                (value, session_id, seq),
            )

    def remove_snapshot(self, record: Any) -> None:
        if self.name == "jsonl":
            record.path.unlink()
            return
        with closing(sqlite3.connect(self.location)) as db, db:
            db.execute(
                "DELETE FROM bareagent_snapshots WHERE session_id = ? AND seq = ?",
                (record.session_id, record.seq),
            )

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> None:
        with closing(sqlite3.connect(self.location)) as db, db:
            db.execute(statement, params)


def make_kind(name: str, tmp_path: Path) -> Kind:
    if name == "jsonl":
        location = tmp_path / "transcripts"
        return Kind(name, JsonlTranscriptManager(location, clock=ticking_clock()), location)
    location = tmp_path / "transcripts.db"
    return Kind(name, SqlTranscriptManager(location, clock=ticking_clock()), location)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kind]:
    made = make_kind(request.param, tmp_path)
    yield made
    made.store.close()


# -- corrupt data: one error type, one message, from either store -----------------

CORRUPT_LINES = [
    pytest.param(b"{not json", r"invalid JSON \(Expecting property name", id="not-json"),
    pytest.param(b"[1, 2]", r"expected a JSON object, got list", id="not-an-object"),
    pytest.param(b'"text"', r"expected a JSON object, got str", id="a-string"),
    pytest.param(b'{"a": "\xff\xfe"}', r"invalid UTF-8 at byte 7", id="not-utf8"),
    pytest.param(b"[" * 100_000, r"JSON nested too deeply", id="too-deep"),
    pytest.param(b"1" * 5_000, r"invalid JSON value \(", id="huge-integer"),
]


@pytest.mark.parametrize(("raw", "reason"), CORRUPT_LINES)
def test_a_corrupt_line_is_a_corrupt_transcript_error_naming_where(
    kind: Kind, raw: bytes, reason: str
) -> None:
    kind.store.save(history(3), "s")
    kind.replace_line("s", 2, raw)
    where = (
        str(kind.store.snapshots("s")[0].path) if kind.name == "jsonl" else "session 's' snapshot 1"
    )
    for read in (
        lambda: kind.store.load("s"),
        kind.store.resume,
        lambda: kind.store.load_snapshot(kind.store.snapshots("s")[0]),
    ):
        with pytest.raises(CorruptTranscriptError, match=f", line 2: {reason}") as caught:
            read()
        message = str(caught.value)
        assert isinstance(caught.value, ValueError)
        assert message.startswith("corrupt transcript ") and where in message
        error = caught.value  # no chained JSONDecodeError or UnicodeDecodeError shown
        assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
        assert "\xff" not in message and "not json" not in message  # never the line itself


@pytest.mark.parametrize(("raw", "reason"), CORRUPT_LINES)
def test_the_same_corrupt_line_reads_the_same_from_both_stores(
    tmp_path: Path, raw: bytes, reason: str
) -> None:
    reasons = []
    for name in KINDS:
        made = make_kind(name, tmp_path / name)
        made.store.save(history(3), "s")
        made.replace_line("s", 2, raw)
        with pytest.raises(CorruptTranscriptError) as caught:
            made.store.load("s")
        made.store.close()
        reasons.append(str(caught.value).split(", line ", 1)[1])
    assert reasons[0] == reasons[1]


def test_a_corrupt_archive_line_is_skipped_with_a_warning_in_both_stores(
    kind: Kind, caplog: pytest.LogCaptureFixture
) -> None:
    for content in ("a", "b"):
        kind.store.archive(
            {"session_id": "s", "tool_use_id": "t", "tool_name": "x", "content": content}
        )
    if kind.name == "jsonl":
        path = kind.store.archive_path("s")
        path.write_bytes(path.read_bytes().replace(b'"content": "a"}', b'"content": "a'))
    else:
        kind.sql("UPDATE bareagent_archive SET record = '[1]' WHERE seq = 1")
    with caplog.at_level("WARNING"):
        assert [r["content"] for r in kind.store.load_archive("s")] == ["b"]
    assert "skipping unreadable" in caplog.text


# -- a malformed SQL row is corrupt data too, never a raw Python error ----------------


@pytest.mark.parametrize(
    ("statement", "read"),
    [
        ("UPDATE bareagent_snapshots SET saved_at = 'yesterday'", "snapshots"),
        ("UPDATE bareagent_snapshots SET message_count = 'many'", "snapshots"),
        ("UPDATE bareagent_snapshots SET size_bytes = NULL", "snapshots"),
        ("UPDATE bareagent_sessions SET saved_at = 'yesterday'", "save"),
        ("UPDATE bareagent_meta SET value = 'one'", "load"),
    ],
)
def test_a_malformed_sql_row_is_a_corrupt_transcript_error(
    tmp_path: Path, statement: str, read: str
) -> None:
    made = make_kind("sqlite", tmp_path)
    made.store.save(history(2), "s")
    made.store.close()
    if "size_bytes" in statement:  # NOT NULL: rebuild the table without the constraint
        made.sql("ALTER TABLE bareagent_snapshots RENAME TO old")
        made.sql("CREATE TABLE bareagent_snapshots AS SELECT * FROM old")
    made.sql(statement)
    store = SqlTranscriptManager(made.location, clock=ticking_clock())
    actions: dict[str, Callable[[], object]] = {
        "snapshots": store.snapshots,
        "save": lambda: store.save(history(1), "s"),
        "load": lambda: store.load("s"),
    }
    with pytest.raises(CorruptTranscriptError, match="corrupt transcript"):
        actions[read]()
    store.close()


# -- snapshots that are not there ---------------------------------------------------------


def test_a_missing_snapshot_is_a_snapshot_not_found_error_in_both_stores(kind: Kind) -> None:
    with pytest.raises(SnapshotNotFoundError, match="no transcripts"):
        kind.store.resume()
    kind.store.save(history(2), "s")
    with pytest.raises(SnapshotNotFoundError, match="no transcript for session 'ghost'"):
        kind.store.load("ghost")
    record = kind.store.snapshots("s")[0]
    kind.remove_snapshot(record)
    with pytest.raises(SnapshotNotFoundError) as caught:
        kind.store.load_snapshot(record)
    assert isinstance(caught.value, FileNotFoundError)


def test_the_error_types_keep_their_builtin_bases() -> None:
    assert issubclass(CorruptTranscriptError, ValueError)
    assert issubclass(SnapshotNotFoundError, FileNotFoundError)
    assert stores.CorruptTranscriptError is transcripts.CorruptTranscriptError
    assert sqlstore.SnapshotNotFoundError is SnapshotNotFoundError


# -- session ids: one rule set, part of the store protocol ----------------------------------

SESSION_IDS: list[object] = [
    "demo", "a_b-c.d e", "配置", "e\u0301", "x" * 128, "é" * 100,
    "", ".hidden", "a/b", "a\\b", "a\x00b", "a\u202eb", "CON", "com1.txt", "LPT\u00b9",
    "x" * 129, "é" * 101, 7, None, b"demo",
]  # fmt: skip


def outcome(check: Callable[[object], str], session_id: object) -> tuple[str, str]:
    try:
        return "ok", check(session_id)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("session_id", SESSION_IDS)
def test_both_stores_check_session_ids_by_the_same_rules(
    tmp_path: Path, session_id: object
) -> None:
    jsonl = JsonlTranscriptManager(tmp_path / "j")
    with SqlTranscriptManager(tmp_path / "s.db") as sql:
        found = {
            outcome(check, session_id)
            for check in (
                codec.check_session_id,
                transcripts.check_session_id,
                JsonlTranscriptManager.check_session_id,
                jsonl.check_session_id,
                sql.check_session_id,
            )
        }
    assert len(found) == 1


def test_check_session_id_is_one_function_shared_by_both_stores() -> None:
    assert JsonlTranscriptManager.check_session_id is codec.check_session_id
    assert SqlTranscriptManager.check_session_id is codec.check_session_id
    assert transcripts.check_session_id is stores.check_session_id is codec.check_session_id
    assert codec.check_session_id("e\u0301") == "\u00e9"


# -- the read interface the command line uses ----------------------------------------------


def test_both_stores_read_through_one_interface(kind: Kind) -> None:
    kind.store.save(history(2), "s")
    kind.store.save(history(4), "s")
    kind.store.archive({"session_id": "s", "tool_use_id": "t", "tool_name": "x", "content": "c"})
    store, opened_kind = stores_open.open_store(str(kind.location))
    try:
        assert opened_kind == kind.name
        assert store.list_sessions() == ["s"]
        assert store.check_session_id("s") == "s"
        found = stores_open.snapshots(store, "s")
        assert [len(stores_open.load(store, snap)) for snap in found] == [4, 2]
        assert found[0].record == store.snapshots("s")[0]
        assert found[0].size == len(
            b"".join(codec.encode_snapshot(history(4), "s"))
        )  # the same size in both stores: the JSONL text
        assert [r["content"] for r in store.load_archive("s")] == ["c"]
    finally:
        stores_open.close(store)


def test_a_snapshot_removed_after_listing_is_left_out(tmp_path: Path) -> None:
    store = JsonlTranscriptManager(tmp_path, clock=ticking_clock())
    store.save(history(1), "s")
    store.save(history(2), "s")
    records = store.snapshots("s")
    records[1].path.unlink()
    assert store.snapshot_size(records[1]) is None
    assert [s.record for s in stores_open.snapshots(store, "s")] == records[:1]


def test_a_record_of_one_store_does_not_load_from_the_other(tmp_path: Path) -> None:
    jsonl = JsonlTranscriptManager(tmp_path / "j", clock=ticking_clock())
    with SqlTranscriptManager(tmp_path / "s.db", clock=ticking_clock()) as sql:
        jsonl.save(history(1), "s")
        sql.save(history(1), "s")
        with pytest.raises(TypeError):
            sql.load_snapshot(jsonl.snapshots()[0])  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            jsonl.load_snapshot(sql.snapshots()[0])  # type: ignore[arg-type]


def test_the_jsonl_store_loads_a_snapshot_by_its_record_or_its_path(tmp_path: Path) -> None:
    store = JsonlTranscriptManager(tmp_path, clock=ticking_clock())
    store.save(history(3), "s")
    record = store.snapshots()[0]
    assert store.load_snapshot(record) == store.load_snapshot(record.path) == history(3)
    assert JsonlTranscriptManager.load_snapshot(str(record.path)) == history(3)


# -- stores written in the original formats still load, and still take writes ---------------


@pytest.mark.parametrize("name", KINDS)
def test_stores_written_in_the_original_formats_load_as_they_did(tmp_path: Path, name: str) -> None:
    expected = json.loads((DATA / "v1_expected.json").read_text(encoding="utf-8"))[name]
    later = T0 + timedelta(days=1)
    if name == "jsonl":
        location = tmp_path / "v1_jsonl"
        shutil.copytree(DATA / "v1_jsonl", location)
        store: Any = JsonlTranscriptManager(location, clock=ticking_clock(later))
    else:
        location = tmp_path / "v1.sqlite"
        shutil.copyfile(DATA / "v1.sqlite", location)
        store = SqlTranscriptManager(location, create=False, clock=ticking_clock(later))
    try:
        assert store.list_sessions() == expected["sessions"]
        snaps = store.snapshots()
        assert [
            [
                s.session_id,
                s.timestamp.isoformat(),
                json.dumps(store.load_snapshot(s), ensure_ascii=False),
            ]
            for s in snaps
        ] == expected["snapshots"]
        if name == "sqlite":
            assert [[s.seq, s.messages, s.size] for s in snaps] == expected["records"]
        assert json.dumps(store.load_archive("demo"), ensure_ascii=False) == expected["archive"]
        store.save(history(2), "demo")  # still writable, newest first
        assert store.load("demo") == history(2)
        assert store.list_sessions()[0] == "demo"
    finally:
        store.close()


# -- imports ---------------------------------------------------------------------------------

# Loads the stores without running the package's __init__, to see what they import themselves.
IMPORT_PROBE = """
import importlib.util, sys, types
spec = importlib.util.find_spec("bareagent_compact")
package = types.ModuleType("bareagent_compact")
package.__path__ = list(spec.submodule_search_locations)
sys.modules["bareagent_compact"] = package
import bareagent_compact.stores as stores
import bareagent_compact.stores.jsonl, bareagent_compact.transcripts
stores.CorruptTranscriptError, stores.JsonlTranscriptManager, stores.check_session_id
before = "sqlite3" in sys.modules
stores.SqlTranscriptManager
print(before, "sqlite3" in sys.modules)
"""


def test_the_stores_package_and_the_jsonl_store_do_not_import_sqlite3() -> None:
    package_root = Path(bareagent_compact.__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(package_root)},
    )
    assert done.stdout.split() == ["False", "True"]


def test_the_stores_package_names_resolve_lazily() -> None:
    assert stores.SqlTranscriptManager is sqlstore.SqlTranscriptManager
    assert stores.JsonlTranscriptManager is transcripts.JsonlTranscriptManager
    assert "TranscriptReader" in dir(stores)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        stores.nothing  # noqa: B018


# -- ids real agents use, in both stores and on the command line ----------------------------

AGENT_IDS = ["team:alice", "team:Alice", "CON", "nul.txt", 'a?b*"c"<d>|e', "会话 1", "100%"]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_agent_ids_round_trip_in_both_stores(tmp_path: Path, kind: str) -> None:
    store: Any = (
        JsonlTranscriptManager(tmp_path / "j") if kind == "jsonl"
        else SqlTranscriptManager(tmp_path / "s.db")
    )  # fmt: skip
    try:
        for number, session_id in enumerate(AGENT_IDS):
            store.save([{"role": "user", "content": str(number)}], session_id)
            store.archive({"session_id": session_id, "tool_name": "x", "content": str(number)})
        assert sorted(store.list_sessions()) == sorted(AGENT_IDS)
        for number, session_id in enumerate(AGENT_IDS):
            assert store.load(session_id) == [{"role": "user", "content": str(number)}]
            assert [r["content"] for r in store.load_archive(session_id)] == [str(number)]
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_inspect_and_show_name_a_session_by_its_id_as_given(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = tmp_path / ("j" if kind == "jsonl" else "s.db")
    store: Any = JsonlTranscriptManager(where) if kind == "jsonl" else SqlTranscriptManager(where)
    store.save([{"role": "user", "content": "hi"}], "team:Alice")
    store.close()
    assert main(["inspect", str(where), "--json"]) == 0
    assert [s["session_id"] for s in json.loads(capsys.readouterr().out)["sessions"]] == [
        "team:Alice"
    ]
    assert main(["inspect", str(where)]) == 0
    assert "session team:Alice:" in capsys.readouterr().out
    assert main(["show", "team:Alice", "--store", str(where), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["session_id"] == "team:Alice"
    assert shown["transcript"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "text", ["no handle", "r-0123", "%", "_", "r-%", "x" * 10_000, "\x00", "\ud800", "r-\ud800"]
)
def test_read_archived_of_a_string_that_is_no_handle_is_none_in_both_stores(
    kind: Kind, text: str
) -> None:
    record = {"session_id": "alpha", "tool_use_id": "t0", "tool_name": "bash", "content": "%_"}
    kind.store.archive({**record, "handle": "r-0123456789ab"})
    assert kind.store.read_archived("alpha", text) is None
    assert kind.store.read_archived("alpha", "r-0123456789ab") is not None
