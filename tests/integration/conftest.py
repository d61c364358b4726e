"""Integration tests: the real ``anthropic`` and ``openai`` clients over a fake local API.

They need the ``integration`` extra (``pip install ".[integration]"``); without
it every module here skips. The examples directory is importable from here, so
the tests drive the example loops and their fake server.
"""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))
