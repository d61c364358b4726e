"""SqlTranscriptManager on sqlite3 (always) and on a real PostgreSQL server (when installed).

The PostgreSQL server is started for this module from the system's binaries
(``initdb`` and ``pg_ctl`` on a temporary directory and a free localhost port),
as an unprivileged user when the tests run as root; the tests that need it are
skipped with a message saying what is missing.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import pwd
import random
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import bareagent_compact
from bareagent_compact import Compactor, SqlTranscriptManager
from bareagent_compact.cli import main
from bareagent_compact.sqlstore import SCHEMA_VERSION, SqlSnapshot, convert_placeholders
from bareagent_compact.stores.errors import CorruptTranscriptError, SnapshotNotFoundError
from conftest import dialogue

WRITERS = 4
SAVES = 400
KILLS = 4

# Opens the store a target string names, in the tests and in child processes.
OPEN_STORE = """
from bareagent_compact.sqlstore import SqlTranscriptManager

def open_store(target):
    kind, _, where = target.partition(":")
    if kind == "sqlite":
        return SqlTranscriptManager(where)
    import psycopg
    return SqlTranscriptManager(lambda: psycopg.connect(where))
"""
namespace: dict[str, Any] = {}
exec(OPEN_STORE, namespace)
open_store: Callable[[str], SqlTranscriptManager] = namespace["open_store"]


def child_env() -> dict[str, str]:
    """Make children import the very package under test, installed or not."""
    package_root = str(Path(bareagent_compact.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


# -- a PostgreSQL server from the system's binaries ---------------------------


def postgres_bin() -> Path | None:
    """The directory holding initdb and pg_ctl: PATH first, then Debian's layout."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    return Path(candidates[-1]).parent if candidates else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    """A throw-away PostgreSQL server; yields the conninfo of its ``postgres`` database."""
    pytest.importorskip(
        "psycopg",
        reason="PostgreSQL tests skipped: the psycopg driver is not installed "
        "(pip install '.[postgres]')",
    )
    bindir = postgres_bin()
    if bindir is None:
        pytest.skip(
            "PostgreSQL tests skipped: no initdb/pg_ctl on PATH or under "
            "/usr/lib/postgresql/*/bin (install Debian's postgresql package)"
        )
    run_as: dict[str, Any] = {}
    base = Path(tempfile.mkdtemp(prefix="bareagent-pg-"))
    if os.geteuid() == 0:  # initdb and postgres refuse to run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            user = pwd.getpwnam("nobody")
        os.chown(base, user.pw_uid, user.pw_gid)
        run_as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    data, port = base / "data", free_port()
    try:
        subprocess.run(
            [bindir / "initdb", "-D", data, "-U", "bareagent", "--auth=trust",
             "-E", "UTF8", "--no-locale", "--no-sync"],
            check=True, capture_output=True, cwd=base, **run_as,
        )  # fmt: skip
        options = (
            f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -F "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=30"
        )
        subprocess.run(
            [bindir / "pg_ctl", "-D", data, "-o", options, "-l", base / "log", "-w", "start"],
            check=True, capture_output=True, cwd=base, **run_as,
        )  # fmt: skip
    except subprocess.CalledProcessError as exc:
        log = (base / "log").read_text(errors="replace") if (base / "log").exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"PostgreSQL did not start: {exc.stderr.decode(errors='replace')}{log}")
    try:
        yield f"host=127.0.0.1 port={port} user=bareagent dbname=postgres"
    finally:
        subprocess.run(
            [bindir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
            capture_output=True, cwd=base, check=False, **run_as,
        )  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)


_databases = iter(range(1, 10_000))


def fresh_pg_database(server: str) -> str:
    psycopg = importlib.import_module("psycopg")
    name = f"t{os.getpid()}_{next(_databases)}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return server.replace("dbname=postgres", f"dbname={name}")


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store: ``sqlite:PATH`` or ``postgresql:CONNINFO``."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'store' / 'transcripts.db'}"
    server = request.getfixturevalue("pg_server")
    return f"postgresql:{fresh_pg_database(server)}"


