"""Steps 2-8, the full compaction: plan (trigger, split, back-off), consult the
hook, snapshot, summarise, check and commit; and the same in the background."""
