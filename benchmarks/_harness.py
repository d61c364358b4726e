"""Where the accuracy harness (``../shared/accuracy``, or ``$ACCURACY_DIR``) and its
virtual environment (``.venv-accuracy``, or ``$ACCURACY_VENV``) are, and how a
benchmark that replays the harness's sessions runs itself with that environment's
Python (it has the tokenizers)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = Path(os.environ.get("ACCURACY_DIR", ROOT.parent / "shared" / "accuracy"))
VENV = Path(os.environ.get("ACCURACY_VENV", ROOT / ".venv-accuracy"))


def reexec_in_harness_venv(script: str, argv: list[str]) -> None:
    """Run ``script`` (a benchmark's ``__file__``) again with the harness's Python and
    ``PYTHONPATH=src`` plus the harness, unless this is that Python already; without
    the harness or its environment, say so and exit (status 0)."""
    python = VENV / "bin" / "python"
    if not (HARNESS / "replay.py").is_file() or not python.is_file():
        print(
            f"{Path(script).stem}: needs the accuracy harness at {HARNESS} and its "
            f"environment at {VENV} (bash {HARNESS}/setup.sh); skipped"
        )
        raise SystemExit(0)
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(HARNESS)]))
    os.execve(str(python), [str(python), str(Path(script).resolve()), *argv], env)