@pytest.fixture
def store(target: str) -> Iterator[SqlTranscriptManager]:
    with open_store(target) as mgr:
        yield mgr


def history(n: int, tag: str = "") -> list[dict[str, Any]]:
    return dialogue(n, lambda k: f"{tag}第{k}条 message {k}")


# -- the JsonlTranscriptManager methods, on both databases ----------------------


def test_save_then_load_returns_the_newest_snapshot_of_each_session(
    store: SqlTranscriptManager,
) -> None:
    first = store.save(history(3, "a"), "alpha")
    store.save(history(5, "b"), "beta")
    newest = store.save(history(4, "a"), "alpha")
    assert isinstance(first, SqlSnapshot)
    assert (first.seq, newest.seq) == (1, 2)
    assert newest.messages == 4 and newest.size > first.size > 0
    assert store.load("alpha") == history(4, "a")
    assert store.load("beta") == history(5, "b")
    assert store.list_sessions() == ["alpha", "beta"]
    assert store.get_latest_session() == "alpha"
    assert store.resume() == history(4, "a")
    assert store.resume("beta") == history(5, "b")


def test_snapshots_are_newest_first_and_each_loads_by_its_record(
    store: SqlTranscriptManager,
) -> None:
    for n in (2, 3, 4):
        store.save(history(n), "s")
    store.save(history(1), "other")
    records = store.snapshots("s")
    assert [r.seq for r in records] == [3, 2, 1]
    assert [store.load_snapshot(r) for r in records] == [history(4), history(3), history(2)]
    everything = store.snapshots()
    assert everything[0].session_id == "other"
    assert [r.timestamp for r in everything] == sorted(
        (r.timestamp for r in everything), reverse=True
    )


def test_missing_sessions_raise_file_not_found_like_the_jsonl_store(
    store: SqlTranscriptManager,
) -> None:
    with pytest.raises(FileNotFoundError, match="no transcript for session 'ghost'"):
        store.load("ghost")
    with pytest.raises(FileNotFoundError, match="no transcripts"):
        store.resume()
    assert store.list_sessions() == [] and store.get_latest_session() is None
    gone = SqlSnapshot("ghost", datetime(2025, 1, 1), 7, 1, 10)
    with pytest.raises(FileNotFoundError, match="no snapshot 7"):
        store.load_snapshot(gone)
    with pytest.raises(SnapshotNotFoundError):
        store.load_snapshot(gone)


def test_a_corrupt_stored_line_is_a_corrupt_transcript_error_on_both_databases(
    target: str, store: SqlTranscriptManager
) -> None:
    store.save(history(3), "s")
    kind, _, where = target.partition(":")
    query = "UPDATE bareagent_snapshots SET body = %s WHERE session_id = %s"
    body = '{"role": "user"}\n{"role": \n'
    if kind == "sqlite":
        with closing(sqlite3.connect(where)) as db, db:
            db.execute(query.replace("%s", "?"), (body, "s"))
    else:
        psycopg = importlib.import_module("psycopg")
        with psycopg.connect(where, autocommit=True) as db:
            db.execute(query, (body, "s"))
    with pytest.raises(
        CorruptTranscriptError, match="session 's' snapshot 1, line 2: invalid JSON"
    ):
        store.load("s")
    with pytest.raises(ValueError, match="line 2"):
        store.load_snapshot(store.snapshots("s")[0])


def test_archive_keeps_records_in_order_and_apart_from_snapshots(
    store: SqlTranscriptManager,
) -> None:
    for i in range(3):
        store.archive(
            {"session_id": "s", "tool_use_id": f"t{i}", "tool_name": "bash", "content": "数据" * i}
        )
    assert [r["tool_use_id"] for r in store.load_archive("s")] == ["t0", "t1", "t2"]
    assert store.load_archive("s")[2]["content"] == "数据数据"
    assert store.load_archive("none") == []
    assert store.list_sessions() == []  # an archive alone is not a session with snapshots


