"""Command line: ``bareagent-compact VERB ...`` or ``python -m bareagent_compact VERB ...``.

Verbs: ``demo``, ``estimate``, ``inspect``, ``show``, ``compact`` and ``replay``;
each takes ``--json`` for scripts. Exit codes: 0 done, 1 the operation failed
(e.g. the summary command failed), 2 bad usage or bad input, with nothing written.

A wing of the package that the library never imports: ``app`` (the parser and
``main``), the verbs (``look``: estimate, inspect, show; ``compact``; ``sessions``:
replay, demo) and what they run (``replay``, ``demo``, ``turns``, ``plot``,
``inspection``, ``histories``, ``command``).
"""

from __future__ import annotations

from bareagent_compact.cli.app import main

__all__ = ["main"]
