"""The history cache is invisible: a compactor that remembers the history between
calls behaves exactly like one made to read every message again.

Two compactors with the same options run side by side over generated agent
sessions: the *cached* one is never told anything, the *plain* one is told
``forget()`` before every call (and before every ``record_usage`` and ``undo``),
which makes it take the uncached path. Each works on its own deep copy of the
same history, and every step applies the same mutation to both copies: appended
turns, in-place edits of strings, blocks and nested lists, dicts replaced by
equal new ones, removed, moved and aliased messages, undo, forced calls,
instructions, usage reports, option changes and new session ids. After each call
the two must agree on the result (every field), the history (type-exact, key
order and aliasing included), the archive records, the summariser prompts, the
transcript snapshots and the warnings logged.

Never made: a change of type between equal values (``1`` to ``True`` or
``1.0``), which ``==`` cannot see; :func:`test_forget_makes_a_type_only_edit_visible`
shows what ``forget()`` is for. ``forget()`` drops what can be read again from the
history, never a usage the API reported, so sessions with ``record_usage`` are
compared too.

``BAREAGENT_DIFF_CALLS`` sets the number of calls per case for a longer run
(at least :data:`DEFAULT_CALLS`, the normal run's: 3,456 calls in all, each made
on both sides).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import importlib
import inspect
import itertools
import json
import logging
import os
import pickle
import random
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

import pytest

from bareagent_compact import (
    Action,
    AsyncCompactor,
    CompactionResult,
    Compactor,
    estimate_tokens,
)
from conftest import MemoryTranscripts, dialogue, tool_history
from converters import to_chat, to_responses

DEFAULT_CALLS: Final = 72
"""Calls per case in the normal run (48 cases)."""

CALLS: Final = max(DEFAULT_CALLS, int(os.environ.get("BAREAGENT_DIFF_CALLS") or 0))
SESSION_CALLS: Final = 36 if CALLS <= DEFAULT_CALLS else 160
"""Calls per generated session; a case runs sessions until it has made ``CALLS``."""

DIALECTS: Final[dict[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]]] = {
    "anthropic": lambda history: history,
    "chat": to_chat,
    "responses": to_responses,
}
TEXT_TYPES: Final = ("text", "input_text", "output_text")
WORDS: Final = (
    "read", "the", "config", "文件", "失败", "error:", "path/to/x.py", "ok", "{}",
    "\n", "def", "return", "😀", "TODO", "λ", "Traceback", "42", "    ",
)  # fmt: skip
TOOLS: Final = ("bash", "read_file", "grep", "edit")


@dataclasses.dataclass(frozen=True)
class Case:
    """One configuration the two compactors are compared under."""

    dialect: str
    micro: str = "spec"
    archive: bool = True
    usage: bool = True
    driver: str = "sync"
    sdk: bool = False

    @property
    def name(self) -> str:
        flags = [self.dialect, self.micro, self.driver]
        flags += ["archive"] * self.archive + ["usage"] * self.usage + ["sdk"] * self.sdk
        return "-".join(flags)


CASES: Final = [
    Case(dialect, micro, archive, usage, driver)
    for dialect, micro, archive, usage, driver in itertools.product(
        DIALECTS, ("spec", "cache-friendly"), (True, False), (True, False), ("sync", "async")
    )
]

# ------------------------------------------------------------------ generation


class Turns:
    """Realistic agent turns, made in Anthropic form and converted to ``dialect``."""

    def __init__(self, rng: random.Random, case: Case) -> None:
        self.rng = rng
        self.case = case
        self.counter = 0
        self.lines = [f"{self.words(2, 12)}\n" for _ in range(64)]

    def words(self, low: int, high: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(low, high)))

    def new_id(self) -> str:
        self.counter += 1
        return f"toolu_{self.counter:04d}"

    def blob(self) -> str:
        """A tool output: mostly short, sometimes a page, rarely a huge log."""
        roll = self.rng.random()
        if roll < 0.7:
            return self.words(0, 60)
        size = self.rng.randint(1_000, 6_000) if roll < 0.94 else self.rng.randint(15_000, 60_000)
        lines = self.rng.choices(self.lines, k=size // 40 + 1)
        return "".join(f"{n:5d} {line}" for n, line in enumerate(lines))

    def output(self) -> Any:
        if self.rng.random() < 0.15:
            return [
                {"type": "text", "text": self.blob()},
                {"type": "text", "text": self.words(1, 9)},
            ]
        return self.blob()

    def tool_input(self) -> dict[str, Any]:
        rng = self.rng
        return {
            "command": self.words(1, 6),
            "paths": [
                f"src/{rng.choice(WORDS).strip() or 'x'}.py" for _ in range(rng.randint(0, 3))
            ],
            "options": {
                "depth": rng.randint(0, 5),
                "flags": ["-n", "-r", "-i"][: rng.randint(0, 3)],
            },
        }

    def tool_round(self) -> list[dict[str, Any]]:
        rng = self.rng
        blocks: list[dict[str, Any]] = []
        if rng.random() < 0.5:
            blocks.append({"type": "text", "text": self.words(1, 20)})
        uses = [
            {
                "type": "tool_use",
                "id": self.new_id(),
                "name": rng.choice(TOOLS),
                "input": self.tool_input(),
            }
            for _ in range(rng.choice((1, 1, 1, 2, 3)))
        ]
        results = [
            {"type": "tool_result", "tool_use_id": use["id"], "content": self.output()}
            for use in uses
        ]
        return [
            {"role": "assistant", "content": blocks + uses},
            {"role": "user", "content": results},
        ]

    def request(self) -> Any:
        """The user's words: a string, or text blocks (a pasted file and a question)."""
        if self.rng.random() < 0.6:
            return self.words(1, 15)
        return [{"type": "text", "text": self.blob()}, {"type": "text", "text": self.words(1, 9)}]

    def turn(self) -> list[dict[str, Any]]:
        """1-3 messages in Anthropic form: a tool round, a reply and the user's next
        request, or a request followed by a system reminder."""
        roll = self.rng.random()
        if roll < 0.65:
            return self.tool_round()
        if roll < 0.8:
            return [
                {"role": "assistant", "content": self.words(1, 30)},
                {"role": "user", "content": self.request()},
            ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": self.request()}]
        for _ in range(self.rng.choice((1, 1, 2))):
            messages.append({"role": "system", "content": "<system-reminder> " + self.words(1, 8)})
        return messages

    def converted(self, history: list[dict[str, Any]]) -> list[Any]:
        messages: list[Any] = DIALECTS[self.case.dialect](history)
        if self.case.sdk:
            messages = [
                sdk_object(m, self.case.dialect) if self.rng.random() < 0.6 else m for m in messages
            ]
        return messages

    def initial(self) -> list[Any]:
        """A starting history from the shared builders: tool rounds, or a dialogue."""
        rng = self.rng
        if rng.random() < 0.75:
            history = tool_history(
                rng.randint(0, 10),
                request=self.words(1, 12),
                output=lambda turn: self.output(),
                name=lambda turn: rng.choice(TOOLS),
                tool_id=lambda turn: self.new_id(),
            )
        else:
            history = [
                {"role": "system", "content": "You are an agent."},
                *dialogue(rng.randint(1, 12)),
            ]
        return DIALECTS[self.case.dialect](history)


def sdk_object(message: dict[str, Any], dialect: str) -> Any:
    """``message`` as the SDK's response objects put it in a history, where an
    assistant's output has such a form; other messages are returned as they are."""
    return SDK_FORMS[dialect](message)


def anthropic_blocks(message: dict[str, Any]) -> Any:
    """An assistant message whose content is the response's ``TextBlock``s and
    ``ToolUseBlock``s (``{"role": "assistant", "content": response.content}``)."""
    if message["role"] != "assistant" or not isinstance(message["content"], list):
        return message
    types = importlib.import_module("anthropic.types")
    kinds = {"text": types.TextBlock, "tool_use": types.ToolUseBlock}
    return {
        **message,
        "content": [kinds[b["type"]].model_validate(b) for b in message["content"]],
    }


def chat_message(message: dict[str, Any]) -> Any:
    """``completion.choices[0].message``: a ``ChatCompletionMessage``."""
    if message["role"] != "assistant" or isinstance(message["content"], list):
        return message
    chat = importlib.import_module("openai.types.chat")
    return chat.ChatCompletionMessage.model_validate(message)


def responses_item(message: dict[str, Any]) -> Any:
    """An item of ``response.output``: a function call or an assistant message."""
    responses = importlib.import_module("openai.types.responses")
    if message.get("type") == "function_call":
        return responses.ResponseFunctionToolCall.model_validate(message)
    if message.get("type") != "message" or message.get("role") != "assistant":
        return message
    return responses.ResponseOutputMessage.model_validate(
        {**message, "id": f"msg_{zlib.crc32(repr(message).encode())}", "status": "completed"}
    )


SDK_FORMS: Final = {
    "anthropic": anthropic_blocks,
    "chat": chat_message,
    "responses": responses_item,
}


def plain_json(value: Any) -> Any:
    """A JSON round trip (an SDK object as the dict the compactor would make of it)."""
    dumped = json.dumps(
        value,
        ensure_ascii=False,
        default=lambda o: o.model_dump(mode="json", by_alias=True, exclude_none=True),
    )
    return json.loads(dumped)


# ------------------------------------------------------------------- plug-ins


def summary_of(prompt: Any) -> str:
    """A deterministic summary; some prompts make the summariser fail, answer blank
    or answer longer than what it summarises."""
    digest = zlib.crc32(json.dumps(prompt, ensure_ascii=False, sort_keys=True).encode())
    if digest % 23 == 0:
        raise RuntimeError("summariser unavailable")
    if digest % 29 == 0:
        return "   "
    if digest % 31 == 0:
        return "long " * 6_000
    return f"Summary {digest % 1000}: read the config, ran the tests, fixed two files."


class Received:
    """What the plug-ins of one compactor received: prompts, archive records and
    snapshots (kept until :meth:`drain`)."""

    def __init__(self) -> None:
        self.prompts: list[Any] = []
        self.archived: list[Any] = []
        self.transcripts = MemoryTranscripts()

    def drain(self) -> dict[str, Any]:
        """What the plug-ins received since the last drain."""
        taken = {
            "archived": self.archived[:],
            "prompts": self.prompts[:],
            "saved": self.transcripts.saved[:],
        }
        self.archived.clear()
        self.prompts.clear()
        self.transcripts.saved.clear()
        return taken


class Side(Received):
    """One compactor, its own copy of the history and what its plug-ins received."""

    def __init__(
        self, case: Case, options: dict[str, Any], factory: type[Any], plain: bool
    ) -> None:
        super().__init__()
        self.plain = plain
        self.messages: list[Any] = []
        self.fulls: list[CompactionResult] = []

        def provider(prompt: Any) -> str:
            self.prompts.append(copy.deepcopy(prompt))
            return summary_of(prompt)

        async def async_provider(prompt: Any) -> str:
            return provider(prompt)

        def archive(record: dict[str, Any]) -> None:
            self.archived.append(copy.deepcopy(record))
            if zlib.crc32(repr(record).encode()) % 19 == 0:
                raise OSError("archive disk full")

        async def async_archive(record: dict[str, Any]) -> None:
            archive(record)

        transcripts: Any = self.transcripts if options.pop("transcripts") else None
        hooks: tuple[Any, Any] = (provider, archive)
        if case.driver == "async":  # awaited plug-ins: no worker threads
            hooks = (async_provider, async_archive)
            transcripts = AsyncTranscripts(self.transcripts) if transcripts else None
        self.compactor = factory(
            hooks[0], transcripts, archive=hooks[1] if case.archive else None, **options
        )



class AsyncTranscripts:
    """An awaited transcript manager over a :class:`MemoryTranscripts`."""

    def __init__(self, memory: MemoryTranscripts) -> None:
        self.memory = memory

    async def save(self, messages: list[dict[str, Any]], session_id: str) -> None:
        self.memory.save(messages, session_id)


class Warnings(logging.Handler):
    """The library's warnings, as ``(logger name, message)`` pairs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((record.name, record.getMessage()))

    def take(self) -> list[tuple[str, str]]:
        taken, self.seen = self.seen, []
        return taken


def session_options(rng: random.Random, case: Case) -> dict[str, Any]:
    options: dict[str, Any] = {
        "threshold": rng.choice((1_500, 2_500, 4_000, 7_000)),
        "keep_recent": rng.choice((None, 0, 1, 2, 3)),
        "keep_tool_pairs": rng.random() < 0.8,
        "pin_facts": rng.random() < 0.15,
        "rolling_summaries": rng.random() < 0.8,
        "transcripts": rng.random() < 0.5,
        "session_id": rng.choice(("alpha", "beta")),
    }
    if case.micro != "spec":
        options["micro"] = case.micro
    if rng.random() < 0.3:
        options["max_message_tokens"] = rng.choice((None, 1_000, 5_000))
    if rng.random() < 0.2:
        options["exclude_tools"] = ["grep"]
    return options


# ------------------------------------------------------------------ comparison


class Found(Exception):
    """A difference, and (filled in on the way out) where it is."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.path: list[str] = []

    def where(self) -> str:
        return "".join(reversed(self.path)) + ": " + self.what


class Differ:
    """The first difference between two values: types exact, dict keys in order,
    dataclass fields (``compare=False`` ones too) and the aliasing of dicts and
    lists (which object each one is first met as)."""

    def __init__(self) -> None:
        self.order_a: dict[int, int] = {}
        self.order_b: dict[int, int] = {}

    def __call__(self, a: Any, b: Any) -> str | None:
        try:
            self.check(a, b)
        except Found as found:
            return found.where()
        return None

    def check(self, a: Any, b: Any) -> None:
        if type(a) is not type(b):
            raise Found(f"{type(a).__name__} {short(a)} != {type(b).__name__} {short(b)}")
        if isinstance(a, (dict, list)):
            self.container(a, b)
        elif isinstance(a, tuple):
            self.contents(a, b)
        elif dataclasses.is_dataclass(a):
            names = [field.name for field in dataclasses.fields(a)]
            self.pairs(names, [getattr(a, n) for n in names], [getattr(b, n) for n in names], ".")
        elif a != b:
            raise Found(f"{short(a)} != {short(b)}")

    def container(self, a: Any, b: Any) -> None:
        """A dict or list: the same aliasing, and, met for the first time, the same contents."""
        size = len(self.order_a)
        first_a = self.order_a.setdefault(id(a), size)
        first_b = self.order_b.setdefault(id(b), size)
        if first_a != first_b:
            raise Found(f"aliasing differs (container #{first_a} vs #{first_b})")
        if first_a == size:
            self.contents(a, b)

    def contents(self, a: Any, b: Any) -> None:
        if isinstance(a, dict):
            if list(a) != list(b):
                raise Found(f"keys {list(a)} != {list(b)}")
            self.pairs(list(a), list(a.values()), list(b.values()), "[]")
        elif len(a) != len(b):
            raise Found(f"length {len(a)} != {len(b)}")
        else:
            self.pairs(range(len(a)), a, b, "[]")

    def pairs(self, keys: Any, values_a: Any, values_b: Any, style: str) -> None:
        for key, a, b in zip(keys, values_a, values_b, strict=True):
            try:
                self.check(a, b)
            except Found as found:
                found.path.append(f".{key}" if style == "." else f"[{key!r}]")
                raise


def same_pickle(a: Any, b: Any) -> bool:
    """The fast check: equal pickles are the same types, values, key orders and
    aliasing (and even the same sharing of strings, which :class:`Differ` lets
    differ), so only unequal ones need the slow comparison."""
    return pickle.dumps(a, pickle.HIGHEST_PROTOCOL) == pickle.dumps(b, pickle.HIGHEST_PROTOCOL)


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:80]}...({len(text)} chars)"