def test_bad_arguments_raise_before_anything_is_written(store: SqlTranscriptManager) -> None:
    with pytest.raises(ValueError, match="must be printable"):
        store.save(history(1), "a\x00b")
    with pytest.raises(TypeError, match="messages must be a list"):
        store.save("hello", "s")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"messages\[1\] must be a dict"):
        store.save([{"role": "user"}, "x"], "s")  # type: ignore[list-item]
    cyclic: dict[str, Any] = {"role": "user"}
    cyclic["content"] = [cyclic]
    with pytest.raises(ValueError, match="cannot be encoded"):
        store.save([cyclic], "s")
    with pytest.raises(ValueError, match="no 'session_id'"):
        store.archive({"content": "x"})
    with pytest.raises(TypeError, match="SqlSnapshot"):
        store.load_snapshot(Path("x.jsonl"))  # type: ignore[arg-type]
    assert store.snapshots() == [] and store.load_archive("s") == []


def test_compactor_saves_its_snapshot_and_archive_in_the_database(
    store: SqlTranscriptManager,
) -> None:
    compact = Compactor(lambda p: "摘要", store, session_id="run", archive=store.archive)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(5):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {}}],
            }
        )
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"out{i}"}]})  # fmt: skip
    result = compact(messages, force=True)
    assert result.snapshot_saved
    assert len(store.load("run")) == 11
    assert [r["content"] for r in store.load_archive("run")] == ["out0", "out1"]


def test_unencodable_values_are_stored_as_text_with_a_warning(
    store: SqlTranscriptManager, caplog: pytest.LogCaptureFixture
) -> None:
    store.save([{"role": "user", "content": b"raw", "n": float("nan"), "s": "\udcff"}], "s")
    loaded = store.load("s")[0]
    assert loaded["content"] == "b'raw'" and loaded["s"] == "\udcff"
    assert "written as their str()" in caplog.text and "raw" not in caplog.text


# -- concurrency and crashes ---------------------------------------------------------

WRITER = (
    OPEN_STORE
    + """
import sys
target, writer, saves = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mgr = open_store(target)
print("ready", flush=True)
sys.stdin.readline()
for i in range(saves):
    mgr.save([{"role": "user", "content": f"writer {writer} save {i} 数据"},
              {"role": "assistant", "content": "x" * (i % 50), "w": writer, "i": i}], "shared")
print("done", flush=True)
"""
)


def test_four_processes_saving_one_session_lose_no_snapshot(target: str) -> None:
    started = time.monotonic()
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, target, str(w), str(SAVES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),
            text=True,
        )
        for w in range(WRITERS)
    ]
    for proc in writers:  # every writer connected; then all start at once
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n", proc.stderr
    for proc in writers:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in writers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out == "done\n", err
    elapsed = time.monotonic() - started

    with open_store(target) as mgr:
        records = mgr.snapshots("shared")
        assert sorted(r.seq for r in records) == list(range(1, WRITERS * SAVES + 1))
        seen: dict[int, list[int]] = {w: [] for w in range(WRITERS)}
        for record in reversed(records):  # oldest first
            user, reply = mgr.load_snapshot(record)
            seen[reply["w"]].append(reply["i"])
            assert user["content"] == f"writer {reply['w']} save {reply['i']} 数据"
            assert reply["content"] == "x" * (reply["i"] % 50)
        # Nothing lost, nothing doubled, and each writer's saves in its own order.
        assert all(seen[w] == list(range(SAVES)) for w in range(WRITERS))
        timestamps = [r.timestamp for r in reversed(records)]
        assert timestamps == sorted(set(timestamps))
    sys.stderr.write(
        f"\n{target.partition(':')[0]}: {WRITERS}x{SAVES} saves of one session, "
        f"{WRITERS * SAVES - len(records)} lost, {elapsed:.2f}s\n"
    )


KILLED_WRITER = (
    OPEN_STORE
    + """
import sys
target = sys.argv[1]
mgr = open_store(target)
TEXT = "数据🚀x" * 400
print("ready", flush=True)
i = 0
while True:
    size = 40 + i % 30
    record = mgr.save([{"role": "user", "content": TEXT, "k": k, "total": size}
                       for k in range(size)], "crash")
    print(record.seq, flush=True)
    i += 1
"""
)


