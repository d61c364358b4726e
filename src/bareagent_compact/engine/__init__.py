"""The compaction engine: the lasting parts of a compactor, the passes of one
call, and the full compaction, behind the :class:`Engine` both drivers wrap
(see ``docs/architecture.md``)."""

from bareagent_compact.engine.facade import Engine
from bareagent_compact.engine.full.answer import summary_text

__all__ = ["Engine", "summary_text"]
