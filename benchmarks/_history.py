"""A realistic agent history for the benchmarks, built the same way on any machine.

The tool results are slices of the Python standard library's own source (read
with ``cat -n`` line numbers) and shell output made from it (``ls -la``,
``grep -rn``, ``git diff``, ``pytest``), 0.3 to 6 KB each. About a third of the
messages carry Chinese text (embedded below). Assistant turns hold a text block
and a ``tool_use`` block; user turns hold the ``tool_result``. A fixed seed makes
the history identical from run to run on one Python version.

Importing this module also puts the repository's ``src`` directory first on
``sys.path``, so that a plain ``python benchmarks/...`` measures the working tree.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from bareagent_compact.tokens import estimate_tokens  # noqa: E402  (needs the path set above)

SEED = 20240611
TARGET_TOKENS = 50_000
"""About the default threshold: the history size at which a full compaction is due."""

SYSTEM_PROMPT = (
    "You are a coding agent working in a local repository. Use the tools to read files, "
    "search the code, run shell commands and edit files. Keep answers short; explain what "
    "you change and why. Never invent file contents: read them first. When a command fails, "
    "read the error, fix the cause and run it again. 回答用户时使用用户的语言。\n"
) * 3

CHINESE_PARAGRAPHS = (
    "这个模块负责在每一轮对话开始时检查上下文的长度。如果估算的 token 数超过阈值，"
    "就把旧的工具结果截断，必要时调用模型生成摘要，用摘要替换之前的对话历史。",
    "我先看一下 `json/decoder.py` 的实现，确认 `JSONDecodeError` 是在哪里抛出的，"
    "然后再决定是修改解析逻辑还是在调用方捕获异常。",
    "测试失败的原因是路径分隔符：在 Windows 上 `os.sep` 是反斜杠，而断言里写死了正斜杠。"
    "我会改用 `pathlib.PurePosixPath` 来比较，这样两个平台的结果一致。",
    "请帮我把日志模块重构一下：去掉全局变量，所有配置通过参数传入，"
    "并且保证在多线程环境下不会重复添加处理器。顺便补充单元测试。",
    "好的，我已经完成了修改。主要变化有三点：第一，缓存改为按会话隔离；第二，"
    "超时时间可以配置，默认三十秒；第三，失败时记录警告而不是直接抛出异常。",
    "构建脚本在 CI 上报错了，提示找不到依赖包。看起来是锁文件没有更新，"
    "我运行了 `pip install -e .[dev]` 之后重新生成了锁文件，再次运行测试全部通过。",
    "这里的循环每次都重新编译正则表达式，性能很差。把编译移到模块级别，"
    "并且用 `str.translate` 代替逐字符的判断，速度提高了大约二十倍。",
    "用户希望保留最近三次工具调用的完整输出，其余的输出替换成简短的标记，"
    "标记里写明工具名称和原始长度，这样模型仍然知道曾经调用过什么工具。",
    "数据库迁移脚本需要兼容旧版本：先添加新列并允许为空，回填数据之后再加非空约束，"
    "最后删除旧列。每一步都要能够单独回滚。",
    "接口文档里的示例已经过时了，返回值现在是一个字典，包含状态码、消息和数据三个字段。"
    "我更新了文档，并在示例中加入了错误处理。",
)

ENGLISH_REMARKS = (
    "Let me look at how the parser handles this case before changing anything.",
    "The test fails because the fixture is created once per module, not per test.",
    "I’ll read the file first — the traceback points at the “finally” clause.",
    "That worked. Next I’ll run the whole suite to make sure nothing else broke.",
    "The helper is called from three places; changing its signature means updating all of them.",
    "This is a race: two threads can both see the cache as empty… I’ll add a lock.",
    "Found it. The regular expression is compiled inside the loop on every call.",
    "Now the edge cases: an empty list, a single element, and a very long input.",
)

USER_REQUESTS = (
    "Please fix the failing test in tests/test_config.py and explain the cause.",
    "Can you add type hints to the public functions and make mypy --strict pass?",
    "Refactor the retry logic so that the sleep function can be injected in tests.",
    "Why is the import so slow? Profile it and tell me what dominates.",
)

SHELL_COMMANDS = ("ls -la", "grep -rn", "git diff", "pytest -q", "git log")


def _stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [
        path
        for pattern in ("*.py", "json/*.py", "email/*.py", "asyncio/*.py", "logging/*.py")
        for path in sorted(root.glob(pattern))
        if path.stat().st_size > 4000
    ]
    if not files:
        raise RuntimeError(f"no Python standard library source found under {root}")
    return files


class _Source:
    """Lazily read standard library files, chosen by the seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.files = _stdlib_files()
        self.root = Path(sysconfig.get_paths()["stdlib"])
        self.cache: dict[Path, list[str]] = {}

    def lines(self, path: Path) -> list[str]:
        if path not in self.cache:
            self.cache[path] = path.read_text(encoding="utf-8", errors="replace").splitlines()
        return self.cache[path]

    def pick(self) -> tuple[str, list[str]]:
        path = self.rng.choice(self.files)
        return path.relative_to(self.root).as_posix(), self.lines(path)