def test_a_writer_killed_during_a_save_leaves_the_previous_state(target: str) -> None:
    rng = random.Random(20250102)
    for _ in range(KILLS):
        with subprocess.Popen(
            [sys.executable, "-c", KILLED_WRITER, target],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), text=True,
        ) as proc:  # fmt: skip
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n", proc.stderr
            time.sleep(rng.uniform(0.05, 0.25))
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        reported = [int(line) for line in out.split()]
        with open_store(target) as mgr:
            records = mgr.snapshots("crash")
            committed = max(reported) if reported else 0
            latest = records[0].seq if records else 0
            # The save in flight either committed whole or left no trace.
            assert latest in (committed, committed + 1)
            assert [r.seq for r in records] == list(range(latest, 0, -1))
            for record in records:
                messages = mgr.load_snapshot(record)
                assert len(messages) == messages[0]["total"] == record.messages
                assert [m["k"] for m in messages] == list(range(len(messages)))
    if target.startswith("sqlite:"):
        path = target.partition(":")[2]
        with closing(sqlite3.connect(path)) as db, db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with open_store(target) as mgr:  # still writable: no lock left behind
        assert mgr.save(history(1), "crash").seq == len(mgr.snapshots("crash"))


def test_threads_sharing_one_manager_get_distinct_snapshots(store: SqlTranscriptManager) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                store.save(history(1, f"{n}-{i}"), "threads")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    contents = {store.load_snapshot(r)[0]["content"] for r in store.snapshots("threads")}
    assert len(contents) == 80


# -- transactions, schema, parameter styles -------------------------------------------------


def test_a_failing_save_rolls_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SqlTranscriptManager(path) as mgr:
        mgr.save(history(1), "s")
        with closing(sqlite3.connect(path)) as db, db:
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON bareagent_snapshots "
                "WHEN NEW.message_count = 13 BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        with pytest.raises(sqlite3.IntegrityError, match="refused"):
            mgr.save(history(13), "s")
        # The session's counter and time moved back with the failed insert.
        assert mgr.save(history(2), "s").seq == 2
        assert [r.seq for r in mgr.snapshots("s")] == [2, 1]
        assert mgr.load("s") == history(2)


