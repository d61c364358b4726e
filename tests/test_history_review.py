"""The history cache, reviewed where the randomized differential test does not go:
identity against equality, edits made by hooks or between a call and
``record_usage``, option changes, the background mode, write-behind archives,
server compaction, exceptions in the middle of a call, other sequence and
container types, threads, and ``record_usage`` on another list.

Each test runs the same steps on two compactors with the same options, each on
its own copy of the history: the *cached* one is never told anything, the
*plain* one is told ``forget()`` before every operation (so it reads every
message again). Everything observable must agree (see :class:`Twin`).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import threading
from collections import UserDict, UserList
from collections.abc import Callable
from typing import Any

import pytest

from bareagent_compact import (
    AsyncCompactor,
    Compactor,
    JsonlTranscriptManager,
    estimate_tokens,
)
from conftest import tool_history
from test_history_cache import Differ, Received, Warnings, same_pickle, summary_of


class Side(Received):
    """One compactor, its history and what its plug-ins received."""

    def __init__(self, plain: bool, messages: list[Any]) -> None:
        super().__init__()
        self.plain = plain
        self.messages: Any = copy.deepcopy(messages)
        self.compactor: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def run(self, awaitable: Any) -> Any:
        """Await ``awaitable`` on this side's own loop (background tasks stay on it)."""
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
        return self.loop.run_until_complete(awaitable)

    def settle(self) -> None:
        """Let this side's background tasks run to their end."""
        if self.loop is not None:
            for _ in range(20):
                self.loop.run_until_complete(asyncio.sleep(0))

    def provider(self, prompt: Any) -> str:
        self.prompts.append(copy.deepcopy(prompt))
        return summary_of(prompt)

    def archive(self, record: dict[str, Any]) -> None:
        self.archived.append(copy.deepcopy(record))


class Twin:
    """A cached and a forgetting compactor run side by side; :meth:`each` compares."""

    def __init__(
        self,
        messages: list[Any],
        build: Callable[[Side], Any] | None = None,
        **options: Any,
    ) -> None:
        self.sides = (Side(False, messages), Side(True, messages))
        for side in self.sides:
            if build is not None:
                side.compactor = build(side)
            else:
                side.compactor = Compactor(
                    side.provider, side.transcripts, archive=side.archive, **options
                )
        self.steps = 0

    @property
    def cached(self) -> Side:
        return self.sides[0]

    @property
    def plain(self) -> Side:
        return self.sides[1]

    def each(self, operation: Callable[[Side], Any]) -> Any:
        """Run ``operation`` on both sides (``forget()`` first on the plain one), compare
        everything observable, return the cached side's value."""
        handler = Warnings()
        logger = logging.getLogger("bareagent_compact")
        logger.addHandler(handler)
        seen = []
        try:
            for side in self.sides:
                if side.plain:
                    side.compactor.forget()
                try:
                    value = operation(side)
                    if inspect.isawaitable(value):
                        value = side.run(value)
                except BaseException as exc:  # compared, not swallowed
                    if isinstance(exc, KeyboardInterrupt | Exception):
                        value = ("raised", type(exc).__name__, str(exc))
                    else:
                        raise
                seen.append(
                    {
                        "value": value,
                        "history": side.messages,
                        **side.drain(),
                        "warnings": handler.seen[:],
                    }
                )
                handler.seen.clear()
        finally:
            logger.removeHandler(handler)
        self.steps += 1
        if not same_pickle(seen[0], seen[1]):
            found = Differ()(seen[0], seen[1])
            assert found is None, f"step {self.steps}: {found}"
        return seen[0]["value"]

    def call(self, force: bool = False, **kwargs: Any) -> Any:
        return self.each(lambda s: s.compactor(s.messages, force, **kwargs))

    def apply(self, mutation: Callable[[Side], Any]) -> None:
        """The same change on both sides (nothing compared)."""
        for side in self.sides:
            mutation(side)

    def grow(self, turn: int, size: int = 400) -> None:
        """The same new tool round on both sides (see :func:`grow`)."""
        self.apply(lambda side: grow(side, turn, size))

    def close(self) -> None:
        for side in self.sides:
            if side.loop is not None:
                side.loop.close()


