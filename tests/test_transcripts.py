"""JsonlTranscriptManager: file layout, atomic saves, ordering, validation and the archive."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import Compactor, SqlTranscriptManager, TranscriptManager
from bareagent_compact.stores.codec import MAX_STEM_BYTES, file_stem, session_id_of_stem
from bareagent_compact.stores.jsonl import files as jsonl_files
from bareagent_compact.transcripts import (
    ARCHIVE_SUFFIX,
    TEMP_MAX_AGE,
    TEMP_PREFIX,
    JsonlTranscriptManager,
    Snapshot,
    check_session_id,
)

POSIX_ONLY = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
NAME_RE = re.compile(r"(?P<sid>.+)_(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{6})\.jsonl")
T0 = datetime(2025, 1, 2, 3, 4, 5, 123456)


def fixed_clock(moment: datetime = T0) -> Callable[[], datetime]:
    return lambda: moment


def stepping_clock(*moments: datetime) -> Callable[[], datetime]:
    it: Iterator[datetime] = iter(moments)
    return lambda: next(it)


def history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "请读取配置文件，然后告诉我 🚀 是什么"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "好的"},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "read_file",
                    "input": {"path": "配置.toml"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "1: [提供者]\n2: 🐍"}
            ],
        },
        {"role": "assistant", "content": "完成 ✅"},
    ]


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "transcripts"


@pytest.fixture
def mgr(store: Path) -> JsonlTranscriptManager:
    return JsonlTranscriptManager(store)


# -- layout and round trip ---------------------------------------------------


def test_round_trip_keeps_cjk_and_emoji_readable_one_message_per_line(
    mgr: JsonlTranscriptManager,
) -> None:
    messages = history()
    path = mgr.save(messages, "demo")
    assert mgr.load("demo") == messages
    text = path.read_bytes().decode("utf-8")
    assert "请读取配置文件" in text
    assert "🚀" in text
    assert "\\u" not in text
    lines = text.split("\n")
    assert lines[-1] == ""  # every line ends with a newline
    assert [json.loads(line) for line in lines[:-1]] == messages


def test_file_name_is_session_id_underscore_timestamp(mgr: JsonlTranscriptManager) -> None:
    mgr.clock = fixed_clock()
    path = mgr.save([], "demo")
    assert path.name == "demo_2025-01-02T03-04-05-123456.jsonl"
    assert path.parent == mgr.directory


def test_session_id_with_underscores_is_parsed_from_the_right(mgr: JsonlTranscriptManager) -> None:
    mgr.save([{"role": "user", "content": "a"}], "team_lead_2025")
    mgr.save([{"role": "user", "content": "b"}], "team")
    assert set(mgr.list_sessions()) == {"team_lead_2025", "team"}
    assert mgr.load("team_lead_2025") == [{"role": "user", "content": "a"}]
    assert mgr.load("team") == [{"role": "user", "content": "b"}]


def test_empty_history_round_trips(mgr: JsonlTranscriptManager) -> None:
    path = mgr.save([], "empty")
    assert path.read_bytes() == b""
    assert mgr.load("empty") == []


def test_tuple_of_messages_is_accepted(mgr: JsonlTranscriptManager) -> None:
    mgr.save(tuple(history()), "t")
    assert mgr.load("t") == history()


def test_satisfies_the_transcript_protocol_and_plugs_into_compactor(
    mgr: JsonlTranscriptManager,
) -> None:
    assert isinstance(mgr, TranscriptManager)
    Compactor(lambda prompt: "s", mgr, archive=mgr.archive)


def test_directory_is_made_absolute_and_created_lazily(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    mgr = JsonlTranscriptManager("nested/store")
    assert mgr.directory == tmp_path / "nested" / "store"
    assert not (tmp_path / "nested").exists()
    assert mgr.list_sessions() == []
    assert not (tmp_path / "nested").exists()
    mgr.save([], "s")
    assert (tmp_path / "nested" / "store").is_dir()
    assert repr(mgr) == f"JsonlTranscriptManager({str(tmp_path / 'nested' / 'store')!r})"


def test_a_home_relative_directory_is_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert JsonlTranscriptManager("~/transcripts").directory == tmp_path / "transcripts"


# -- permissions ---------------------------------------------------------------


@POSIX_ONLY
@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_directory_is_0700_and_files_are_0600(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        mgr = JsonlTranscriptManager(tmp_path / "a" / "b")
        path = mgr.save(history(), "s")
        mgr.archive({"session_id": "s", "tool_use_id": "t", "tool_name": "x", "content": "y"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(mgr.directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(mgr.archive_path("s")).st_mode) == 0o600


@POSIX_ONLY
def test_an_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    directory.mkdir()
    os.chmod(directory, 0o750)
    JsonlTranscriptManager(directory).save([], "s")
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o750


# -- distinct files and ordering ---------------------------------------------


def test_saves_in_the_same_microsecond_give_distinct_files(mgr: JsonlTranscriptManager) -> None:
    mgr.clock = fixed_clock()
    paths = [mgr.save([{"role": "user", "content": str(i)}], "s") for i in range(5)]
    assert len(set(paths)) == 5
    assert all(p.exists() for p in paths)
    assert mgr.load("s") == [{"role": "user", "content": "4"}]
    assert [s.path for s in mgr.snapshots("s")] == paths[::-1]


def test_two_managers_on_one_directory_in_the_same_microsecond(store: Path) -> None:
    first = JsonlTranscriptManager(store, clock=fixed_clock())
    second = JsonlTranscriptManager(store, clock=fixed_clock())
    a = first.save([{"role": "user", "content": "a"}], "s")
    b = second.save([{"role": "user", "content": "b"}], "s")
    assert a != b
    assert JsonlTranscriptManager.load_snapshot(a) == [{"role": "user", "content": "a"}]
    assert JsonlTranscriptManager.load_snapshot(b) == [{"role": "user", "content": "b"}]


def test_saves_from_many_threads_give_distinct_complete_files(store: Path) -> None:
    mgr = JsonlTranscriptManager(store, clock=fixed_clock())
    paths: list[Path] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(10):
                paths.append(mgr.save([{"role": "user", "content": f"{n}-{i}"}] * 20, f"s{n % 2}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(paths) == len(set(paths)) == 80
    assert len([n for n in files(store) if n.endswith(".jsonl")]) == 80
    for snapshot in mgr.snapshots():
        assert len(mgr.load_snapshot(snapshot.path)) == 20
    assert not [n for n in files(store) if n.startswith(TEMP_PREFIX)]


def test_load_returns_the_newest_snapshot_by_name_not_mtime(mgr: JsonlTranscriptManager) -> None:
    mgr.clock = stepping_clock(T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=2))
    old = mgr.save([{"role": "user", "content": "old"}], "s")
    mid = mgr.save([{"role": "user", "content": "mid"}], "s")
    new = mgr.save([{"role": "user", "content": "new"}], "s")
    now = time.time()
    os.utime(old, (now + 100, now + 100))
    os.utime(new, (now - 100, now - 100))
    assert mgr.load("s") == [{"role": "user", "content": "new"}]
    assert [s.path for s in mgr.snapshots("s")] == [new, mid, old]


def test_a_clock_going_backwards_never_makes_a_new_save_look_older(
    mgr: JsonlTranscriptManager,
) -> None:
    mgr.clock = stepping_clock(T0, T0 - timedelta(hours=1))
    mgr.save([{"role": "user", "content": "first"}], "s")
    second = mgr.save([{"role": "user", "content": "second"}], "s")
    assert second.name == "s_2025-01-02T03-04-05-123457.jsonl"
    assert mgr.load("s") == [{"role": "user", "content": "second"}]


def test_list_sessions_is_newest_first_and_unique(mgr: JsonlTranscriptManager) -> None:
    mgr.clock = stepping_clock(*(T0 + timedelta(minutes=i) for i in range(5)))
    for sid in ["a", "b", "a", "c", "b"]:
        mgr.save([], sid)
    assert mgr.list_sessions() == ["b", "c", "a"]
    assert mgr.get_latest_session() == "b"
    snapshots = mgr.snapshots()
    assert [s.session_id for s in snapshots] == ["b", "c", "a", "b", "a"]
    assert snapshots[0].timestamp == T0 + timedelta(minutes=4)
    assert isinstance(snapshots[0], Snapshot)


def test_aware_clock_is_converted_to_utc_and_naive_clock_used_as_is(store: Path) -> None:
    plus8 = timezone(timedelta(hours=8))
    aware = JsonlTranscriptManager(store, clock=lambda: datetime(2025, 1, 2, 11, 0, tzinfo=plus8))
    assert aware.save([], "s").name == "s_2025-01-02T03-00-00-000000.jsonl"
    naive = JsonlTranscriptManager(store, clock=lambda: datetime(2025, 1, 2, 11, 0))
    assert naive.save([], "s").name == "s_2025-01-02T11-00-00-000000.jsonl"


def test_default_clock_is_utc(mgr: JsonlTranscriptManager) -> None:
    before = datetime.now(timezone.utc).replace(tzinfo=None)
    mgr.save([], "s")
    after = datetime.now(timezone.utc).replace(tzinfo=None)
    assert before <= mgr.snapshots()[0].timestamp <= after


def test_bad_clock_is_refused(store: Path) -> None:
    with pytest.raises(TypeError, match="clock"):
        JsonlTranscriptManager(store, clock="now")  # type: ignore[arg-type]
    mgr = JsonlTranscriptManager(store, clock=lambda: 12.5)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="datetime"):
        mgr.save([], "s")
    assert not [n for n in files(store) if n.startswith(TEMP_PREFIX)]


# -- resume and missing sessions ---------------------------------------------


def test_resume_without_id_loads_the_newest_snapshot_of_any_session(
    mgr: JsonlTranscriptManager,
) -> None:
    mgr.clock = stepping_clock(T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=2))
    mgr.save([{"role": "user", "content": "a1"}], "a")
    mgr.save([{"role": "user", "content": "b1"}], "b")
    mgr.save([{"role": "user", "content": "a2"}], "a")
    assert mgr.resume() == [{"role": "user", "content": "a2"}]
    assert mgr.resume("b") == [{"role": "user", "content": "b1"}]


def test_missing_sessions_raise_file_not_found(mgr: JsonlTranscriptManager) -> None:
    with pytest.raises(FileNotFoundError):
        mgr.resume()
    with pytest.raises(FileNotFoundError, match="'nope'"):
        mgr.load("nope")
    mgr.save([], "other")
    with pytest.raises(FileNotFoundError):
        mgr.resume("nope")
    assert mgr.get_latest_session() == "other"


def test_missing_directory_lists_nothing(tmp_path: Path) -> None:
    mgr = JsonlTranscriptManager(tmp_path / "absent")
    assert mgr.list_sessions() == []
    assert mgr.snapshots() == []
    assert mgr.get_latest_session() is None
    assert mgr.load_archive("s") == []
    assert not (tmp_path / "absent").exists()


# -- reading other files in the directory ----------------------------------------


def test_other_files_are_ignored(mgr: JsonlTranscriptManager, store: Path) -> None:
    path = mgr.save([{"role": "user", "content": "real"}], "s")
    for name in [
        "notes.jsonl",
        "s_notatime.jsonl",
        "s_2025-13-40T99-99-99-000000.jsonl",
        ".hidden_2025-01-02T03-04-05-000000.jsonl",
        "s_2099-01-02T03-04-05-000000.txt",
        "README.md",
    ]:
        (store / name).write_text("not json", encoding="utf-8")
    (store / "d_2099-01-02T03-04-05-000000.jsonl").mkdir()
    assert mgr.list_sessions() == ["s"]
    assert [s.path for s in mgr.snapshots()] == [path]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinked_snapshots_are_ignored(mgr: JsonlTranscriptManager, tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"role": "user", "content": "outside"}\n', encoding="utf-8")
    mgr.save([], "s")
    try:
        (mgr.directory / "evil_2099-01-01T00-00-00-000000.jsonl").symlink_to(outside)
    except OSError:  # pragma: no cover - e.g. Windows without the privilege
        pytest.skip("cannot create symlinks here")
    assert mgr.list_sessions() == ["s"]


def test_bareagent_files_are_read(store: Path) -> None:
    store.mkdir()
    (store / "old_2024-05-06T07-08-09.jsonl").write_text(
        '{"role": "user", "content": "legacy"}\n\n', encoding="utf-8"
    )
    (store / "old_2024-05-06T07-08-09-000001.jsonl").write_text(
        '{"role": "user", "content": "newer"}\n', encoding="utf-8"
    )
    mgr = JsonlTranscriptManager(store)
    assert mgr.list_sessions() == ["old"]
    assert mgr.load("old") == [{"role": "user", "content": "newer"}]
    assert mgr.load_snapshot(store / "old_2024-05-06T07-08-09.jsonl") == [
        {"role": "user", "content": "legacy"}
    ]


@pytest.mark.parametrize(
    ("body", "line", "reason"),
    [
        (b'{"role": "user"}\n{"role": "assistant"}\n{"role": oops}\n', 3, "invalid JSON"),
        (b'{"role": "user"}\n\xff\xfe\n', 2, "invalid UTF-8"),
        (b'{"role": "user"}\n[1, 2]\n', 2, "expected a JSON object"),
        (b'{"role": "user", "content": "cut', 1, "invalid JSON"),
    ],
)
def test_a_corrupt_file_raises_value_error_naming_path_and_line(
    store: Path, body: bytes, line: int, reason: str
) -> None:
    store.mkdir()
    path = store / "s_2025-01-02T03-04-05-000000.jsonl"
    path.write_bytes(body)
    mgr = JsonlTranscriptManager(store)
    with pytest.raises(ValueError, match=reason) as info:
        mgr.load("s")
    assert str(path) in str(info.value)
    assert f"line {line}" in str(info.value)


# -- temporary files ---------------------------------------------------------


def test_leftover_temp_files_are_ignored_and_stale_ones_removed(
    mgr: JsonlTranscriptManager, store: Path
) -> None:
    mgr.save([{"role": "user", "content": "kept"}], "s")
    stale = store / f"{TEMP_PREFIX}deadbeef"
    fresh = store / f"{TEMP_PREFIX}cafebabe"
    stale.write_bytes(b'{"role": "user", "content": "half')
    fresh.write_bytes(b'{"role": "user", "content": "in flight')
    old = time.time() - TEMP_MAX_AGE - 5
    os.utime(stale, (old, old))
    assert mgr.list_sessions() == ["s"]
    assert mgr.load("s") == [{"role": "user", "content": "kept"}]
    assert stale.exists()  # readers never delete anything

    mgr.save([], "t")
    assert not stale.exists()
    assert fresh.exists()


def test_a_failed_write_leaves_no_temp_file(
    mgr: JsonlTranscriptManager, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr.save([], "s")
    before = files(store)

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space"):
        mgr.save(history(), "s")
    monkeypatch.undo()
    assert files(store) == before


def test_a_failed_rename_leaves_no_temp_file(
    mgr: JsonlTranscriptManager, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_replace(src: Any, dst: Any) -> None:
        raise PermissionError("denied")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(PermissionError):
        mgr.save(history(), "s")
    monkeypatch.undo()
    assert files(store) == []


# -- session id validation -----------------------------------------------------

BAD_IDS = [
    "x\x00",
    "",
    "x" * 129,
    "é" * 101,  # 101 characters but 202 bytes
    "line\nbreak",
    "tab\there",
    "bell\x07",
    "del\x7f",
    "rtl\u202eoverride",
    "zero\u200bwidth",
    "surrogate\udc80",
]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_unsafe_session_ids_are_refused_before_touching_the_disk(tmp_path: Path, bad: str) -> None:
    store = tmp_path / "store"
    mgr = JsonlTranscriptManager(store)
    record = {"session_id": bad, "tool_use_id": "t", "tool_name": "x", "content": "secret"}
    calls: list[Callable[[], object]] = [
        lambda: mgr.save([{"role": "user", "content": "secret"}], bad),
        lambda: mgr.load(bad),
        lambda: mgr.resume(bad),
        lambda: mgr.snapshots(bad),
        lambda: mgr.archive(record),
        lambda: mgr.load_archive(bad),
        lambda: mgr.archive_path(bad),
        lambda: check_session_id(bad),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="session_id"):
            call()
    assert files(tmp_path) == []  # not even the store directory was created


def test_traversal_ids_write_nothing_outside_the_store_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    mgr = JsonlTranscriptManager("store")
    mgr.save([], "ok")
    with pytest.raises(ValueError):
        mgr.save([{"role": "user", "content": "secret"}], "x\x00")
    ids = ["../x", "/etc/x", "a/b", "..", ".", "../../escape", "store/../../y", "..\\x"]
    for number, session_id in enumerate(ids):
        mgr.save([{"role": "user", "content": f"m{number}"}], session_id)
        mgr.archive({"session_id": session_id, "tool_name": "x", "content": f"a{number}"})
    outside = [p for p in tmp_path.rglob("*") if (work / "store") not in (p, *p.parents)]
    assert outside == [work]
    assert all(not p.name.startswith(".") for p in (work / "store").iterdir())
    assert sorted(mgr.list_sessions()) == sorted(["ok", *ids])
    for number, session_id in enumerate(ids):
        assert mgr.load(session_id) == [{"role": "user", "content": f"m{number}"}]
        assert [r["content"] for r in mgr.load_archive(session_id)] == [f"a{number}"]


# Ids real agents use that a file name cannot hold as they are.
ODD_IDS = [
    "team:alice", "team:Alice", "Alice", "alice", "with space", "a?b", "a*b", 'a"b', "a<b>",
    "a|b", "C:x", "100%", "%41lice", "%2", "CON", "con", "nul.txt", "com1", "LPT9 .x",
    "trailing. ", "trailing.", "café", "CAFÉ", "会话:1", "🚀 launch", "ſ", "K", "\u0130", "ǅ",
    "x" * 128, "é" * 100, "É" * 100, "a:" * 40, "team_lead_2025-01-02T03-04-05",
    ".", "..", ".hidden", "..hidden", "a/b", "a\\b", "/", "\\", "../x", "%2Ehidden",
]  # fmt: skip


def test_odd_ids_round_trip_through_save_list_load_and_the_archive(
    mgr: JsonlTranscriptManager,
) -> None:
    for number, session_id in enumerate(ODD_IDS):
        mgr.save([{"role": "user", "content": f"m{number}"}], session_id)
        mgr.archive({"session_id": session_id, "tool_name": "x", "content": f"a{number}"})
    assert sorted(mgr.list_sessions()) == sorted(ODD_IDS)
    for number, session_id in enumerate(ODD_IDS):
        assert mgr.load(session_id) == [{"role": "user", "content": f"m{number}"}]
        assert [r["content"] for r in mgr.load_archive(session_id)] == [f"a{number}"]
        assert [s.session_id for s in mgr.snapshots(session_id)] == [session_id]


def test_odd_ids_have_distinct_reversible_file_names_even_ignoring_case() -> None:
    stems = [file_stem(check_session_id(session_id)) for session_id in ODD_IDS]
    plain = [s for s, i in zip(stems, ODD_IDS, strict=True) if len(i) < 100]
    assert len({stem.casefold() for stem in plain}) == len(plain)
    assert len(set(stems)) == len(stems)
    for session_id, stem in zip(ODD_IDS, stems, strict=True):
        assert session_id_of_stem(stem) == session_id
        assert len(stem.encode("utf-8")) <= MAX_STEM_BYTES
        assert not set(stem) & set('/\\<>:"|?*')
    assert file_stem("team:alice") == "team%3Aalice"
    assert file_stem("Alice") == "%41lice"
    assert file_stem("con") == "%63on"


def test_an_id_too_long_once_escaped_is_refused_by_both_stores(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="too long for a file name once escaped"):
        check_session_id("a:" * 64)
    with SqlTranscriptManager(tmp_path / "t.db") as sql, pytest.raises(ValueError):
        sql.save([], "a:" * 64)
    assert check_session_id("A" * 128) == "A" * 128  # a plain name, named by itself as before
    assert file_stem("A" * 128) == "A" * 128


@pytest.mark.parametrize("plain", ["demo", "agent-1", "a.b", "with space", "会话", "other_session"])
def test_ids_that_are_plain_lower_case_names_keep_their_file_names(plain: str) -> None:
    assert file_stem(plain) == plain


def test_files_named_by_the_id_itself_still_load_and_newer_ones_are_escaped(
    mgr: JsonlTranscriptManager,
) -> None:
    mgr.directory.mkdir()
    old = [{"role": "user", "content": "old"}]
    (mgr.directory / "Alice_2024-01-02T03-04-05-000000.jsonl").write_text(json.dumps(old[0]) + "\n")
    (mgr.directory / "café_2024-01-02T03-04-05-000000.jsonl").write_text(json.dumps(old[0]) + "\n")
    (mgr.directory / f"Alice{ARCHIVE_SUFFIX}").write_text(
        json.dumps({"session_id": "Alice", "content": "old"}) + "\n"
        + json.dumps({"session_id": "alice", "content": "other"}) + "\n"
    )
    assert sorted(mgr.list_sessions()) == ["Alice", "café"]
    assert mgr.load("Alice") == old
    mgr.save([{"role": "user", "content": "new"}], "Alice")
    mgr.archive({"session_id": "Alice", "tool_name": "x", "content": "new"})
    assert mgr.load("Alice") == [{"role": "user", "content": "new"}]
    assert [r["content"] for r in mgr.load_archive("Alice")] == ["old", "new"]
    assert mgr.list_sessions() == ["Alice", "café"]
    assert len(mgr.snapshots("Alice")) == 2


def test_a_file_another_program_named_by_a_raw_id_is_read_as_that_id(
    mgr: JsonlTranscriptManager,
) -> None:
    mgr.directory.mkdir()
    if os.name == "nt":
        pytest.skip("':' cannot be in a Windows file name")
    (mgr.directory / "team:alice_2024-01-02T03-04-05-000000.jsonl").write_text("{}\n")
    mgr.save([{"role": "user", "content": "new"}], "team:alice")
    assert mgr.list_sessions() == ["team:alice"]
    assert len(mgr.snapshots("team:alice")) == 2


def test_non_string_session_ids_are_a_type_error(mgr: JsonlTranscriptManager) -> None:
    for bad in [None, 3, b"bytes", Path("x")]:
        with pytest.raises(TypeError, match="session_id must be a str"):
            mgr.save([], bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "good", ["a", "a_b", "agent-1", "a.b", "with space", "会话", "x" * 128, "é" * 100, "CONSOLE"]
)
def test_plain_names_are_accepted(mgr: JsonlTranscriptManager, good: str) -> None:
    assert check_session_id(good) == good
    mgr.save([{"role": "user", "content": good}], good)
    assert mgr.list_sessions() == [good]
    assert mgr.load(good) == [{"role": "user", "content": good}]


def test_session_ids_are_nfc_normalised(mgr: JsonlTranscriptManager) -> None:
    decomposed = "cafe\u0301"
    composed = "caf\u00e9"
    path = mgr.save([], decomposed)
    assert path.name.startswith(file_stem(composed) + "_")
    assert mgr.list_sessions() == [composed]
    assert mgr.load(decomposed) == []
    assert mgr.load(composed) == []


# -- content JSON cannot encode ------------------------------------------------


class Opaque:
    def __str__(self) -> str:
        return "<opaque>"


def test_non_json_values_are_saved_as_text_with_a_warning(
    mgr: JsonlTranscriptManager, caplog: pytest.LogCaptureFixture
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "secret token abc123"},
        {"role": "assistant", "content": [{"type": "text", "text": Opaque()}], "raw": b"\x00"},
        {"role": "user", "content": {(1, 2): "tuple key", 3: "int key"}},
    ]
    with caplog.at_level(logging.WARNING, logger="bareagent_compact.transcripts"):
        mgr.save(messages, "s")
    assert mgr.load("s") == [
        {"role": "user", "content": "secret token abc123"},
        {"role": "assistant", "content": [{"type": "text", "text": "<opaque>"}], "raw": "b'\\x00'"},
        {"role": "user", "content": {"(1, 2)": "tuple key", "3": "int key"}},
    ]
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    text = record.getMessage()
    assert "3 value(s)" in text
    assert "Opaque" in text and "bytes" in text and "tuple" in text
    assert "secret" not in text and "<opaque>" not in text and "tuple key" not in text


def test_json_values_do_not_warn(
    mgr: JsonlTranscriptManager, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="bareagent_compact.transcripts"):
        mgr.save(history(), "s")
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_unpaired_surrogates_round_trip_as_escapes(mgr: JsonlTranscriptManager) -> None:
    messages = [{"role": "user", "content": "ls: bad name \udcff here, 你好"}]
    path = mgr.save(messages, "s")
    text = path.read_bytes().decode("utf-8")  # still valid UTF-8
    assert "\\udcff" in text and "你好" in text
    assert mgr.load("s") == messages


@pytest.mark.parametrize("kind", ["cycle", "deep"])
def test_cyclic_or_too_deep_content_raises_and_writes_nothing(
    mgr: JsonlTranscriptManager, store: Path, kind: str
) -> None:
    mgr.save([], "s")
    before = files(store)
    content: Any
    if kind == "cycle":
        content = []
        content.append(content)
    else:
        content = "leaf"
        for _ in range(100_000):  # deeper than any Python's JSON encoder goes
            content = [content]
    with pytest.raises(ValueError, match="JSON"):
        mgr.save([{"role": "user", "content": "ok"}, {"role": "user", "content": content}], "s")
    assert files(store) == before
    assert mgr.load("s") == []


def test_cycle_through_a_non_string_key_dict_raises(mgr: JsonlTranscriptManager) -> None:
    content: dict[Any, Any] = {(1,): "x"}
    content["self"] = content
    with pytest.raises(ValueError, match="Circular"):
        mgr.save([{"role": "user", "content": content}], "s")


def test_messages_must_be_a_list_of_dicts(mgr: JsonlTranscriptManager, store: Path) -> None:
    with pytest.raises(TypeError, match="list"):
        mgr.save("hello", "s")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"messages\[1\]"):
        mgr.save([{"role": "user"}, "text"], "s")  # type: ignore[list-item]
    assert not store.exists()


# -- the archive of truncated tool results -------------------------------------


def record(sid: str, tool_id: str, content: Any) -> dict[str, Any]:
    return {"session_id": sid, "tool_use_id": tool_id, "tool_name": "bash", "content": content}


def test_archive_appends_one_line_per_record_in_order(mgr: JsonlTranscriptManager) -> None:
    first = record("s", "t1", "第一个输出 🧪")
    second = record("s", "t2", [{"type": "text", "text": "blocks"}])
    mgr.archive(first)
    mgr.archive(second)
    mgr.archive(record("other", "t3", "x"))
    path = mgr.archive_path("s")
    assert path.name == "s" + ARCHIVE_SUFFIX
    text = path.read_bytes().decode("utf-8")
    assert text.count("\n") == 2 and "第一个输出 🧪" in text
    assert mgr.load_archive("s") == [first, second]
    assert mgr.load_archive("other") == [record("other", "t3", "x")]
    assert mgr.load_archive("none") == []


def test_archive_files_are_never_taken_for_snapshots(mgr: JsonlTranscriptManager) -> None:
    for sid in ["s", "s_2025-01-02T03-04-05-000000", "x.archive"]:
        mgr.archive(record(sid, "t", "x"))
    assert mgr.list_sessions() == []
    with pytest.raises(FileNotFoundError):
        mgr.load("s")
    with pytest.raises(FileNotFoundError):
        mgr.resume()
    mgr.save([], "s")
    assert mgr.list_sessions() == ["s"]


def test_archive_refuses_bad_records(mgr: JsonlTranscriptManager, store: Path) -> None:
    with pytest.raises(TypeError):
        mgr.archive(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="session_id"):
        mgr.archive({"tool_name": "x", "content": "y"})
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="JSON"):
        mgr.archive(record("s", "t", cyclic))
    assert files(store) == []


def test_archive_non_json_content_is_text_with_a_warning(
    mgr: JsonlTranscriptManager, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="bareagent_compact.transcripts"):
        mgr.archive(record("s", "t", b"raw bytes"))
    assert mgr.load_archive("s")[0]["content"] == "b'raw bytes'"
    assert "bytes" in caplog.text and "raw bytes" not in caplog.text


def test_a_torn_archive_line_is_skipped_and_the_next_append_starts_fresh(
    mgr: JsonlTranscriptManager, caplog: pytest.LogCaptureFixture
) -> None:
    mgr.archive(record("s", "t1", "one"))
    with open(mgr.archive_path("s"), "ab") as f:
        f.write(b'{"session_id": "s", "tool_use_id": "t2", "cont')  # a killed writer
    with caplog.at_level(logging.WARNING, logger="bareagent_compact.transcripts"):
        assert mgr.load_archive("s") == [record("s", "t1", "one")]
    assert "line 2" in caplog.text and str(mgr.archive_path("s")) in caplog.text
    mgr.archive(record("s", "t3", "three"))
    assert mgr.load_archive("s") == [record("s", "t1", "one"), record("s", "t3", "three")]


def test_compactor_archives_what_it_truncates_and_snapshots_before_summarising(
    mgr: JsonlTranscriptManager,
) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for i in range(5):
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"输出{i}"}],
            },
        ]
    compactor = Compactor(lambda prompt: "总结", mgr, session_id="run", archive=mgr.archive)
    compactor(messages, force=True)
    archived = mgr.load_archive("run")
    assert [(r["session_id"], r["tool_use_id"], r["content"]) for r in archived] == [
        ("run", "t0", "输出0"),
        ("run", "t1", "输出1"),
    ]
    snapshot = mgr.load("run")
    assert snapshot[2]["content"][0]["content"].startswith("[truncated: bash result")
    assert snapshot[-1]["content"][0]["content"] == "输出4"
    assert messages[1]["content"].endswith("总结")


def test_compactor_refuses_a_session_id_the_manager_refuses(tmp_path: Path) -> None:
    mgr = JsonlTranscriptManager(tmp_path / "store")
    for bad in ("2025-01-02\x00T03", "a\nb", ""):
        with pytest.raises(ValueError):
            Compactor(lambda prompt: "s", mgr, session_id=bad, archive=mgr.archive)
    compactor = Compactor(lambda prompt: "s", mgr, session_id="good", archive=mgr.archive)
    with pytest.raises(ValueError):
        compactor.set_session_id("bell\x07")
    assert compactor.get_session_id() == "good"
    assert files(tmp_path) == []


# -- hostile files, odd values and names -------------------------------------

FIFO_ONLY = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
SYMLINK_ONLY = pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")


def run_briefly(call: Callable[[], object], seconds: float = 10.0) -> BaseException | None:
    """Run ``call`` in a daemon thread; the exception it raised, or fail if it blocks."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # handed back to the test
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the call blocked"
    return outcome[0]