def test_sqlite_store_is_private_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "private" / "transcripts.db"
    with SqlTranscriptManager(path) as mgr:
        mgr.save(history(2), "s")
        made = sorted(p.name for p in path.parent.iterdir())
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
    assert made == ["transcripts.db", "transcripts.db-shm", "transcripts.db-wal"]
    assert set(modes.values()) == {0o600}
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with closing(sqlite3.connect(path)) as db, db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_schema_is_created_once_and_versioned(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    for _ in range(2):
        with SqlTranscriptManager(path) as mgr:
            mgr.save(history(1), "s")
    with closing(sqlite3.connect(path)) as db, db:
        rows = db.execute("SELECT name, value FROM bareagent_meta").fetchall()
        assert rows == [("schema_version", str(SCHEMA_VERSION))]
        db.execute("UPDATE bareagent_meta SET value = '99'")
    with pytest.raises(RuntimeError, match="schema version 99"), SqlTranscriptManager(path) as mgr:
        mgr.load("s")


def test_create_false_never_creates_a_file_or_tables(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(FileNotFoundError, match="no transcript database"):
        SqlTranscriptManager(missing, create=False).list_sessions()
    assert not missing.exists()
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as db, db:
        db.execute("CREATE TABLE notes (x TEXT)")
    with (
        pytest.raises(LookupError, match="holds no transcript store"),
        SqlTranscriptManager(other, create=False) as mgr,
    ):
        mgr.list_sessions()
    with closing(sqlite3.connect(other)) as db, db:
        tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    assert tables == [("notes",)]


def test_placeholders_are_written_in_each_paramstyle() -> None:
    query = "a = ? AND b = ?"
    assert convert_placeholders(query, "qmark") == query
    assert convert_placeholders(query, "numeric") == "a = :1 AND b = :2"
    assert convert_placeholders(query, "named") == "a = :p1 AND b = :p2"
    assert convert_placeholders(query, "format") == "a = %s AND b = %s"
    assert convert_placeholders(query, "pyformat") == "a = %(p1)s AND b = %(p2)s"
    with pytest.raises(ValueError, match="paramstyle must be one of"):
        convert_placeholders(query, "dollar")


class StyledCursor:
    """A sqlite3 cursor behind a driver of another paramstyle: it turns that style's
    placeholders back into sqlite3's and refuses the wrong parameter container."""

    def __init__(self, cursor: sqlite3.Cursor, style: str, seen: list[str]) -> None:
        self.cursor, self.style, self.seen = cursor, style, seen

    def execute(self, sql: str, params: Any) -> None:
        self.seen.append(sql)
        if self.style in ("named", "pyformat"):
            assert isinstance(params, dict)
            sql = sql.replace("%(", ":").replace(")s", "") if self.style == "pyformat" else sql
            self.cursor.execute(sql, params)
            return
        assert isinstance(params, tuple) and "?" not in sql
        if self.style == "format":
            sql = sql.replace("%s", "?")
        else:
            for n in range(len(params), 0, -1):
                sql = sql.replace(f":{n}", f"?{n}")
        self.cursor.execute(sql, params)

    def fetchall(self) -> list[Any]:
        return self.cursor.fetchall()

    def close(self) -> None:
        self.cursor.close()


class StyledConnection:
    def __init__(self, path: Path, style: str, seen: list[str]) -> None:
        self.db = sqlite3.connect(path)
        self.style, self.seen = style, seen
        self.Error = sqlite3.Error
        self.IntegrityError = sqlite3.IntegrityError

    def cursor(self) -> StyledCursor:
        return StyledCursor(self.db.cursor(), self.style, self.seen)

    def commit(self) -> None:
        self.db.commit()

    def rollback(self) -> None:
        self.db.rollback()

    def close(self) -> None:
        self.db.close()


@pytest.mark.parametrize("style", ["numeric", "named", "format", "pyformat"])
def test_every_paramstyle_round_trips_through_a_driver_of_that_style(
    tmp_path: Path, style: str
) -> None:
    seen: list[str] = []
    with SqlTranscriptManager(
        lambda: StyledConnection(tmp_path / "t.db", style, seen), paramstyle=style
    ) as mgr:
        mgr.save(history(3), "s")
        mgr.archive({"session_id": "s", "content": "c"})
        assert mgr.load("s") == history(3)
        assert mgr.load_archive("s") == [{"session_id": "s", "content": "c"}]
        assert [r.seq for r in mgr.snapshots("s")] == [1]
    assert seen and not any("?" in sql for sql in seen)


def test_an_unknown_driver_without_paramstyle_is_refused_clearly(tmp_path: Path) -> None:
    with (
        SqlTranscriptManager(lambda: StyledConnection(tmp_path / "t.db", "qmark", [])) as mgr,
        pytest.raises(TypeError, match="pass paramstyle="),
    ):
        mgr.list_sessions()
    with pytest.raises(ValueError, match="paramstyle must be one of"):
        SqlTranscriptManager(lambda: None, paramstyle="dollar")
    with pytest.raises(TypeError, match="connection_factory must be a path or a callable"):
        SqlTranscriptManager(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a file path"):
        SqlTranscriptManager(":memory:")


def test_timestamps_follow_the_clock_and_never_go_back(tmp_path: Path) -> None:
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=8)))
    with SqlTranscriptManager(tmp_path / "t.db", clock=lambda: now) as mgr:
        first, second = mgr.save(history(1), "s"), mgr.save(history(1), "s")
    assert first.timestamp == datetime(2025, 1, 1, 19, 4, 5)
    assert second.timestamp == first.timestamp + timedelta(microseconds=1)
    # Another manager (another machine) with a clock behind still sorts after.
    with SqlTranscriptManager(tmp_path / "t.db", clock=lambda: datetime(2000, 1, 1)) as late:
        assert late.save(history(2), "s").timestamp > second.timestamp
        assert late.load("s") == history(2)


