"""A differential check of two versions of the package: the same generated agent
sessions run against the code of a git revision and against this checkout, and
everything the caller can observe must come out the same.

Run from anywhere inside the checkout:

    python benchmarks/differential.py                        # against main
    python benchmarks/differential.py --against HEAD~3 --sessions 500 --seed 7

The revision's ``src/`` is extracted (``git archive``) into a temporary
directory; two child processes, each this same script with ``PYTHONPATH`` set to
one ``src/`` (the revision's, then this checkout's working tree, uncommitted
changes included), run identical seeded sessions: every session in the three
dialects (Anthropic messages, OpenAI Chat messages, OpenAI Responses items) and
both micro modes (``"spec"`` and ``"cache-friendly"``). Each child checks that it
imported the package from the ``src/`` it was given.

After every step (a compactor call, ``record_usage`` or ``undo``) a child records
the history (types and key order exact, and which messages are the same
object), every field of the ``CompactionResult``, the prompts the summariser
received, the archive records, the snapshots saved and the warnings the
``bareagent_compact`` loggers logged. A child writes one JSON line per session
case; small values are written as they are, large ones (histories, prompts) as a
digest of their canonical JSON. The parent compares the two dumps, prints the
first differences (session, dialect, mode, step, field) and a summary line, and
runs each of the first differing cases again in full to show where inside the
field the two versions part. Exit status: 0 when nothing differs, 1 when
something does, 2 when a child failed.

Only the public API both versions have is used: ``Compactor`` and its constructor
keywords, ``compactor(messages, force=...)``, ``record_usage`` and ``undo``. The
generator lives here, not in the package, so both children run the same code.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import hashlib
import io
import json
import logging
import math
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from converters import to_chat, to_responses  # noqa: E402  (the dialect tests' conversions)

DIALECTS: Final = ("anthropic", "chat", "responses")
MODES: Final = ("spec", "cache-friendly")
INLINE_CHARS: Final = 160
"""Values whose canonical JSON is longer than this are dumped as a digest."""

# ------------------------------------------------------------------- dialects


CONVERTERS: Final[dict[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]]] = {
    "anthropic": lambda history: history,
    "chat": to_chat,
    "responses": to_responses,
}

# ------------------------------------------------------------------ generator

WORDS: Final = (
    "read", "the", "config", "文件", "失败", "error:", "path/to/x.py", "ok", "{}",
    "\n", "def", "return", "😀", "TODO", "λ", "Traceback", "42", "    ",
)  # fmt: skip
TOOLS: Final = ("bash", "read_file", "grep", "edit")


class Turns:
    """Seeded agent turns in Anthropic form (converted to a dialect when run)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.counter = 0
        self.lines = [f"{self.words(2, 12)}\n" for _ in range(48)]

    def words(self, low: int, high: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(low, high)))

    def blob(self) -> str:
        """A tool output: mostly short, sometimes a page, rarely a log far over
        ``max_message_tokens``."""
        roll = self.rng.random()
        if roll < 0.7:
            return self.words(0, 60)
        size = self.rng.randint(1_000, 6_000) if roll < 0.95 else self.rng.randint(20_000, 60_000)
        lines = self.rng.choices(self.lines, k=size // 40 + 1)
        return "".join(f"{n:5d} {line}" for n, line in enumerate(lines))

    def output(self) -> Any:
        if self.rng.random() < 0.15:
            return [
                {"type": "text", "text": self.blob()},
                {"type": "text", "text": self.words(1, 9)},
            ]
        return self.blob()

    def tool_round(self) -> list[dict[str, Any]]:
        rng = self.rng
        blocks: list[dict[str, Any]] = []
        if rng.random() < 0.5:
            blocks.append({"type": "text", "text": self.words(1, 20)})
        uses = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            self.counter += 1
            tool_input = {"command": self.words(1, 6), "depth": rng.randint(0, 5)}
            uses.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{self.counter:04d}",
                    "name": rng.choice(TOOLS),
                    "input": tool_input,
                }
            )
        results = [
            {"type": "tool_result", "tool_use_id": use["id"], "content": self.output()}
            for use in uses
        ]
        return [
            {"role": "assistant", "content": blocks + uses},
            {"role": "user", "content": results},
        ]

    def request(self) -> Any:
        if self.rng.random() < 0.7:
            return self.words(1, 15)
        return [{"type": "text", "text": self.blob()}, {"type": "text", "text": self.words(1, 9)}]

    def turn(self) -> list[dict[str, Any]]:
        """A tool round; an assistant reply and the user's next request; or a
        request followed by system reminders."""
        roll = self.rng.random()
        if roll < 0.65:
            return self.tool_round()
        if roll < 0.85:
            return [
                {"role": "assistant", "content": self.words(1, 30)},
                {"role": "user", "content": self.request()},
            ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": self.request()}]
        for _ in range(self.rng.choice((1, 1, 2))):
            messages.append({"role": "system", "content": "<system-reminder> " + self.words(1, 8)})
        return messages


def session_plan(seed: int, session: int) -> dict[str, Any]:
    """Session ``session`` of seed ``seed``: the compactor options and the steps,
    the same for every dialect and mode (JSON-only, so each case gets a copy)."""
    rng = random.Random(f"differential:{seed}:{session}")
    turns = Turns(rng)
    threshold = rng.choice((1_500, 2_500, 4_000, 7_000))
    options: dict[str, Any] = {
        "threshold": threshold,
        "session_id": rng.choice(("alpha", "beta")),
        "keep_recent": rng.choice((None, None, 0, 1, 2, 3)),
        "keep_tool_pairs": rng.random() < 0.85,
        "rolling_summaries": rng.random() < 0.8,
        "pin_facts": rng.random() < 0.15,
    }
    if rng.random() < 0.3:
        options["max_message_tokens"] = rng.choice((None, 1_000, 5_000))
    if rng.random() < 0.15:
        options["exclude_tools"] = ["grep"]
    history: list[dict[str, Any]] = []
    if rng.random() < 0.8:
        history.append({"role": "system", "content": "You are an agent. " + turns.words(1, 8)})
    history.append({"role": "user", "content": turns.words(1, 12)})
    steps = []
    for _ in range(rng.randint(4, 12)):
        append = [m for _ in range(rng.choice((1, 1, 2))) for m in turns.turn()]
        usage = None
        if rng.random() < 0.35:
            usage = [rng.choice(("int", "dict")), rng.randint(threshold // 5, threshold * 2)]
        steps.append(
            {
                "append": append,
                "force": rng.random() < 0.07,
                "usage": usage,
                "undo": rng.random() < 0.06,
            }
        )
    return {
        "options": options,
        "archive": rng.random() < 0.7,
        "transcripts": rng.random() < 0.5,
        "initial": history,
        "steps": steps,
    }


def usage_value(kind: str, tokens: int, dialect: str) -> Any:
    """A reported usage: the size itself, or the usage dict of ``dialect``'s API."""
    if kind == "int":
        return tokens
    if dialect == "anthropic":
        cached = tokens // 3
        return {
            "input_tokens": tokens - cached,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
            "output_tokens": 40,
        }
    if dialect == "chat":
        return {"prompt_tokens": tokens, "completion_tokens": 40, "total_tokens": tokens + 40}
    return {"input_tokens": tokens, "output_tokens": 40, "total_tokens": tokens + 40}


# ---------------------------------------------------------------- observation


def plain(value: Any) -> Any:
    """``value`` as JSON that tells apart what ``json.dumps`` would merge (tuples
    and lists, enums and their values, str subclasses), key order kept."""
    kind = type(value)
    if value is None or kind in (str, bool, int):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if kind is list:
        return [plain(item) for item in value]
    if kind is dict:
        if all(type(key) is str for key in value):
            return {key: plain(item) for key, item in value.items()}
        return {"__dict__": [[plain(key), plain(item)] for key, item in value.items()]}
    if kind is tuple:
        return {"__tuple__": [plain(item) for item in value]}
    if isinstance(value, enum.Enum):
        return {"__enum__": f"{kind.__name__}.{value.name}"}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"__dataclass__": kind.__name__, "fields": fields}
    if isinstance(value, (str, int, float)):
        return {"__subclass__": kind.__name__, "value": plain(kind.__mro__[1](value))}
    return {"__object__": kind.__qualname__}


def canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def aliases(messages: list[Any], objects: Any = ()) -> dict[str, Any]:
    """Which history entries are the same object as an earlier one, and where the
    given objects (a result's ``replaced``/``rebuilt``) sit in the history."""
    first: dict[int, int] = {}
    shared = [first.setdefault(id(m), i) for i, m in enumerate(messages)]
    found = {name: [first.get(id(m), -1) for m in items] for name, items in objects}
    return {"history": shared, **found}


def outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``(value, None)`` or ``(None, "ExceptionType: message")``."""
    try:
        return function(*args, **kwargs), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


class Warnings(logging.Handler):
    """Records at WARNING and above from the ``bareagent_compact`` loggers."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[list[str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append([record.name, record.levelname, record.getMessage()])


class Snapshots:
    """An in-memory transcript manager."""

    def __init__(self) -> None:
        self.saved: list[Any] = []

    def save(self, messages: list[Any], session_id: str) -> None:
        self.saved.append([session_id, plain(messages)])


class Case:
    """One session in one dialect and micro mode, and what its plug-ins received."""

    def __init__(self, compactor_type: type[Any], plan: dict[str, Any], dialect: str, mode: str):
        self.dialect = dialect
        self.prompts: list[Any] = []
        self.archived: list[Any] = []
        self.snapshots = Snapshots()
        options = dict(plan["options"])
        if mode != "spec":
            options["micro"] = mode
        self.compactor = compactor_type(
            self.provider,
            transcript_mgr=self.snapshots if plan["transcripts"] else None,
            archive=self.archive if plan["archive"] else None,
            **options,
        )
        self.messages: list[Any] = CONVERTERS[dialect](plan["initial"])

    def provider(self, prompt: Any) -> str:
        """A summary that depends on the prompt; some prompts fail, get a blank
        answer or one longer than what it summarises."""
        text = canonical(plain(prompt))
        self.prompts.append(json.loads(text))
        digest = zlib.crc32(text.encode())
        if digest % 23 == 0:
            raise RuntimeError("summariser unavailable")
        if digest % 29 == 0:
            return "   "
        if digest % 31 == 0:
            return "long " * 6_000
        return f"Summary {digest % 100_000} of {len(text)} chars: read the config, fixed two files."

    def archive(self, record: Any) -> None:
        self.archived.append(plain(record))
        if zlib.crc32(canonical(plain(record)).encode()) % 19 == 0:
            raise OSError("archive disk full")

    def taken(self, warnings: Warnings) -> dict[str, Any]:
        """What the plug-ins and the loggers received since the last step."""
        taken = {
            "prompts": self.prompts,
            "archived": self.archived,
            "saved": self.snapshots.saved,
            "warnings": warnings.seen,
        }
        self.prompts, self.archived, self.snapshots.saved, warnings.seen = [], [], [], []
        return taken


def run_case(
    compactor_type: type[Any], plan: dict[str, Any], dialect: str, mode: str, warnings: Warnings
) -> Iterator[dict[str, Any]]:
    """The steps of one case, each as ``{field: value}`` of what was observable."""
    warnings.seen = []
    made, error = outcome(Case, compactor_type, plan, dialect, mode)
    if error is not None:
        yield {"op": "construct", "raised": error, "warnings": warnings.seen}
        return
    case: Case = made
    convert = CONVERTERS[dialect]
    last_full = None
    for step in plan["steps"]:
        case.messages += convert(step["append"])
        result, error = outcome(case.compactor, case.messages, force=step["force"])
        record: dict[str, Any] = {"op": "call", "force": step["force"], "raised": error}
        if result is not None:
            if getattr(result, "replaced", ()):
                last_full = result
            record["result"] = {
                f.name: plain(getattr(result, f.name)) for f in dataclasses.fields(result)
            }
            objects = [(n, getattr(result, n, ())) for n in ("replaced", "rebuilt")]
            record["aliases"] = aliases(case.messages, objects)
        yield {**record, **observed(case, warnings)}
        if step["usage"] is not None:
            usage = usage_value(*step["usage"], dialect)
            _, error = outcome(case.compactor.record_usage, case.messages, usage)
            record = {"op": "record_usage", "usage": usage, "raised": error}
            yield {**record, **observed(case, warnings)}
        if step["undo"] and last_full is not None:
            undone, error = outcome(case.compactor.undo, case.messages, last_full)
            last_full = None
            yield {"op": "undo", "returned": undone, "raised": error, **observed(case, warnings)}


def observed(case: Case, warnings: Warnings) -> dict[str, Any]:
    return {
        "history": plain(case.messages),
        "history_aliases": aliases(case.messages)["history"],
        **case.taken(warnings),
    }


def squeezed(step: dict[str, Any]) -> dict[str, Any]:
    """A step with each large value replaced by the digest of its canonical JSON."""
    out = {}
    for name, value in step.items():
        text = canonical(value)
        if len(text) <= INLINE_CHARS:
            out[name] = value
        else:
            out[name] = {"__digest__": hashlib.sha256(text.encode()).hexdigest()[:24],
                         "chars": len(text)}  # fmt: skip
    return out


# ---------------------------------------------------------------------- child


def child(args: argparse.Namespace) -> int:
    """Run the workload with the package ``PYTHONPATH`` points at; write the dump."""
    src = Path(args.src).resolve()
    import bareagent_compact  # noqa: PLC0415 (imported from the src/ under test)
    from bareagent_compact import Compactor  # noqa: PLC0415

    package = Path(bareagent_compact.__file__).resolve()
    if src not in package.parents:
        print(f"differential: imported {package}, not from {src}", file=sys.stderr)
        return 3
    logger = logging.getLogger("bareagent_compact")
    warnings = Warnings()
    logger.addHandler(warnings)
    logger.propagate = False  # nothing on stderr
    only = set(args.only or ())
    started = time.process_time()
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(canonical({"package": str(package)}) + "\n")
        for session in range(args.sessions):
            plan_text = None
            for dialect in DIALECTS:
                for mode in MODES:
                    key = f"{session}/{dialect}/{mode}"
                    if only and key not in only:
                        continue
                    if plan_text is None:
                        plan_text = json.dumps(session_plan(args.seed, session))
                    steps = run_case(Compactor, json.loads(plan_text), dialect, mode, warnings)
                    kept = list(steps) if args.full else [squeezed(s) for s in steps]
                    out.write(canonical({"case": key, "steps": kept}) + "\n")
    print(f"{time.process_time() - started:.1f}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------- parent


def git(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    command = ["git", "-C", str(ROOT), *args]
    return subprocess.run(command, check=True, capture_output=True, **kwargs)


def extract(revision: str, into: Path) -> str:
    """``src/`` of ``revision`` extracted under ``into``; the commit's id."""
    commit = git("rev-parse", "--verify", f"{revision}^{{commit}}", text=True).stdout.strip()
    archive = git("archive", "--format=tar", commit, "src").stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:  # pragma: no cover - Pythons before the extraction filters
            tar.extractall(into)
    return commit


def child_command(src: Path, out: Path, args: argparse.Namespace, only: list[str]) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--src", str(src),
               "--out", str(out), "--sessions", str(args.sessions),
               "--seed", str(args.seed)]  # fmt: skip
    if only:
        command += ["--full", "--only", *only]
    return command


def child_env(src: Path) -> dict[str, str]:
    """This environment with ``PYTHONPATH`` set to ``src`` alone and a fixed hash seed
    (so set iteration orders are the same on both sides)."""
    return {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip


def run_children(
    sides: dict[str, Path], work: Path, args: argparse.Namespace, only: list[str]
) -> dict[str, Path]:
    """Run one child per side (``args.jobs`` at a time); each side's dump."""
    dumps = {side: work / f"{side}{'-full' if only else ''}.jsonl" for side in sides}
    pending = list(sides)
    running: dict[str, tuple[subprocess.Popen[str], float]] = {}
    failed = []
    while pending or running:
        while pending and len(running) < args.jobs:
            side = pending.pop(0)
            command = child_command(sides[side], dumps[side], args, only)
            proc = subprocess.Popen(
                command, env=child_env(sides[side]), stderr=subprocess.PIPE, text=True
            )
            running[side] = (proc, time.perf_counter())
        side = next(iter(running))
        proc, began = running.pop(side)
        _, err = proc.communicate()
        if proc.returncode != 0:
            failed.append(f"{side} child failed ({proc.returncode}):\n{err}")
        elif not only:
            cpu = err.strip().splitlines()[-1]
            print(f"  {side}: {time.perf_counter() - began:.1f} s wall, {cpu} s cpu")
    if failed:
        raise ChildFailed("\n".join(failed))
    return dumps


class ChildFailed(Exception):
    """A child exited with an error."""


def cases(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as dump:
        next(dump)
        for line in dump:
            yield json.loads(line)


def first_difference(old: list[Any], new: list[Any]) -> tuple[int, str] | None:
    """The first step and field where two cases' steps differ."""
    for index, (a, b) in enumerate(zip(old, new, strict=False)):
        if a == b:
            continue
        for name in [*a, *(n for n in b if n not in a)]:
            if a.get(name, "<absent>") != b.get(name, "<absent>"):
                return index, name
    if len(old) != len(new):
        return min(len(old), len(new)), f"number of steps ({len(old)} vs {len(new)})"
    return None


def where(a: Any, b: Any, path: str = "") -> str:
    """The first place inside two JSON values where they differ, and both values there."""
    if type(a) is type(b) is dict:
        if list(a) != list(b):
            return f"{path or '.'}: keys {list(a)} vs {list(b)}"
        for key in a:
            if a[key] != b[key]:
                return where(a[key], b[key], f"{path}[{key!r}]")
    if type(a) is type(b) is list:
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return where(x, y, f"{path}[{index}]")
        if len(a) != len(b):
            return f"{path or '.'}: length {len(a)} vs {len(b)}"
    return f"{path or '.'}: {short(a)} vs {short(b)}"


def short(value: Any) -> str:
    text = canonical(value)
    return text if len(text) <= 160 else f"{text[:120]}...({len(text)} chars)"


def compare(dumps: dict[str, Path]) -> tuple[int, int, list[tuple[str, int, str]]]:
    """Cases and steps compared, and each differing case with its first difference."""
    compared = steps = 0
    differing = []
    for old, new in zip(cases(dumps["old"]), cases(dumps["new"]), strict=True):
        assert old["case"] == new["case"], (old["case"], new["case"])
        compared += 1
        steps += len(new["steps"])
        found = first_difference(old["steps"], new["steps"])
        if found is not None:
            differing.append((old["case"], *found))
    return compared, steps, differing


def explain(
    sides: dict[str, Path], work: Path, args: argparse.Namespace, shown: list[tuple[str, int, str]]
) -> None:
    """Run the shown differing cases again in full and print where each field differs."""
    dumps = run_children(sides, work, args, [case for case, _, _ in shown])
    full = {
        side: {case["case"]: case["steps"] for case in cases(path)} for side, path in dumps.items()
    }
    for key, index, name in shown:
        session, dialect, mode = key.split("/")
        print(f"session {session}, {dialect}, micro={mode}, step {index}, field {name!r}:")
        old_steps, new_steps = full["old"][key], full["new"][key]
        if index >= min(len(old_steps), len(new_steps)):
            print(f"  {name}")
            continue
        old, new = old_steps[index], new_steps[index]
        call = sum(step.get("op") == "call" for step in new_steps[: index + 1])
        inside = where(old.get(name), new.get(name), name)
        print(f"  {new.get('op')}, compactor call {call}: {inside}")


def parent(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="differential-"))
    try:
        try:
            commit = extract(args.against, work / "old")
        except subprocess.CalledProcessError as failed:
            message = os.fsdecode(failed.stderr).strip()
            print(f"differential: git failed: {message}", file=sys.stderr)
            return 2
        sides = {"old": work / "old" / "src", "new": ROOT / "src"}
        print(f"old: {args.against} ({commit[:12]}), from {sides['old']}")
        print(f"new: the working tree, from {sides['new']}")
        print(f"{args.sessions} sessions x {len(DIALECTS)} dialects x {len(MODES)} micro modes, "
              f"seed {args.seed}")  # fmt: skip
        try:
            dumps = run_children(sides, work, args, [])
            compared, steps, differing = compare(dumps)
            if differing:
                print(f"first differences ({min(args.show, len(differing))} shown):")
                explain(sides, work, args, differing[: args.show])
        except ChildFailed as failed:
            print(failed, file=sys.stderr)
            return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print(
        f"differential: {compared} cases, {steps} steps compared, "
        f"{len(differing)} cases differ; {elapsed:.1f} s"
    )
    return 1 if differing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="main", help="the git revision to compare with")
    parser.add_argument("--sessions", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=5, help="differing cases shown in detail")
    parser.add_argument("--jobs", type=int, choices=(1, 2), default=1,
                        help="children run at once (the two sides)")  # fmt: skip
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--src", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--only", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--full", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return child(args) if args.child else parent(args)


if __name__ == "__main__":
    raise SystemExit(main())