def _size(rng: random.Random) -> int:
    """A result size between 0.3 and 6 KB."""
    return rng.randint(300, 6000)


def _take(lines: list[str], start: int, size: int, render: Callable[[int, str], str]) -> str:
    out: list[str] = []
    total = 0
    index = start
    while total < size and lines:
        line = render(index, lines[index % len(lines)])
        out.append(line)
        total += len(line) + 1
        index += 1
    return "\n".join(out)


def _chinese(rng: random.Random, paragraphs: int = 1) -> str:
    return "\n\n".join(rng.sample(CHINESE_PARAGRAPHS, paragraphs))


def _chinese_document(rng: random.Random, size: int) -> str:
    """A Markdown design note in Chinese with some code, about ``size`` bytes of UTF-8."""
    parts: list[str] = []
    while sum(len(part.encode()) for part in parts) < size:
        heading = rng.choice(("背景", "设计", "实现", "测试", "风险"))
        parts.append(f"## {heading}\n\n{_chinese(rng, 2)}\n")
        if rng.random() < 0.3:
            parts.append(
                f"```python\nresult = compact(messages, threshold={rng.randint(1, 9)}0000)\n```\n"
            )
    return "\n".join(parts)


def _read_file(rng: random.Random, source: _Source, chinese: bool) -> tuple[dict[str, Any], str]:
    if chinese:
        return {"path": "docs/设计说明.md"}, _chinese_document(rng, _size(rng))
    name, lines = source.pick()
    start = rng.randrange(len(lines))
    size = _size(rng)
    text = _take(lines, start, size, lambda i, line: f"{i + 1:6d}\t{line}")
    return {"path": name, "offset": start + 1, "limit": text.count("\n") + 1}, text


def _shell(rng: random.Random, source: _Source, chinese: bool) -> tuple[dict[str, Any], str]:
    command = rng.choice(SHELL_COMMANDS)
    name, lines = source.pick()
    size = _size(rng)
    if chinese and command in ("grep -rn", "git diff", "ls -la"):
        document = _chinese_document(rng, size).splitlines()
        if command == "grep -rn":
            found = [f"docs/设计说明.md:{i + 1}:{line}" for i, line in enumerate(document) if line]
            return {"command": "grep -rn 上下文 docs/"}, "\n".join(found)
        body = "\n".join(rng.choice(" -++ ") + line for line in document)
        return {"command": "git diff docs/"}, "diff --git a/docs/设计说明.md\n" + body
    if command == "ls -la":
        names: list[str] = []
        while sum(map(len, names)) < size // 2:
            names.append(source.pick()[0])
        rows = [
            f"-rw-r--r--  1 dev dev {rng.randint(300, 90000):7d} Jun {rng.randint(1, 30):2d} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {n}"
            for n in sorted(set(names))
        ]
        return {"command": "ls -la Lib/"}, f"total {len(rows) * 8}\n" + "\n".join(rows)
    if command == "grep -rn":
        word = rng.choice(("def ", "return ", "import ", "raise ", "self."))
        hits: list[str] = []
        while sum(map(len, hits)) < size:
            hit_name, hit_lines = source.pick()
            hits += [
                f"{hit_name}:{i + 1}:{line}" for i, line in enumerate(hit_lines) if word in line
            ][: rng.randint(1, 8)]
        return {"command": f"grep -rn {word.strip()!r} Lib/"}, "\n".join(hits)
    if command == "git diff":
        start = rng.randrange(len(lines))
        body = _take(lines, start, size, lambda i, line: rng.choice(" -++ ") + line)
        header = f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ -{start},40 @@\n"
        return {"command": f"git diff {name}"}, header + body
    if command == "pytest -q":
        dots = "".join(rng.choice("....................F.s") for _ in range(size // 3))
        lines_out = [dots[i : i + 60] for i in range(0, len(dots), 60)]
        if chinese:
            lines_out.append("失败：断言错误，期望值与实际值不一致。\n" + _chinese(rng))
        lines_out.append(f"{len(dots)} passed, 2 failed in {rng.random() * 9:.2f}s")
        return {"command": "pytest -q"}, "\n".join(lines_out)
    entries: list[str] = []
    while sum(map(len, entries)) < size:
        subject = _chinese(rng)[:40] if chinese else rng.choice(ENGLISH_REMARKS)
        entries.append(
            f"commit {rng.getrandbits(160):040x}\nAuthor: Dev <dev@example.org>\n"
            f"Date:   Mon Jun {rng.randint(1, 30)} 10:00:00 2024\n\n    {subject}\n"
        )
    return {"command": "git log -n 20"}, "\n".join(entries)


def _assistant_text(rng: random.Random, chinese: bool) -> str:
    if chinese:
        return _chinese(rng, rng.randint(1, 2))
    return " ".join(rng.sample(ENGLISH_REMARKS, rng.randint(1, 3)))


def build_history(target_tokens: int = TARGET_TOKENS, seed: int = SEED) -> list[dict[str, Any]]:
    """Messages of an agent session, grown until the estimate passes ``target_tokens``."""
    rng = random.Random(seed)
    source = _Source(rng)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": rng.choice(USER_REQUESTS)},
    ]
    tokens = estimate_tokens(messages)
    turn = 0
    while tokens < target_tokens:
        turn += 1
        chinese = rng.random() < 0.3
        tool = rng.choice(("read_file", "read_file", "bash", "bash", "bash"))
        tool_input, result = (_read_file if tool == "read_file" else _shell)(rng, source, chinese)
        tool_id = f"toolu_{turn:04d}_{rng.getrandbits(48):012x}"
        blocks: list[dict[str, Any]] = []
        if rng.random() < 0.7:
            blocks.append({"type": "text", "text": _assistant_text(rng, chinese)})
        blocks.append({"type": "tool_use", "id": tool_id, "name": tool, "input": tool_input})
        new = [
            {"role": "assistant", "content": blocks},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": result}],
            },
        ]
        if turn % 9 == 0:
            new += [
                {"role": "assistant", "content": _assistant_text(rng, chinese)},
                {
                    "role": "user",
                    "content": _chinese(rng) if chinese else rng.choice(USER_REQUESTS),
                },
            ]
        messages += new
        tokens += estimate_tokens(new)
    return messages


