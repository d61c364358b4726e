"""The examples run as documented: ``python examples/<name>.py --offline``.

Each runs in a fresh interpreter against the fake local API and must end with
no rejected request.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

anthropic = pytest.importorskip("anthropic")
pytest.importorskip("openai")

from _fake_server import FakeServer, anthropic_client

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOOPS = ["anthropic_loop", "async_anthropic_loop", "openai_chat_loop", "openai_responses_loop"]
BACKGROUND = "async_anthropic_loop --background"
SERVER = "server_compaction_loop"
SERVER_RESPONSES = "server_compaction_loop --api responses --server-too"


REPL_SCRIPT = "\n".join(
    [
        "Why do the workers time out?",
        "/compact keep the worker names",
        "/new",
        "Is the scheduler dropping jobs?",
        "/resume",
        "/sessions",
        "/quit",
        "",
    ]
)


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def examples_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Done]:
    """Every example started at once (they spend most of their time importing), then awaited."""
    transcripts = tmp_path_factory.mktemp("repl-transcripts")
    commands = {name: ["--turns", "15", "--quiet"] for name in LOOPS}
    commands[BACKGROUND] = ["--turns", "15", "--quiet", "--background"]
    commands[SERVER] = ["--turns", "15", "--quiet"]
    commands[SERVER_RESPONSES] = ["--turns", "15", "--quiet", *SERVER_RESPONSES.split()[1:]]
    commands["repl"] = ["--dir", str(transcripts)]
    commands["anthropic_loop --recall"] = ["--turns", "15", "--quiet", "--recall"]
    processes = {
        name: subprocess.Popen(
            [sys.executable, str(EXAMPLES / f"{name.split()[0]}.py"), "--offline", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in commands.items()
    }
    done: dict[str, Done] = {}
    for name, process in processes.items():
        out, err = process.communicate(REPL_SCRIPT if name == "repl" else "", timeout=300)
        done[name] = Done(process.returncode, out, err)
    done["repl_dir"] = Done(0, str(transcripts), "")
    return done


@pytest.mark.parametrize("name", [*LOOPS, BACKGROUND, SERVER, SERVER_RESPONSES])
def test_the_example_loop_runs_offline_and_compacts(
    name: str, examples_run: dict[str, Done]
) -> None:
    done = examples_run[name]
    assert done.returncode == 0, done.stderr[-2000:]
    figures = dict(re.findall(r"(\w+)=(\d+)", done.stdout.strip().splitlines()[-1]))
    assert figures["turns"] == "15"
    assert figures["rejected_requests"] == "0"
    assert int(figures["full_compactions"]) >= 1
    assert figures["failed_compactions"] == "0"


def test_the_anthropic_loop_with_recall_gets_the_bytes_back(examples_run: dict[str, Done]) -> None:
    done = examples_run["anthropic_loop --recall"]
    assert done.returncode == 0, done.stderr[-2000:]
    figures = dict(re.findall(r"(\w+)=(\d+)", done.stdout.strip().splitlines()[-1]))
    assert figures["rejected_requests"] == "0"
    assert figures["recalls"] == figures["recalled_exact"] == "1"
    assert int(figures["full_compactions"]) >= 1


def test_the_repl_compacts_starts_and_resumes_sessions(examples_run: dict[str, Done]) -> None:
    done = examples_run["repl"]
    tmp_path = Path(examples_run["repl_dir"].stdout)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "Context compaction full:" in out
    assert "takes no focus text" not in out  # the focus went to the summary as instructions=
    first = re.search(r"Session (session-\S+)", out)
    assert first is not None
    assert "New session session-" in out
    assert f"Resumed {first.group(1)}:" in out
    assert out.strip().endswith("rejected_requests=0")
    saved = {p.name for p in tmp_path.iterdir()}
    assert len([name for name in saved if name.startswith("session-")]) >= 2


def readme_loop() -> str:
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Call it every turn in an agent loop", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_loop_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer()
    client = anthropic_client(server)
    monkeypatch.setattr(anthropic, "Anthropic", lambda: client)
    monkeypatch.setenv("HOME", str(tmp_path))
    namespace: dict[str, object] = {}
    exec(compile(readme_loop(), "README.md", "exec"), namespace)
    assert server.stats.rejections == []
    assert server.stats.agent_requests == 5  # the fake model answers in text at its fifth request
    messages = namespace["messages"]
    assert isinstance(messages, list)
    assert messages[-1]["role"] == "assistant"
    assert (tmp_path / ".myagent" / "transcripts").is_dir()
