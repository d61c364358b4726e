"""The public surface: `__all__` lists exactly what the package exports."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from types import ModuleType

import pytest

import bareagent_compact
from bareagent_compact import providers
from bareagent_compact import replay as kept
from bareagent_compact.cli import replay as moved


def test_all_lists_exactly_the_public_names() -> None:
    exported = {
        name
        for name, value in vars(bareagent_compact).items()
        if (not name.startswith("__") or name == "__version__")
        and not isinstance(value, ModuleType)
    }
    lazy = {"AsyncCompactor", "SqlTranscriptManager", "__version__"}
    assert set(bareagent_compact.__all__) == exported | lazy
    listed = {
        name
        for name in dir(bareagent_compact)
        if (not name.startswith("__") or name == "__version__")
        and not isinstance(getattr(bareagent_compact, name), ModuleType)
    }
    assert set(bareagent_compact.__all__) == listed
    assert bareagent_compact.__all__ == sorted(bareagent_compact.__all__)


def test_spec_names_are_importable() -> None:
    for name in ("Compactor", "_micro_compact", "_serialize", "estimate_tokens"):
        assert name in bareagent_compact.__all__
        assert callable(getattr(bareagent_compact, name))


def test_recall_names_are_exported() -> None:
    for name in ("ArchiveReader", "DEFAULT_RECALL_LIMIT", "RECALL_TOOL_NAME", "recall_tool"):
        assert name in bareagent_compact.__all__
        assert getattr(bareagent_compact, name) is not None
    assert bareagent_compact.recall_tool("anthropic")["name"] == bareagent_compact.RECALL_TOOL_NAME


def test_check_request_is_exported() -> None:
    assert "check_request" in bareagent_compact.__all__
    assert bareagent_compact.check_request([{"role": "user", "content": "hi"}]) == []


def test_server_summary_names_are_exported() -> None:
    for name in ("ServerCompactionRequest", "ServerSummary", "ServerSummaryProvider"):
        assert name in bareagent_compact.__all__
    for name in ("anthropic_server_compaction", "openai_responses_compaction"):
        assert name in providers.__all__ and callable(getattr(providers, name))
    assert "SERVER_COMPACTION_FAILED" in bareagent_compact.Reason.__members__


def test_continuation_summariser_names_are_exported() -> None:
    for name in ("ContinuationRequest", "ContinuationProvider"):
        assert name in bareagent_compact.__all__
    for name in (
        "anthropic_continuation_provider",
        "openai_chat_continuation_provider",
        "openai_responses_continuation_provider",
    ):
        assert name in providers.__all__ and callable(getattr(providers, name))


def test_package_ships_py_typed() -> None:
    assert files("bareagent_compact").joinpath("py.typed").is_file()


SRC = Path(bareagent_compact.__file__).resolve().parent.parent
HEAVY = ("sqlite3", "asyncio", "argparse", "subprocess")


def test_importing_the_package_loads_no_store_async_or_command_line_modules_nor_the_cli() -> None:
    # A fresh interpreter: this test process has long since loaded all four.
    script = (
        "import sys, bareagent_compact\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
        "print(sorted(m for m in sys.modules if m.startswith('bareagent_compact.cli')))\n"
        "print(bareagent_compact.AsyncCompactor.__name__, "
        "bareagent_compact.SqlTranscriptManager.__name__)\n"
        "from bareagent_compact import AsyncCompactor, SqlTranscriptManager\n"
        "print(AsyncCompactor is bareagent_compact.AsyncCompactor)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    )
    assert done.stdout.splitlines() == [
        "[]",
        "[]",
        "AsyncCompactor SqlTranscriptManager",
        "True",
    ]


def version_seen_with(metadata_version: str) -> str:
    """``__version__`` in a fresh interpreter where the package metadata says
    ``metadata_version`` (``"missing"``: the distribution is not installed)."""
    script = (
        "import importlib.metadata as metadata\n"
        f"wanted = {metadata_version!r}\n"
        "def version(name):\n"
        "    assert name == 'bareagent-compact', name\n"
        "    if wanted == 'missing':\n"
        "        raise metadata.PackageNotFoundError(name)\n"
        "    return wanted\n"
        "metadata.version = version\n"
        "import bareagent_compact\n"
        "print(bareagent_compact.__version__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout.strip()


def test_version_is_read_from_the_installed_distributions_metadata() -> None:
    assert version_seen_with("9.8.7") == "9.8.7"
    installed = pytest.importorskip("importlib.metadata").version("bareagent-compact")
    assert bareagent_compact.__version__ == installed


def test_version_without_installed_metadata_is_a_placeholder_not_an_error() -> None:
    assert version_seen_with("missing") == "0+unknown"


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchName"):
        bareagent_compact.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def test_the_replay_module_keeps_its_documented_name() -> None:
    assert kept.replay is moved.replay
    assert kept.__all__ == moved.__all__
    assert all(getattr(kept, name) is getattr(moved, name) for name in kept.__all__)
