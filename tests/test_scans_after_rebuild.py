"""After a full compaction the scans start anew: a long-lived compactor does what
a compactor reading everything does on the next call (an oversize summary kept by
a forced compaction is cut then). The two sessions are the generated ones of
``benchmarks/differential.py`` in which a full compaction keeps a summary bigger than
what it replaced and a later call truncates (a stale oversize scan once skipped
that cut; the chat session is chosen anew when the prompts change the sessions)."""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from bareagent_compact import Compactor

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "differential.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("differential_sessions", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Fresh(Compactor):
    """Reads every message on every call, remembering nothing of the history."""

    def __call__(self, messages: Any, force: bool = False, **keywords: Any) -> Any:
        self.forget()
        return super().__call__(messages, force, **keywords)


def steps(module: ModuleType, kind: type[Compactor], session: int, dialect: str) -> list[Any]:
    warnings = module.Warnings()
    logger = logging.getLogger("bareagent_compact")
    logger.addHandler(warnings)
    try:
        plan = module.session_plan(0, session)
        return list(module.run_case(kind, plan, dialect, "spec", warnings))
    finally:
        logger.removeHandler(warnings)


@pytest.mark.parametrize(("session", "dialect"), [(187, "anthropic"), (1407, "chat")])
def test_the_call_after_a_rebuild_reads_the_history_as_a_fresh_compactor(
    session: int, dialect: str
) -> None:
    module = generator()
    long_lived = steps(module, Compactor, session, dialect)
    fresh = steps(module, Fresh, session, dialect)
    assert [s.get("result") for s in long_lived] == [s.get("result") for s in fresh]
    assert any((s.get("result") or {}).get("truncated") for s in long_lived)