class Mismatch(AssertionError):
    """The two compactors disagreed."""


# -------------------------------------------------------------------- sessions

Mutation = Callable[[Side], None]

KINDS: Final = {
    "edit-string": 6,
    "edit-block-text": 5,
    "edit-nested-list": 5,
    "append-block": 3,
    "replace-dict": 3,
    "rebuild-list": 3,
    "remove": 3,
    "move": 3,
    "alias-block": 3,
    "alias-message": 2,
    "set-option": 3,
    "set-session-id": 2,
    "new-history": 1,
}
"""The mutations besides appending, and their weights (each also comes once early
in every session, so that every session has them all)."""


def paths(root: Any, accept: Callable[[list[Any], Any], bool]) -> list[tuple[Any, ...]]:
    """The paths (keys and indices) of the values under ``root`` that ``accept``."""
    found: list[tuple[Any, ...]] = []
    trail: list[Any] = []

    def visit(node: Any) -> None:
        if accept(trail, node):
            found.append(tuple(trail))
        items: Any = (
            node.items() if type(node) is dict else enumerate(node) if type(node) is list else ()
        )
        for key, value in items:
            trail.append(key)
            visit(value)
            trail.pop()

    visit(root)
    return found


def last(path: list[Any]) -> Any:
    return path[-1] if path else None