def record_for(session_id: str, content: str = "x") -> dict[str, Any]:
    return {"session_id": session_id, "tool_use_id": "t", "tool_name": "bash", "content": content}


@FIFO_ONLY
def test_a_fifo_at_the_archive_name_is_refused_without_blocking(
    mgr: JsonlTranscriptManager, store: Path
) -> None:
    store.mkdir()
    os.mkfifo(mgr.archive_path("s"))
    # More than a pipe buffer holds: a write into the FIFO would block for ever.
    error = run_briefly(lambda: mgr.archive(record_for("s", "x" * 300_000)))
    assert isinstance(error, OSError) and "regular file" in str(error)
    error = run_briefly(lambda: mgr.load_archive("s"))
    assert isinstance(error, OSError) and "regular file" in str(error)
    other = JsonlTranscriptManager(store.parent / "other")
    other.archive(record_for("s"))
    assert len(other.load_archive("s")) == 1


@FIFO_ONLY
def test_a_fifo_given_as_a_snapshot_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "s_2025-01-02T03-04-05-000000.jsonl"
    os.mkfifo(fifo)
    error = run_briefly(lambda: JsonlTranscriptManager.load_snapshot(fifo))
    assert isinstance(error, OSError) and "regular file" in str(error)


@SYMLINK_ONLY
def test_a_symlink_at_the_archive_name_is_not_followed(
    mgr: JsonlTranscriptManager, store: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(json.dumps(record_for("s", "planted")) + "\n", encoding="utf-8")
    store.mkdir()
    os.symlink(outside, mgr.archive_path("s"))
    with pytest.raises(OSError, match="symbolic link"):
        mgr.load_archive("s")
    with pytest.raises(OSError, match="symbolic link"):
        mgr.archive(record_for("s"))
    assert outside.read_text(encoding="utf-8").count("\n") == 1


@SYMLINK_ONLY
def test_load_snapshot_does_not_follow_a_symlink(
    mgr: JsonlTranscriptManager, tmp_path: Path
) -> None:
    path = mgr.save(history(), "s")
    link = tmp_path / "link.jsonl"
    os.symlink(path, link)
    with pytest.raises(OSError, match="symbolic link"):
        JsonlTranscriptManager.load_snapshot(link)
    assert JsonlTranscriptManager.load_snapshot(path) == history()


def test_a_directory_at_the_archive_name_is_refused(
    mgr: JsonlTranscriptManager, store: Path
) -> None:
    mgr.archive_path("s").mkdir(parents=True)
    with pytest.raises(OSError):
        mgr.load_archive("s")
    with pytest.raises(OSError):
        mgr.archive(record_for("s"))


def test_a_stalled_archive_write_holds_up_no_other_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    real_write_all = jsonl_files._write_all

    def stalling_write_all(fd: int, data: bytes) -> None:
        if b"stall-me" in data:
            entered.set()
            release.wait(30)
        real_write_all(fd, data)

    monkeypatch.setattr(jsonl_files, "_write_all", stalling_write_all)
    slow = JsonlTranscriptManager(tmp_path / "slow")
    fast = JsonlTranscriptManager(tmp_path / "fast")
    stalled = threading.Thread(target=lambda: slow.archive(record_for("a", "stall-me")))
    stalled.start()
    try:
        assert entered.wait(10)
        assert run_briefly(lambda: fast.archive(record_for("b")), seconds=5) is None
        assert run_briefly(lambda: fast.save(history(), "b"), seconds=5) is None
    finally:
        release.set()
        stalled.join(10)
    assert [r["content"] for r in slow.load_archive("a")] == ["stall-me"]
    assert [r["content"] for r in fast.load_archive("b")] == ["x"]


def test_appends_to_one_archive_from_many_threads_stay_whole_lines(
    mgr: JsonlTranscriptManager,
) -> None:
    threads = [
        threading.Thread(target=lambda i=i: mgr.archive(record_for("s", f"r{i}" * 2000)))
        for i in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    contents = sorted(r["content"] for r in mgr.load_archive("s"))
    assert contents == sorted(f"r{i}" * 2000 for i in range(16))


def test_an_empty_directory_name_is_a_value_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="directory must not be empty"):
        JsonlTranscriptManager("")
    assert list(tmp_path.iterdir()) == []
    assert JsonlTranscriptManager(".").directory == tmp_path


def test_an_integer_too_long_to_convert_names_the_file_and_line(store: Path) -> None:
    store.mkdir()
    path = store / "s_2025-01-02T03-04-05-000000.jsonl"
    path.write_text('{"role": "user", "content": "ok"}\n{"n": ' + "7" * 5000 + "}\n")
    with pytest.raises(ValueError) as caught:
        JsonlTranscriptManager.load_snapshot(path)
    message = str(caught.value)
    assert str(path) in message and "line 2" in message
    assert "7777" not in message


@pytest.mark.parametrize(
    "device",
    [
        "COM\u00b9",
        "com\u00b2",
        "COM\u00b3.txt",
        "LPT\u00b9",
        "LPT\u00b2 ",
        "lpt\u00b3",
        "CONIN$",
        "conout$",
        "CONOUT$.log",
        "COM0",
        "LPT0",
    ],
)
def test_every_windows_device_name_is_accepted_and_its_files_are_no_device(
    mgr: JsonlTranscriptManager, device: str
) -> None:
    assert check_session_id(device) == device
    stem = file_stem(device)
    assert stem.split(".", 1)[0].rstrip(" ").upper() not in {
        "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "COM\u00b9", "COM\u00b2", "COM\u00b3",
        "LPT\u00b9", "LPT\u00b2", "LPT\u00b3", "COM0", "LPT0",
    }  # fmt: skip
    mgr.save([{"role": "user", "content": device}], device)
    mgr.archive({"session_id": device, "tool_name": "x", "content": "kept"})
    assert mgr.list_sessions() == [device]
    assert mgr.load(device) == [{"role": "user", "content": device}]
    assert [r["content"] for r in mgr.load_archive(device)] == ["kept"]


@pytest.mark.parametrize("good", ["COM\u00b9x", "CONIN", "COM10", "x\u00b9"])
def test_names_that_only_resemble_device_names_are_accepted(good: str) -> None:
    assert check_session_id(good) == good


def test_colliding_keys_keep_both_values_in_a_snapshot_and_warn_with_counts_only(
    mgr: JsonlTranscriptManager, caplog: pytest.LogCaptureFixture
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi", "meta": {1: "secret-a", "1": "secret-b"}},
        {"role": "user", "content": {True: "t", "true": "T", None: "n", "null": "N"}},
    ]
    with caplog.at_level(logging.WARNING, logger="bareagent_compact.transcripts"):
        mgr.save(messages, "s")
    assert mgr.load("s") == [
        {"role": "user", "content": "hi", "meta": {"1": "secret-a", "1#2": "secret-b"}},
        {"role": "user", "content": {"true": "t", "true#2": "T", "null": "n", "null#2": "N"}},
    ]
    [record] = caplog.records
    text = record.getMessage()
    assert "3 dict key(s)" in text and "str" in text
    assert "secret" not in text


def test_colliding_keys_keep_both_values_in_the_archive(mgr: JsonlTranscriptManager) -> None:
    record = record_for("s")
    record["content"] = [{"type": "text", "text": "x", 2: "two", "2": "deux"}]
    mgr.archive(record)
    [loaded] = mgr.load_archive("s")
    assert loaded["content"] == [{"type": "text", "text": "x", "2": "two", "2#2": "deux"}]


def _archive_of(mgr: JsonlTranscriptManager, records: int, size: int, start: int = 0) -> None:
    record = {"session_id": "alpha", "tool_name": "bash"}
    mgr.archive_many(
        [
            {**record, "tool_use_id": f"t{n}", "content": f"{n:08d}" * (size // 8)}
            | {"handle": f"r-{n:012x}"}
            for n in range(start, start + records)
        ]
    )


def test_a_recall_reads_the_record_and_what_was_appended_not_the_whole_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracemalloc  # noqa: PLC0415

    mgr = JsonlTranscriptManager(tmp_path)
    _archive_of(mgr, 400, 20_000)  # an archive of about 8 MB
    archive_size = mgr.archive_path("alpha").stat().st_size
    read: list[int] = []
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        data = real_read(fd, n)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "read", counting_read)
    tracemalloc.start()
    try:
        record = mgr.read_archived("alpha", f"r-{17:012x}")  # the first: indexes the file
        _, first_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert record is not None and record["tool_use_id"] == "t17"
    assert first_peak < archive_size / 2  # the file is scanned in chunks, never held whole
    _archive_of(mgr, 3, 20_000, start=400)
    appended = mgr.archive_path("alpha").stat().st_size - archive_size
    for n in (5, 401, 399):
        read.clear()
        found = mgr.read_archived("alpha", f"r-{n:012x}")
        assert found is not None and found["tool_use_id"] == f"t{n}"
        assert sum(read) <= 20_200 + appended  # the record and the bytes appended since
        appended = 0
    assert mgr.read_archived("alpha", f"r-{999:012x}") is None


def test_the_archive_index_follows_a_replaced_file_and_skips_a_torn_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mgr = JsonlTranscriptManager(tmp_path)
    _archive_of(mgr, 5, 100)
    assert mgr.read_archived("alpha", f"r-{3:012x}") is not None
    path = mgr.archive_path("alpha")
    with open(path, "ab") as file:
        file.write(b'{"session_id": "alpha", "handle": "r-00000000000a", "content": "to')
    assert mgr.read_archived("alpha", "r-00000000000a") is None  # an unended line
    _archive_of(mgr, 1, 100, start=11)
    with caplog.at_level(logging.WARNING, logger="bareagent_compact.transcripts"):
        assert mgr.read_archived("alpha", "r-00000000000a") is None  # torn: skipped
    assert "unreadable record" in caplog.text
    assert mgr.read_archived("alpha", f"r-{11:012x}") is not None
    other = JsonlTranscriptManager(tmp_path / "other")
    _archive_of(other, 2, 50, start=40)
    os.replace(other.archive_path("alpha"), path)  # another file at the same name
    assert mgr.read_archived("alpha", f"r-{3:012x}") is None
    assert mgr.read_archived("alpha", f"r-{41:012x}") is not None


@pytest.mark.parametrize("write_behind", [False, True])
@pytest.mark.parametrize("failing", ["fsync", "write"])
def test_a_retry_after_a_failed_archive_write_writes_each_record_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_behind: bool, failing: str
) -> None:
    from conftest import tool_history  # noqa: PLC0415

    mgr = JsonlTranscriptManager(tmp_path, write_behind=write_behind)
    compactor = Compactor(lambda prompt: "S", None, 10**9, "alpha", archive=mgr.archive)
    full = tool_history(40, output=lambda turn: f"result {turn} " * 50)
    real_fsync, real_write, calls = os.fsync, os.write, [0]

    def fsync(fd: int) -> None:
        calls[0] += 1
        if calls[0] % 3:  # two of every three fail
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    def write(fd: int, data: Any) -> int:
        calls[0] += 1
        if calls[0] % 3:  # half of it written, then a failure
            real_write(fd, bytes(data)[: len(data) // 2])
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, failing, fsync if failing == "fsync" else write)
    messages = full[:2]
    for start in range(2, len(full), 2):
        messages += full[start : start + 2]
        compactor(messages)
        mgr.flush(timeout=10)
    monkeypatch.undo()
    compactor(messages)
    mgr.flush(timeout=10)
    lines = mgr.archive_path("alpha").read_bytes().splitlines()
    ids = [json.loads(line)["tool_use_id"] for line in lines]
    assert sorted(ids) == sorted(f"t{turn}" for turn in range(37))  # each record once
    mgr.close()


def _printable_ids(seed: int, count: int) -> list[str]:
    """Random printable ids: ASCII with every separator and dot, letters with a
    case in several scripts, caseless CJK and emoji, and case-only twins."""
    import random  # noqa: PLC0415

    rng = random.Random(seed)
    pieces = [*"./\\.%:_- aZ?*<>|\"", "..", "é", "É", "ß", "ẞ", "İ", "ı", "ǅ", "Ω", "ω", "会",
              "🚀", "\u0301", "ſ", "K", "CON", "nul", "lpt1"]  # fmt: skip
    found: list[str] = []
    while len(found) < count:
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        for candidate in (text, text.upper(), text.lower(), text.swapcase()):
            try:
                found.append(check_session_id(candidate))
            except ValueError:
                continue
    return list(dict.fromkeys(found))


def test_every_printable_id_round_trips_with_a_safe_distinct_file_name(tmp_path: Path) -> None:
    ids = _printable_ids(seed=29, count=400)
    assert {".", ".."} & set(ids) or any(i.startswith(".") for i in ids)
    assert any("/" in i for i in ids) and any("\\" in i for i in ids)
    stems = {session_id: file_stem(session_id) for session_id in ids}
    assert len({stem.casefold() for stem in stems.values()}) == len(ids)  # even ignoring case
    for session_id, stem in stems.items():
        assert session_id_of_stem(stem) == session_id
        assert not set(stem) & set('/\\<>:"|?*\x00') and not stem.startswith(".")
        assert stem.split(".", 1)[0].upper() not in {"CON", "NUL", "LPT1"}
    mgr = JsonlTranscriptManager(tmp_path / "store")
    for number, session_id in enumerate(ids):
        mgr.save([{"role": "user", "content": f"m{number}"}], session_id)
        mgr.archive({"session_id": session_id, "tool_name": "x", "content": f"a{number}"})
    assert sorted(mgr.list_sessions()) == sorted(ids)
    assert sorted(mgr.archived_sessions()) == sorted(ids)
    assert len(list((tmp_path / "store").iterdir())) == 2 * len(ids)
    for number, session_id in enumerate(ids):
        assert mgr.load(session_id) == [{"role": "user", "content": f"m{number}"}]
        assert [r["content"] for r in mgr.load_archive(session_id)] == [f"a{number}"]