def scaled_history(messages: list[dict[str, Any]], times: int) -> list[dict[str, Any]]:
    """``messages`` with every turn after the system prompt repeated ``times`` times.

    Each repetition is a fresh copy with its own tool ids, so the result is
    exactly ``times`` as long in messages, characters and estimated tokens
    (less the one system prompt), which makes the cost per unit comparable.
    """
    text = json.dumps(messages[1:], ensure_ascii=False)
    scaled = [json.loads(json.dumps(messages[0], ensure_ascii=False))]
    for copy in range(times):
        scaled += json.loads(text.replace('"toolu_', f'"toolu_{copy}_'))
    return scaled


def describe(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Size figures of a history: messages, characters, share with Chinese text."""
    text = json.dumps(messages, ensure_ascii=False)
    with_cjk = sum(
        1
        for m in messages
        if any("\u4e00" <= c <= "\u9fff" for c in json.dumps(m["content"], ensure_ascii=False))
    )
    return {
        "messages": len(messages),
        "tokens": estimate_tokens(messages),
        "json_chars": len(text),
        "messages_with_chinese": with_cjk,
        "python": sys.version.split()[0],
    }


def _loops_for(func: Callable[[], object], min_time: float) -> int:
    """How many calls of ``func`` take at least ``min_time`` seconds."""
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            func()
        if time.perf_counter() - start >= min_time:
            return loops
        loops *= 2


class Timings:
    """Seconds per call of several functions, measured in interleaved runs."""

    def __init__(self, samples: dict[str, list[float]]) -> None:
        self.samples = samples
        self.seconds = {name: statistics.median(values) for name, values in samples.items()}

    def ratio(self, numerator: str, denominator: str) -> float:
        """The median over runs of the ratio of two functions' times in the same run."""
        pairs = zip(self.samples[numerator], self.samples[denominator], strict=True)
        return statistics.median(a / b for a, b in pairs)


def compare(
    funcs: dict[str, Callable[[], object]], repeats: int, min_time: float = 0.005
) -> Timings:
    """Time each function ``repeats`` times, the functions taking turns in each run.

    Each run of a function loops for at least ``min_time`` seconds. Taking turns
    within short runs lets every function see the same machine conditions, so
    the ratios (medians of per-run ratios) hold even on a busy machine.
    """
    loops = {name: _loops_for(func, min_time) for name, func in funcs.items()}
    samples: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(repeats):
        for name, func in funcs.items():
            count = loops[name]
            start = time.perf_counter()
            for _ in range(count):
                func()
            samples[name].append((time.perf_counter() - start) / count)
    return Timings(samples)


def median_time(func: Callable[[], object], repeats: int, min_time: float = 0.005) -> float:
    """Median seconds per call of ``func`` over ``repeats`` runs."""
    return compare({"f": func}, repeats, min_time).seconds["f"]


def report_line(label: str, seconds: float, ratio: float | None = None, of: str = "") -> str:
    """One aligned line: a label, a time in milliseconds and an optional ratio."""
    line = f"  {label:<44} {seconds * 1e3:9.3f} ms"
    if ratio is not None:
        line += f"   {ratio:6.2f}x {of}"
    return line


def main(
    doc: str,
    run: Callable[[int, list[int]], dict[str, Any]],
    print_report: Callable[[dict[str, Any]], None],
    argv: list[str] | None = None,
) -> int:
    """The command line both benchmarks share: ``--json``, ``--repeats``, ``--scales``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--repeats", type=int, default=15, help="runs per figure (median)")
    parser.add_argument(
        "--scales", default="1,2,4,8", help="history sizes, as repetitions of its turns"
    )
    args = parser.parse_args(argv)
    results = run(args.repeats, [int(scale) for scale in args.scales.split(",")])
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
    else:
        print_report(results)
    return 0
