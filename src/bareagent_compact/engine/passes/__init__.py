"""The passes of step 1, run in order on one call (:class:`~bareagent_compact.engine.turn.Turn`):
prune and clear thinking, micro-compaction (with the archive and its writer),
the oversize cut, and the catch-up with the writer before the trigger."""