def history(rounds: int, size: int = 400) -> list[dict[str, Any]]:
    return tool_history(rounds, output=lambda turn: f"line {turn}\n" * (size // 7))


def grow(side: Side, turn: int, size: int = 400) -> None:
    side.messages.extend(history(turn + 1, size)[-2:])
    side.messages[-2]["content"][0]["id"] = f"g{turn}"
    side.messages[-1]["content"][0]["tool_use_id"] = f"g{turn}"


# ------------------------------------------------------ (1) identity vs equality


def test_a_message_replaced_by_an_equal_mapping_of_another_type_is_checked() -> None:
    """A message dict replaced by an equal ``UserDict`` is not a message dict: the
    call raises the ``TypeError`` a compactor reading everything raises."""
    twin = Twin(history(3), threshold=100_000)
    twin.call()
    twin.call()  # the second call finds nothing changed and nothing to do
    twin.apply(lambda s: s.messages.__setitem__(2, UserDict(s.messages[2])))
    assert twin.cached.messages[2] == twin.plain.messages[2]
    value = twin.call()
    assert value[:2] == ("raised", "TypeError")


def test_forget_makes_an_equal_container_of_another_type_visible() -> None:
    """A list replaced by an equal ``UserList`` inside a message is the documented
    blind spot (``==`` sees no change, the estimate weighs it otherwise): after
    ``forget()`` the count is the one of a compactor reading everything."""
    twin = Twin(history(6), threshold=100_000)
    twin.call()
    twin.call()
    twin.apply(lambda s: s.messages[-1].__setitem__("content", UserList(s.messages[-1]["content"])))
    twin.apply(lambda s: s.compactor.forget())
    twin.call()
    twin.apply(lambda s: grow(s, 7))
    twin.call()
    twin.call()


def test_the_same_result_block_placed_in_a_kept_message_keeps_an_old_result_whole() -> None:
    """An old result whose block object is also in a kept message stays whole; moving
    the sharing without changing any value (an identity-only edit) is seen."""
    messages = history(6)
    twin = Twin(messages, threshold=100_000, keep_recent=2)
    twin.call()
    for turn in range(3):
        twin.apply(lambda s, t=turn: grow(s, 10 + t))
        twin.call()

    def share(side: Side) -> None:
        # the newest result message holds the very block of an older equal one
        block = side.messages[-1]["content"][0]
        side.messages[-3]["content"][0] = block

    twin.apply(lambda s: s.messages[-3]["content"][0].update(s.messages[-1]["content"][0]))
    twin.call()
    twin.apply(share)
    twin.call()
    twin.apply(lambda s: grow(s, 20))
    twin.call()
    twin.apply(lambda s: grow(s, 21))
    twin.call()


def test_a_message_placed_twice_then_edited_through_one_place() -> None:
    twin = Twin(history(5), threshold=100_000, keep_recent=1)
    twin.call()
    twin.apply(lambda s: s.messages.append(s.messages[4]))
    twin.call()
    twin.apply(lambda s: s.messages[4]["content"][0].__setitem__("content", "edited " * 300))
    twin.call()
    twin.apply(lambda s: grow(s, 9))
    twin.call()
    twin.call()


# --------------------------------------------- (2) hooks and edits before usage


def test_an_after_compact_hook_that_appends_to_the_history() -> None:
    def build(side: Side) -> Compactor:
        def after(result: Any, summary: Any) -> None:
            side.messages.append({"role": "user", "content": "note " * 50})

        return Compactor(
            side.provider, side.transcripts, threshold=2_000, archive=side.archive,
            after_compact=after,
        )  # fmt: skip

    twin = Twin(history(4), build)
    for turn in range(12):
        twin.grow(turn)
        twin.call()
        twin.call()


def test_a_before_compact_hook_that_edits_an_old_message_and_skips() -> None:
    def build(side: Side) -> Compactor:
        def before(event: Any) -> bool:
            side.messages[1]["content"] = "task, edited by the hook " * 40
            return False

        return Compactor(
            side.provider, side.transcripts, threshold=2_000, archive=side.archive,
            before_compact=before,
        )  # fmt: skip

    twin = Twin(history(4), build)
    for turn in range(8):
        twin.grow(turn)
        twin.call()
        twin.call()


def test_edits_between_a_call_and_record_usage() -> None:
    twin = Twin(history(4), threshold=3_000)
    for turn in range(10):
        twin.grow(turn)
        twin.call()
        twin.apply(lambda s, t=turn: s.messages[1].__setitem__("content", f"task {t}"))
        twin.each(lambda s, t=turn: s.compactor.record_usage(s.messages, 900 + 300 * t))
        twin.call()


@pytest.mark.parametrize(
    "sent",
    [
        lambda m: [{"role": "system", "content": "tools " * 30}, *m],
        lambda m: m[:-1],
        lambda m: [*m, {"role": "assistant", "content": "reply"}],
        copy.deepcopy,
        lambda m: m[3:],
    ],
    ids=["system-prepended", "last-left-out", "reply-appended", "deep-copy", "tail"],
)
def test_record_usage_with_another_list_than_the_one_compacted(sent: Any) -> None:
    twin = Twin(history(4), threshold=4_000)
    for turn in range(12):
        twin.grow(turn)
        twin.call()
        twin.each(lambda s, t=turn: s.compactor.record_usage(sent(s.messages), 1_000 + 250 * t))
        twin.call()


# ----------------------------------------------------------- (3) option changes


OPTION_CHANGES: list[tuple[str, Any]] = [
    ("threshold", 1_500),
    ("keep_recent", 0),
    ("micro", "cache-friendly"),
    ("max_message_tokens", 200),
    ("archive", None),
    ("token_counter", estimate_tokens),
    ("exclude_tools", ["bash"]),
    ("micro_min_chars", 10_000),
    ("clear_at_least", 50),
]


@pytest.mark.parametrize(("name", "value"), OPTION_CHANGES, ids=[n for n, _ in OPTION_CHANGES])
def test_an_option_changed_between_calls(name: str, value: Any) -> None:
    twin = Twin(history(3), threshold=6_000, keep_recent=2)
    for turn in range(6):
        twin.grow(turn)
        twin.call()
        twin.call()
    twin.apply(lambda s: setattr(s.compactor, name, value))
    twin.call()
    for turn in range(6, 10):
        twin.grow(turn, 2_000)
        twin.call()
        twin.call()


def test_a_counter_of_the_callers_set_and_removed() -> None:
    twin = Twin(history(3), threshold=5_000)
    for turn in range(4):
        twin.grow(turn)
        twin.call()
        twin.each(lambda s: s.compactor.record_usage(s.messages, 2_000))
    twin.apply(lambda s: setattr(s.compactor, "token_counter", lambda m: 10 * len(m)))
    twin.call()
    twin.apply(lambda s: setattr(s.compactor, "token_counter", None))
    for turn in range(4, 10):
        twin.grow(turn)
        twin.call()
        twin.call()


def test_set_session_id_between_calls_with_a_recalling_archive(tmp_path: Any) -> None:
    def build(side: Side) -> Compactor:
        store = JsonlTranscriptManager(tmp_path / ("plain" if side.plain else "cached"))
        return Compactor(
            side.provider, store, threshold=100_000, archive=store.archive,
            micro="cache-friendly",
        )  # fmt: skip

    twin = Twin(history(4, 3_000), build)
    for turn in range(6):
        twin.grow(turn, 3_000)
        twin.call()
        twin.apply(lambda s, t=turn: s.compactor.set_session_id(f"s{t % 2}"))
        twin.call()
    twin.call(force=True)


# -------------------------------------------------- (5) exceptions mid-call


class Interrupt(KeyboardInterrupt):
    pass


def test_a_counter_that_raises_then_recovers() -> None:
    state = {"raise": False}

    def counter(messages: Any) -> int:
        if state["raise"]:
            raise RuntimeError("counter down")
        return estimate_tokens(list(messages))

    twin = Twin(history(3), threshold=4_000, token_counter=counter)
    for turn in range(10):
        state["raise"] = turn % 3 == 1
        twin.grow(turn)
        twin.call()
        twin.call()


@pytest.mark.parametrize("where", ["archive", "after", "before", "save"])
def test_an_interrupt_in_a_plug_in_leaves_the_cache_consistent(where: str) -> None:
    state = {"raise": False}

    def build(side: Side) -> Compactor:
        def interrupting(function: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(*args: Any) -> Any:
                if state["raise"]:
                    raise Interrupt(where)
                return function(*args)

            return wrapped

        transcripts = side.transcripts
        if where == "save":
            transcripts.save = interrupting(transcripts.save)  # type: ignore[method-assign]
        return Compactor(
            side.provider,
            transcripts,
            threshold=3_000,
            keep_recent=1,
            archive=interrupting(side.archive) if where == "archive" else side.archive,
            after_compact=interrupting(lambda r, s: None) if where == "after" else None,
            before_compact=interrupting(lambda e: None) if where == "before" else None,
        )

    twin = Twin(history(3), build)
    for turn in range(12):
        state["raise"] = turn % 4 == 2
        twin.grow(turn)
        twin.call()
        state["raise"] = False
        twin.call()
        twin.call()


# ------------------------------------ (6) other sequences, tuples, SDK objects


def test_a_tuple_inside_a_message_then_removed() -> None:
    twin = Twin(history(3), threshold=4_000)
    twin.call()
    twin.apply(lambda s: s.messages[2]["content"][0].__setitem__("input", {"paths": ("a", "b")}))
    twin.call()
    twin.call()
    twin.apply(lambda s: s.messages[2]["content"][0].__setitem__("input", {"paths": ["a", "b"]}))
    for turn in range(8):
        twin.grow(turn)
        twin.call()
        twin.call()


def test_a_history_that_is_not_a_list() -> None:
    twin = Twin(history(3), threshold=4_000)
    twin.apply(lambda s: setattr(s, "messages", UserList(s.messages)))
    for turn in range(8):
        twin.grow(turn)
        twin.call()
        twin.call()
    twin.apply(lambda s: setattr(s, "messages", list(s.messages)))
    twin.call()
    twin.call()


def test_sdk_objects_appearing_after_plain_calls() -> None:
    types = pytest.importorskip("anthropic.types")
    twin = Twin(history(3), threshold=4_000, keep_recent=1)
    for turn in range(8):
        twin.grow(turn)
        if turn % 3 == 1:

            def as_objects(side: Side) -> None:
                block = side.messages[-2]["content"][0]
                side.messages[-2]["content"][0] = types.ToolUseBlock.model_validate(block)

            twin.apply(as_objects)
        twin.call()
        twin.call()


# --------------------------------------------------------------- (7) threads


def test_calls_from_two_threads_on_two_histories() -> None:
    """One compactor shared by two conversations, called from two threads in turn."""
    twin = Twin(history(3), threshold=4_000)
    other = history(5)
    for side in twin.sides:
        side.other = copy.deepcopy(other)  # type: ignore[attr-defined]

    def in_thread(side: Side, which: str) -> Any:
        box: list[Any] = []
        messages = side.messages if which == "main" else side.other  # type: ignore[attr-defined]
        worker = threading.Thread(target=lambda: box.append(side.compactor(messages)))
        worker.start()
        worker.join()
        return box[0]

    for turn in range(10):
        twin.grow(turn)
        twin.each(lambda s: in_thread(s, "main"))
        twin.each(lambda s: (in_thread(s, "other"), s.other))  # type: ignore[attr-defined]


# -------------------------------------------- (2) an archive hook that edits


@pytest.mark.parametrize("where", [1, -1])
def test_an_archive_hook_that_edits_the_history_during_micro_compaction(where: int) -> None:
    """The archive hook (or another task while it is awaited) edits a message
    before where the micro scan began: the count of the same call sees it."""

    def build(side: Side) -> Compactor:
        def archive(record: dict[str, Any]) -> None:
            side.archive(record)
            side.messages[where]["content"] = "edited " * (20 + 10 * len(side.archived))

        return Compactor(
            side.provider, side.transcripts, threshold=100_000, archive=archive, keep_recent=1
        )

    twin = Twin(history(4), build)
    for turn in range(6):
        twin.grow(turn)
        twin.call()
        twin.call()


# --------------------------------------------------- (4) background, server


def test_the_background_mode() -> None:
    def build(side: Side) -> AsyncCompactor:
        async def provider(prompt: Any) -> str:
            return side.provider(prompt)

        return AsyncCompactor(
            provider, side.transcripts, threshold=4_000, background_at=0.5, keep_recent=2,
        )  # fmt: skip

    twin = Twin(history(2), build)
    try:
        for turn in range(24):
            twin.grow(turn)
            twin.call()
            if turn % 3 == 0:
                twin.apply(Side.settle)
            twin.call()
            if turn % 5 == 4:
                twin.apply(lambda s: s.messages[1].__setitem__("content", "edited " * 20))
                twin.call()
    finally:
        twin.close()


def test_a_write_behind_archive(tmp_path: Any) -> None:
    def build(side: Side) -> Compactor:
        store = JsonlTranscriptManager(
            tmp_path / ("plain" if side.plain else "cached"), write_behind=True
        )
        side.store = store  # type: ignore[attr-defined]
        return Compactor(
            side.provider, store, threshold=6_000, archive=store.archive, keep_recent=2
        )

    twin = Twin(history(3, 1_500), build)
    try:
        for turn in range(16):
            twin.grow(turn, 1_500)
            twin.call()
            twin.apply(lambda s: s.store.flush())  # type: ignore[attr-defined]
            twin.call()
            twin.apply(lambda s: s.store.flush())  # type: ignore[attr-defined]
            twin.call()
    finally:
        for side in twin.sides:
            side.store.close()  # type: ignore[attr-defined]
    files = [sorted(p.read_text() for p in (tmp_path / n).rglob("*") if p.is_file())
             for n in ("cached", "plain")]  # fmt: skip
    assert files[0] == files[1]


BLOCK = {"type": "compaction", "content": "Earlier: the user asked X.", "signature": "csig_1"}


def thinking_round(turn: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"think {turn} " * 30, "signature": f"s{turn}"},
                {"type": "tool_use", "id": f"k{turn}", "name": "bash", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"k{turn}", "content": "out " * 300}
            ],
        },
        {"role": "assistant", "content": f"done {turn}"},
        {"role": "user", "content": f"next {turn}"},
    ]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"prune_before_server_compaction": True},
        {"clear_thinking_after_turns": 1},
        {"prune_before_server_compaction": True, "clear_thinking_after_turns": 0},
    ],
    ids=["plain", "prune", "clear-thinking", "both"],
)
def test_a_history_whose_live_part_starts_at_a_compaction_block(options: dict[str, Any]) -> None:
    twin = Twin(history(3), threshold=5_000, keep_recent=1, **options)
    for turn in range(14):
        twin.apply(lambda s, t=turn: s.messages.extend(thinking_round(t)))
        if turn in (3, 9):
            twin.apply(lambda s: s.messages.append({"role": "assistant", "content": [dict(BLOCK)]}))
            twin.apply(lambda s: s.messages.append({"role": "user", "content": "go on"}))
        twin.call()
        twin.each(lambda s, t=turn: s.compactor.record_usage(s.messages, 1_500 + 100 * t))
        twin.call()


