"""A writer killed with SIGKILL at random moments never leaves a partial snapshot."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import bareagent_compact
from bareagent_compact.transcripts import ARCHIVE_SUFFIX, TEMP_PREFIX, JsonlTranscriptManager

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

KILLS = 25
SEED = 20250102
ARCHIVED = "y" * 20_000

# Saves snapshots of roughly 300 KB in a loop, each followed by an archive append.
# Every message carries its index and the snapshot's length, so a reader can
# tell a complete snapshot from a cut one.
CHILD = """
import sys
from bareagent_compact.transcripts import JsonlTranscriptManager

directory, run = sys.argv[1], int(sys.argv[2])
mgr = JsonlTranscriptManager(directory)
TEXT = "数据🚀x" * 250
histories = []
for size in range(100, 130, 7):
    histories.append([
        {"role": "user" if k % 2 else "assistant", "content": TEXT, "seq": k, "total": size}
        for k in range(size)
    ])
print("ready", flush=True)
i = 0
while True:
    mgr.save(histories[i % len(histories)], f"crash_{(run + i) % 3}")
    mgr.archive({"session_id": "crash", "tool_use_id": f"{run}-{i}", "tool_name": "bash",
                 "content": "y" * 20000})
    i += 1
"""


def child_env() -> dict[str, str]:
    """Make the child import the very package under test, installed or not."""
    package_root = str(Path(bareagent_compact.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


def kill_writer_at_random(directory: Path, run: int, delay: float) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
    ) as proc:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        if ready != b"ready\n":  # pragma: no cover - diagnostics for a broken child
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"writer did not start: {err.decode(errors='replace')}")
        time.sleep(delay)
        assert proc.poll() is None, "the writer stopped before it was killed"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def test_every_snapshot_left_by_a_killed_writer_loads_completely(tmp_path: Path) -> None:
    store = tmp_path / "transcripts"
    rng = random.Random(SEED)
    started = time.monotonic()
    for run in range(KILLS):
        kill_writer_at_random(store, run, rng.uniform(0.010, 0.200))

    mgr = JsonlTranscriptManager(store)
    snapshots = mgr.snapshots()
    assert snapshots, "the writer never completed a snapshot"
    for snapshot in snapshots:
        messages = mgr.load_snapshot(snapshot.path)
        assert messages, snapshot.path
        assert len(messages) == messages[0]["total"], snapshot.path
        assert [m["seq"] for m in messages] == list(range(len(messages)))
        assert all(m["content"] == "数据🚀x" * 250 for m in messages)

    # Nothing else that looks like a snapshot: only snapshots, temp files and the archive.
    names = {p.name for p in store.iterdir()}
    temps = {n for n in names if n.startswith(TEMP_PREFIX)}
    archives = {n for n in names if n.endswith(ARCHIVE_SUFFIX)}
    assert names - temps - archives == {s.path.name for s in snapshots}
    assert archives <= {"crash" + ARCHIVE_SUFFIX}

    # Leftover temp files are ignored by every reader.
    assert set(mgr.list_sessions()) <= {"crash_0", "crash_1", "crash_2"}
    for session_id in mgr.list_sessions():
        assert len(mgr.load(session_id)) == mgr.load(session_id)[0]["total"]
    assert mgr.resume() == mgr.load_snapshot(snapshots[0].path)

    # The archive survives torn appends: every record read back is whole.
    records = mgr.load_archive("crash")
    assert records
    assert all(r["content"] == ARCHIVED and r["tool_name"] == "bash" for r in records)
    assert len({r["tool_use_id"] for r in records}) == len(records)

    sys.stderr.write(
        f"\n{KILLS} kills in {time.monotonic() - started:.1f}s: {len(snapshots)} snapshots "
        f"loaded, {len(temps)} temp files left, {len(records)} archive records\n"
    )
