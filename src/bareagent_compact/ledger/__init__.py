"""A token count anchored on the input sizes a model API reports (the usage ledger).

Every response says exactly how large its request was. The ledger keeps, for each
message of the last reported request, the share of that size it was charged; what
the request cost beyond its messages (system prompt, tool definitions) is the
overhead. A count is then:

    overhead + charges of the messages still there, unchanged + estimate of the rest

where "the rest" is whatever is new or was edited since the last report (new
turns, results truncated by micro-compaction, a summary). Content that left the
history leaves at the size it was charged, so the bias of an estimate never
outlives one report. The estimate of new content is linear in a few cheap counts
per message (characters by class, lines, runs of punctuation and of spaces,
strings, images), with weights refitted by recursive least squares on the
reports' exact sizes of the new content.

Per-message work is done once: messages are remembered by identity with a check
of their content (so in-place edits are seen) and, failing that, by content
(so a caller that rebuilds its dicts every turn loses nothing). Only the messages
of the latest list are kept. Before the first report the count is exactly
:func:`~bareagent_compact.estimate_token

``ledger.usage_ledger`` holds ``UsageLedger``, ``ledger.entries`` what it keeps
per message, ``ledger.reading`` and ``ledger.features`` how a message is read
and counted, and ``ledger.calibration`` the weights refitted on the reports.
This package re-exports them.
"""

from __future__ import annotations

from bareagent_compact.ledger.features import FEATURES, text_features
from bareagent_compact.ledger.reading import message_features, read_message
from bareagent_compact.ledger.usage_ledger import UsageLedger

__all__ = ["FEATURES", "UsageLedger", "message_features", "read_message", "text_features"]