def test_forget_reads_a_compaction_block_placed_in_an_old_message() -> None:
    """``forget()`` makes the next call read every message again: a compaction
    block added in place to an old message is then found, as a new compactor finds it."""
    messages = history(6)
    compactor = Compactor(summary_of, threshold=100_000)
    compactor(messages)
    messages[4]["content"].insert(0, dict(BLOCK))
    compactor.forget()
    fresh = Compactor(summary_of, threshold=100_000)
    assert Differ()(compactor(messages), fresh(copy.deepcopy(messages))) is None


# ------------------------------------------------- async: another task edits


def test_another_task_edits_an_old_message_while_the_archive_is_awaited() -> None:
    def build(side: Side) -> AsyncCompactor:
        async def archive(record: dict[str, Any]) -> None:
            await asyncio.sleep(0)
            side.archive(record)
            side.messages[1]["content"] = "edited " * (20 + 10 * len(side.archived))

        async def provider(prompt: Any) -> str:
            return side.provider(prompt)

        return AsyncCompactor(provider, threshold=100_000, archive=archive, keep_recent=1)

    twin = Twin(history(4), build)
    try:
        for turn in range(6):
            twin.grow(turn)
            twin.call()
            twin.call()
    finally:
        twin.close()


def test_a_failed_snapshot_before_pruning_is_tried_again_on_the_next_call() -> None:
    state = {"fail": True}

    def build(side: Side) -> Compactor:
        save = side.transcripts.save

        def failing(messages: Any, session_id: str) -> None:
            if state["fail"]:
                raise OSError("disk full")
            save(messages, session_id)

        side.transcripts.save = failing  # type: ignore[method-assign]
        return Compactor(
            side.provider, side.transcripts, threshold=100_000,
            prune_before_server_compaction=True,
        )  # fmt: skip

    twin = Twin(history(3), build)
    twin.apply(lambda s: s.messages.append({"role": "assistant", "content": [dict(BLOCK)]}))
    twin.apply(lambda s: s.messages.append({"role": "user", "content": "go on"}))
    first = twin.call()
    assert first.pruned == 0
    twin.call()
    state["fail"] = False
    assert twin.call().pruned > 0