def test_a_forked_child_opens_its_own_connection(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    mgr = SqlTranscriptManager(tmp_path / "t.db")
    request.addfinalizer(mgr.close)
    mgr.save(history(1), "parent")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            mgr.save(history(2), "child")
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    mgr.save(history(3), "parent")
    assert mgr.list_sessions() == ["parent", "child"]
    assert mgr.load("child") == history(2)


def test_the_command_line_reads_a_postgresql_store_by_url(
    pg_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    conninfo = fresh_pg_database(pg_server)
    fields = dict(item.split("=", 1) for item in conninfo.split())
    url = f"postgresql://{fields['user']}@{fields['host']}:{fields['port']}/{fields['dbname']}"
    with open_store(f"postgresql:{conninfo}") as mgr:
        mgr.save(history(2), "fleet")
        mgr.save(history(3), "fleet")
    assert main(["inspect", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kind"] == "postgresql"
    assert [len(s["snapshots"]) for s in report["sessions"]] == [2]
    assert main(["show", "fleet", "--store", url, "--at", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["transcript"] == history(2)


def _fork_and_run(work: Callable[[], None]) -> int:
    """Run ``work`` in a forked child; its exit code (0 when it returned)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            work()
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_child_closing_the_store_leaves_the_parents_connection_working(
    target: str,
) -> None:
    with open_store(target) as mgr:
        mgr.save(history(1), "parent")

        def child_work() -> None:
            mgr.close()  # before the child used the store: the inherited connection only
            mgr.save(history(2), "child")
            mgr.close()

        assert _fork_and_run(child_work) == 0
        assert _fork_and_run(mgr.close) == 0
        mgr.save(history(3), "parent")
        assert mgr.load("parent") == history(3)
        assert mgr.load("child") == history(2)


def test_a_sqlite_connection_closed_by_other_code_is_reopened(tmp_path: Path) -> None:
    made: list[sqlite3.Connection] = []
    path = tmp_path / "t.db"

    def connect() -> sqlite3.Connection:
        made.append(sqlite3.connect(path, isolation_level=None, check_same_thread=False))
        return made[-1]

    with SqlTranscriptManager(connect) as mgr:
        mgr.save(history(1), "s")
        made[0].close()
        assert mgr.load("s") == history(1)
        mgr.save(history(2), "s")
        assert mgr.load("s") == history(2)
        assert len(made) == 2


def test_a_connection_whose_driver_cannot_be_told_is_closed(tmp_path: Path) -> None:
    made: list[StyledConnection] = []

    def connect() -> StyledConnection:
        made.append(StyledConnection(tmp_path / "t.db", "qmark", []))
        return made[-1]

    with SqlTranscriptManager(connect) as mgr, pytest.raises(TypeError, match="pass paramstyle="):
        mgr.list_sessions()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        made[0].db.execute("SELECT 1")


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), -1.0])
def test_a_timeout_that_is_not_a_finite_number_of_seconds_is_refused(
    tmp_path: Path, timeout: float
) -> None:
    with pytest.raises(ValueError, match="timeout"):
        SqlTranscriptManager(tmp_path / "t.db", timeout=timeout)
    assert not (tmp_path / "t.db").exists()


@pytest.mark.parametrize("text", ["no handle", "%", "r-%", "\x00", "\ud800", "r-0123456789a\x00"])
def test_read_archived_of_a_string_that_is_no_handle_is_none_not_a_driver_error(
    store: SqlTranscriptManager, text: str
) -> None:
    record = {"session_id": "alpha", "tool_use_id": "t0", "tool_name": "bash", "content": "x"}
    store.archive({**record, "handle": "r-0123456789ab"})
    assert store.read_archived("alpha", text) is None
    assert store.read_archived("alpha", "r-0123456789ab") == {**record, "handle": "r-0123456789ab"}
