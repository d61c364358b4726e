"""Command line: ``python -m bareagent_compact demo``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bareagent_compact.demo import DEMO_THRESHOLD, run_demo


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m bareagent_compact`` and the ``bareagent-compact`` script."""
    parser = argparse.ArgumentParser(
        prog="python -m bareagent_compact",
        description="Context compaction for LLM agents.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run a scripted agent session offline")
    demo.add_argument(
        "--threshold",
        type=int,
        default=DEMO_THRESHOLD,
        help=f"full-compaction threshold in estimated tokens (default {DEMO_THRESHOLD})",
    )
    demo.add_argument(
        "--seed", type=int, default=7, help="seed of the scripted session (default 7)"
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        run_demo(sys.stdout, threshold=args.threshold, seed=args.seed)
    return 0