def test_a_summariser_that_puts_an_old_result_back_while_it_fails() -> None:
    """Another party edits the history while the summary is made (here the
    summariser itself), then the summary fails: the next call sees the edit."""

    def build(side: Side) -> Compactor:
        def provider(prompt: Any) -> str:
            side.prompts.append(copy.deepcopy(prompt))
            for message in side.messages:
                if message["role"] == "user" and isinstance(message["content"], list):
                    block = message["content"][0]
                    if str(block.get("content", "")).startswith("[truncated:"):
                        block["content"] = "put back " * 200
            raise RuntimeError("summariser down")

        return Compactor(
            provider, threshold=2_500, keep_recent=1, token_counter=estimate_tokens,
        )  # fmt: skip

    twin = Twin(history(3), build)
    for turn in range(8):
        twin.grow(turn)
        twin.call()
        twin.call()


def test_a_system_message_holding_the_block_of_a_result_truncated_later() -> None:
    """A block object shared by a system message and a tool result: truncating the
    result changes the system message too, which lies before where the scan began."""
    twin = Twin(history(3), threshold=100_000, keep_recent=1)
    twin.call()
    twin.apply(lambda s: grow(s, 5))
    twin.call()

    def share(side: Side) -> None:
        grow(side, 6)
        side.messages[0]["content"] = [{"type": "text", "text": "You are an agent."}]
        side.messages[0]["content"].append(side.messages[-1]["content"][0])

    twin.apply(share)
    twin.call()
    twin.apply(lambda s: grow(s, 7))
    twin.call()
    twin.call()