def at(root: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        root = root[key]
    return root


def new_text(rng: random.Random, turns: Turns, old: str) -> str:
    roll = rng.random()
    if roll < 0.3:
        return old + " " + turns.words(1, 8)
    if roll < 0.5:
        return old[: len(old) // 2]
    return turns.blob()


class Session:
    """One generated session: the mutations, the calls and the comparison."""

    def __init__(self, case: Case, seed: int, calls: int, factory: type[Any] | None = None) -> None:
        self.case = case
        self.seed = f"{case.name}/{seed}"
        self.calls = calls
        self.rng = random.Random(self.seed)
        self.turns = Turns(self.rng, case)
        real = AsyncCompactor if case.driver == "async" else Compactor
        options = session_options(self.rng, case)
        self.cached = Side(case, dict(options), factory or real, plain=False)
        self.plain = Side(case, dict(options), real, plain=True)
        history = self.turns.initial()
        for side in self.sides:
            side.messages = copy.deepcopy(history)
        self.log: list[str] = []
        self.kinds: Counter[str] = Counter()
        self.due = self.rng.sample(list(KINDS), len(KINDS))  # each kind once, early
        self.actions: Counter[str] = Counter()
        self.tally: Counter[str] = Counter()  # what the plug-ins received, warnings
        self.warnings = Warnings()

    @property
    def sides(self) -> tuple[Side, Side]:
        return self.cached, self.plain

    def both(self, kind: str, detail: str, mutation: Mutation) -> None:
        for side in self.sides:
            mutation(side)
        self.kinds[kind] += 1
        self.log.append(f"{kind} {detail}".rstrip())

    # -- driving

    def run(self) -> None:
        logger = logging.getLogger("bareagent_compact")
        logger.addHandler(self.warnings)
        try:
            asyncio.run(self.drive())
        finally:
            logger.removeHandler(self.warnings)

    async def drive(self) -> None:
        rng = self.rng
        for index in range(self.calls):
            self.log.append(f"-- before call {index}:")
            self.mutate()
            force = rng.random() < 0.05 or index == self.calls // 2  # one /compact at least
            instructions = self.turns.words(1, 5) if rng.random() < 0.05 else None
            self.log.append(f"call(force={force}, instructions={instructions is not None})")
            result = await self.call(index, force, instructions)
            if isinstance(result, CompactionResult):
                self.actions[result.action.value] += 1
                self.tally["truncated"] += result.truncated
                if result.action is Action.FULL:
                    for side in self.sides:
                        side.fulls.append(side.compactor.last_result)
            await self.after_call(index, result)

    async def call(self, index: int, force: bool, instructions: str | None) -> Any:
        return await self.each(
            index, lambda s: s.compactor(s.messages, force, instructions=instructions)
        )

    async def after_call(self, index: int, result: Any) -> None:
        rng = self.rng
        full = isinstance(result, CompactionResult) and result.action is Action.FULL
        if full and (len(self.cached.fulls) == 1 or rng.random() < 0.5):  # the first, always
            self.kinds["undo"] += 1
            self.log.append("undo(messages, last_result)")
            await self.each(index, lambda s: s.compactor.undo(s.messages, s.compactor.last_result))
        elif self.cached.fulls and rng.random() < 0.04:
            # A full compaction's result some calls later: undone if only appended
            # to since, else refused with a warning.
            old = rng.randrange(len(self.cached.fulls))
            self.kinds["undo-later"] += 1
            self.log.append(f"undo(messages, full result #{old})")
            await self.each(index, lambda s: s.compactor.undo(s.messages, s.fulls[old]))
        if self.case.usage and rng.random() < 0.6:
            usage = self.usage()
            self.kinds["record-usage"] += 1
            self.log.append(f"record_usage({usage})")
            await self.each(index, lambda s: s.compactor.record_usage(s.messages, usage))

    def usage(self) -> Any:
        """A plausible reported input size: the estimate, give or take, plus tools."""
        rng = self.rng
        tokens = int(estimate_tokens(self.cached.messages) * rng.uniform(0.8, 1.3)) + 600
        if rng.random() < 0.7:
            return tokens
        if self.case.dialect == "anthropic":
            cached = rng.randint(0, tokens)
            return {"input_tokens": tokens - cached, "cache_read_input_tokens": cached}
        return {"prompt_tokens" if self.case.dialect == "chat" else "input_tokens": tokens}

    async def each(self, index: int, operation: Callable[[Side], Any]) -> Any:
        """Run ``operation`` on both sides (``forget()`` first on the plain one) and
        compare everything observable; the cached side's value."""
        seen = []
        for side in self.sides:
            if side.plain:
                side.compactor.forget()
            try:
                value = operation(side)
                if inspect.isawaitable(value):
                    value = await value
            except Exception as exc:
                value = ("raised", type(exc).__name__, str(exc))
            seen.append(
                {
                    "value": value,
                    "history": side.messages,
                    **side.drain(),
                    "warnings": self.warnings.take(),
                }
            )
        for key in ("prompts", "archived", "saved", "warnings"):
            self.tally[key] += len(seen[0][key])
        found = None if same_pickle(seen[0], seen[1]) else Differ()(seen[0], seen[1])
        if found is not None:
            steps = "\n  ".join(self.log[-12:])
            raise Mismatch(f"seed {self.seed!r}, call {index}: {found}\n last steps:\n  {steps}")
        return seen[0]["value"]

    # -- mutations

    def mutate(self) -> None:
        rng = self.rng
        if rng.random() < 0.15:
            self.kinds["steady"] += 1
            return
        kinds = rng.choices(list(KINDS), list(KINDS.values()), k=rng.choice((0, 1, 1, 2)))
        due = self.due.pop() if self.due and len(self.cached.messages) > 4 else None
        for kind in [*kinds, due] if due else kinds:
            done = self.kinds[kind]
            getattr(self, "mutate_" + kind.replace("-", "_"))()
            if kind == due and self.kinds[kind] == done:
                self.due.insert(0, kind)  # nothing to apply it to yet: later
        if rng.random() < 0.8:
            self.append()

    def append(self) -> None:
        new = self.turns.converted(self.turns.turn())
        self.both("append-turn", f"+{len(new)}", lambda s: s.messages.extend(copy.deepcopy(new)))

    def pick_path(self, accept: Callable[[list[Any], Any], bool]) -> tuple[Any, ...] | None:
        found = paths(self.cached.messages, accept)
        return self.rng.choice(found) if found else None

    def set_at(self, kind: str, path: tuple[Any, ...], value: Any) -> None:
        def mutation(side: Side) -> None:
            at(side.messages, path[:-1])[path[-1]] = copy.deepcopy(value)

        self.both(kind, f"{list(path)} = {short(value)}", mutation)

    def mutate_edit_string(self) -> None:
        path = self.pick_path(lambda p, v: isinstance(v, str) and last(p) in ("content", "output"))
        if path is not None:
            self.set_at(
                "edit-string", path, new_text(self.rng, self.turns, at(self.cached.messages, path))
            )

    def mutate_edit_block_text(self) -> None:
        path = self.pick_path(lambda p, v: isinstance(v, str) and last(p) == "text")
        if path is not None:
            self.set_at(
                "edit-block-text",
                path,
                new_text(self.rng, self.turns, at(self.cached.messages, path)),
            )

    def mutate_edit_nested_list(self) -> None:
        rng = self.rng
        path = self.pick_path(lambda p, v: isinstance(v, list) and "input" in p)
        if path is None:  # OpenAI dialects: the tool input is JSON text
            path = self.pick_path(lambda p, v: isinstance(v, str) and last(p) == "arguments")
            if path is not None:
                arguments = json.loads(at(self.cached.messages, path))
                arguments.setdefault("paths", []).append(self.turns.words(1, 2))
                self.set_at("edit-nested-list", path, json.dumps(arguments, ensure_ascii=False))
            return
        item = self.turns.words(1, 3)
        spot = rng.randint(0, len(at(self.cached.messages, path)))
        self.both(
            "edit-nested-list",
            f"{list(path)}.insert({spot}, {item!r})",
            lambda s: at(s.messages, path).insert(spot, item),
        )

    def mutate_append_block(self) -> None:
        path = self.pick_path(lambda p, v: isinstance(v, list) and last(p) == "content")
        if path is None:
            return
        types = [b.get("type") for b in at(self.cached.messages, path) if isinstance(b, dict)]
        kind = next((t for t in TEXT_TYPES if t in types), "text")  # the constant, not theirs
        block = {"type": kind, "text": self.turns.words(1, 12)}
        self.both(
            "append-block",
            f"{list(path)} + {kind}",
            lambda s: at(s.messages, path).append(copy.deepcopy(block)),
        )

    def mutate_replace_dict(self) -> None:
        index = self.rng.randrange(len(self.cached.messages)) if self.cached.messages else None
        if index is not None:

            def mutation(side: Side) -> None:
                side.messages[index] = plain_json(side.messages[index])

            self.both("replace-dict", f"[{index}] by an equal new dict", mutation)

    def mutate_rebuild_list(self) -> None:
        new_list = self.rng.random() < 0.5

        def mutation(side: Side) -> None:
            if new_list:
                side.messages = plain_json(side.messages)
            else:
                side.messages[:] = plain_json(side.messages)

        self.both("rebuild-list", "(a new list)" if new_list else "(in place)", mutation)

    def mutate_remove(self) -> None:
        if len(self.cached.messages) > 2:
            index = self.rng.randrange(len(self.cached.messages))
            self.both("remove", f"[{index}]", lambda s: s.messages.pop(index))

    def mutate_move(self) -> None:
        if len(self.cached.messages) > 2:
            source, target = (self.rng.randrange(len(self.cached.messages)) for _ in range(2))
            self.both(
                "move",
                f"[{source}] -> [{target}]",
                lambda s: s.messages.insert(target, s.messages.pop(source)),
            )

    def mutate_alias_block(self) -> None:
        messages = self.cached.messages
        source = self.pick_path(
            lambda p, v: len(p) == 3 and p[1] == "content" and isinstance(v, dict)
        )
        targets = [
            i
            for i, m in enumerate(messages)
            if isinstance(m, dict) and isinstance(m.get("content"), list)
        ]
        if source is None or not targets:
            return
        target = self.rng.choice(targets)
        spot = self.rng.randint(0, len(messages[target]["content"]))

        def mutation(side: Side) -> None:
            side.messages[target]["content"].insert(spot, at(side.messages, source))

        self.both("alias-block", f"{list(source)} also at [{target}]['content'][{spot}]", mutation)

    def mutate_alias_message(self) -> None:
        if self.cached.messages:
            source = self.rng.randrange(len(self.cached.messages))
            target = self.rng.randint(0, len(self.cached.messages))
            self.both(
                "alias-message",
                f"[{source}] also at [{target}]",
                lambda s: s.messages.insert(target, s.messages[source]),
            )

    def mutate_set_option(self) -> None:
        name, value = self.rng.choice(
            (
                ("threshold", self.rng.choice((2_000, 3_500, 6_000, 10_000))),
                ("keep_recent", self.rng.choice((None, 0, 1, 2, 4))),
                ("keep_tool_pairs", self.rng.random() < 0.7),
                ("max_message_tokens", self.rng.choice((None, 800, 4_000))),
                ("micro_min_chars", self.rng.choice((None, 200, 2_000))),
            )
        )
        self.both("set-option", f"{name} = {value!r}", lambda s: setattr(s.compactor, name, value))

    def mutate_new_history(self) -> None:
        """Another history on the same compactor (``/new``, ``/resume``)."""
        history = self.turns.initial()

        def mutation(side: Side) -> None:
            side.messages = copy.deepcopy(history)

        self.both("new-history", f"({len(history)} messages)", mutation)

    def mutate_set_session_id(self) -> None:
        name = self.rng.choice(("alpha", "beta", "gamma"))
        self.both("set-session-id", repr(name), lambda s: s.compactor.set_session_id(name))


def run_case(case: Case, calls: int, factory: type[Any] | None = None) -> Counter[str]:
    """Sessions of ``case`` until ``calls`` calls were compared: the mutation kinds,
    the actions and what the plug-ins received, tallied."""
    total: Counter[str] = Counter()
    for seed in range(-(-calls // SESSION_CALLS)):
        session = Session(case, seed, min(SESSION_CALLS, calls - seed * SESSION_CALLS), factory)
        session.run()
        total += session.kinds + session.tally
        total += Counter({f"action-{action}": n for action, n in session.actions.items()})
    return total


# ----------------------------------------------------------------------- tests


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_cached_and_forgetting_compactors_agree_call_by_call(case: Case) -> None:
    total = run_case(case, CALLS)
    assert sum(n for key, n in total.items() if key.startswith("action-")) == CALLS
    # The sessions exercise what they are meant to: both compaction layers, the
    # summariser, the archive, undo and every kind of mutation.
    assert total["action-full"] > 0, total
    assert total["truncated"] > 0, total
    assert total["prompts"] > 0, total
    assert (total["archived"] > 0) is case.archive, total
    assert (total["record-usage"] > 0) is case.usage, total
    missing = {*KINDS, "append-turn", "steady", "undo"} - set(total)
    assert not missing, (missing, total)


SDK_CASES: Final = [
    Case(dialect, driver=driver, sdk=True) for dialect in DIALECTS for driver in ("sync", "async")
]


@pytest.mark.parametrize("case", SDK_CASES, ids=lambda case: case.name)
def test_cached_and_forgetting_compactors_agree_on_histories_holding_sdk_objects(
    case: Case,
) -> None:
    pytest.importorskip("anthropic" if case.dialect == "anthropic" else "openai")
    total = run_case(case, CALLS // 2)
    assert total["action-full"] > 0, total
    assert total["append-turn"] > 0, total


# ------------------------------------------------------- the harness's self-test


class StaleOnSameLength(Compactor):
    """A broken cache: a call on a history of the length seen last returns the
    previous result without reading it."""

    seen_length = -1

    def __call__(
        self, messages: Any, force: bool = False, *, instructions: str | None = None
    ) -> Any:
        if not force and len(messages) == self.seen_length and self.last_result is not None:
            return self.last_result
        result = super().__call__(messages, force, instructions=instructions)
        self.seen_length = len(messages)
        return result


class BlindToEditsInPlace(AsyncCompactor):
    """A broken cache that keeps the list's items instead of copies of them: after
    an edit in place the history still equals what it saw, and a quiet result is
    given again."""

    seen: list[Any] | None = None

    async def __call__(
        self, messages: Any, force: bool = False, *, instructions: str | None = None
    ) -> Any:
        last = self.last_result
        if (
            not force
            and last is not None
            and last.action is Action.NONE
            and self.seen == list(messages)
        ):
            return last
        result = await super().__call__(messages, force, instructions=instructions)
        self.seen = list(messages)  # the same dicts: they always equal themselves
        return result


@pytest.mark.parametrize(
    ("case", "broken"),
    [
        (Case("anthropic"), StaleOnSameLength),
        (Case("chat", "cache-friendly", archive=False), StaleOnSameLength),
        (Case("responses", usage=False, driver="async"), BlindToEditsInPlace),
        (Case("anthropic", "cache-friendly", driver="async"), BlindToEditsInPlace),
    ],
    ids=lambda value: getattr(value, "name", None) or getattr(value, "__name__", ""),
)
def test_the_harness_reports_a_broken_cache(case: Case, broken: type[Any]) -> None:
    with pytest.raises(Mismatch) as failure:
        run_case(case, 5 * SESSION_CALLS, broken)
    message = str(failure.value)
    assert message.startswith(f"seed '{case.name}/"), message
    assert ", call " in message and "last steps:" in message and "-- before call" in message, (
        message
    )
    fields = (
        "['value']",
        "['history']",
        "['archived']",
        "['prompts']",
        "['saved']",
        "['warnings']",
    )
    assert any(f": {field}" in message for field in fields), message  # names what differs


def test_the_comparison_sees_types_key_order_aliasing_and_every_result_field() -> None:
    block = {"type": "text", "text": "a"}
    aliased = [{"content": [block]}, {"content": [block]}]
    copied = [{"content": [dict(block)]}, {"content": [dict(block)]}]
    assert aliased == copied  # what == cannot tell apart, the comparison does
    assert "aliasing" in str(Differ()(aliased, copied))
    assert Differ()(copy.deepcopy(aliased), copy.deepcopy(aliased)) is None
    assert "int 1 != bool True" in str(Differ()({"n": [1]}, {"n": [True]}))
    assert "int 1 != float 1.0" in str(Differ()({"n": 1}, {"n": 1.0}))
    assert "keys" in str(Differ()({"a": 1, "b": 2}, {"b": 2, "a": 1}))
    assert "tuple" in str(Differ()((1,), [1]))
    quiet = CompactionResult(Action.NONE, 10, 10)
    flagged = dataclasses.replace(quiet, prefix_changed=True)
    assert quiet == flagged  # prefix_changed takes no part in ==
    assert (
        Differ()({"value": quiet}, {"value": flagged}) == "['value'].prefix_changed: False != True"
    )
    assert not same_pickle("a" * 3, "a" * 4)


# -------------------------------------------------------------- the blind spot


@pytest.mark.parametrize("other", [True, 1.0], ids=["bool", "float"])
def test_forget_makes_a_type_only_edit_visible(other: Any) -> None:
    """``1`` and ``True`` (or ``1.0``) are equal, so no ``==`` can see the edit,
    yet the tool input weighs more: ``forget()`` is what makes the next call read
    it again, and then the result is the one a new compactor gives."""
    messages = tool_history(4)
    messages[2]["content"][0]["input"] = {"flags": [1] * 40}
    compactor = Compactor(summary_of, threshold=100_000)
    first = compactor(messages)
    seen = copy.deepcopy(messages)
    messages[2]["content"][0]["input"]["flags"][:] = [other] * 40
    assert messages == seen  # invisible to ==
    compactor.forget()
    after = compactor(messages)
    fresh = Compactor(summary_of, threshold=100_000)(copy.deepcopy(messages))
    assert Differ()(after, fresh) is None
    assert after.tokens_before > first.tokens_before  # the edit changed the count
