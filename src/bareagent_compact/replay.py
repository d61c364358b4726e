"""Replay a recorded session turn by turn: :mod:`bareagent_compact.cli.replay` by its old name."""

from __future__ import annotations

from bareagent_compact.cli.replay import (
    CountingProvider,
    ReplayResult,
    TurnRecord,
    is_model_output,
    model_call_indices,
    replay,
)

__all__ = [
    "CountingProvider",
    "ReplayResult",
    "TurnRecord",
    "is_model_output",
    "model_call_indices",
    "replay",
]
