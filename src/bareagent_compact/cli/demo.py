"""A scripted agent session, run turn by turn through a :class:`Compactor`.

Everything is generated deterministically and offline: the "model" replies are
scripted, the tool results are realistic file reads and shell output (English
and Chinese), and the summariser is :class:`OfflineSummarizer`.
"""

from __future__ import annotations

import random
import textwrap
import unicodedata
from collections.abc import Iterator
from typing import Any, Final, TextIO, TypeAlias

from bareagent_compact.cli.turns import CountingProvider, TurnRecord
from bareagent_compact.compactor import Compactor
from bareagent_compact.offline import OfflineSummarizer
from bareagent_compact.protocols import Message
from bareagent_compact.result import CompactionResult
from bareagent_compact.tokens import estimate_tokens

DEMO_THRESHOLD: Final = 6000
"""The demo's threshold: low enough that a short session reaches full compaction."""

SYSTEM_PROMPT: Final = (
    "You are a coding agent working in /srv/app. Use tools to read and edit files, "
    "run commands and report progress. 回答时请使用用户的语言。"
)

_MODULES: Final = ("config", "storage", "handlers", "retry", "auth", "metrics", "cache", "cli")


def _python_file(rng: random.Random, module: str, lines: int) -> str:
    out = [
        f'"""{module.title()} module of the app service."""',
        "",
        "from __future__ import annotations",
        "",
    ]
    out += [
        "import logging",
        "from pathlib import Path",
        "",
        "logger = logging.getLogger(__name__)",
        "",
    ]
    n = 0
    while len(out) < lines:
        n += 1
        arg = rng.choice(["path", "payload", "timeout", "key", "request"])
        out += [
            f"def {module}_step_{n}({arg}: str, retries: int = {rng.randint(1, 5)}) -> dict[str, object]:",
            f'    """Handle step {n} of the {module} pipeline; 处理第 {n} 步。"""',
            f'    logger.debug("{module} step {n}: %s", {arg})',
            f'    result = {{"{arg}": {arg}, "attempt": retries, "ok": {rng.choice(["True", "False"])}}}',
            '    if not result["ok"]:',
            f'        raise ValueError(f"{module} step {n} failed for {{{arg}!r}}")',
            "    return result",
            "",
        ]
    return "\n".join(f"{i + 1}: {line}" for i, line in enumerate(out[:lines]))


def _pytest_output(rng: random.Random, failing: bool) -> str:
    tests = [f"tests/test_{m}.py::test_{m}_step_{i}" for m in _MODULES[:4] for i in range(1, 6)]
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.3.2",
        "rootdir: /srv/app",
        f"collected {len(tests)} items",
        "",
    ]
    lines += [f"{t} {'FAILED' if failing and i == 3 else 'PASSED'}" for i, t in enumerate(tests)]
    if failing:
        lines += [
            "",
            "=================================== FAILURES ===================================",
            "_____________________________ test_config_step_4 _____________________________",
            "    def test_config_step_4():",
            ">       assert load_config('config.toml')['retries'] == 3",
            "E       KeyError: 'retries'",
            "",
            "src/app/config.py:42: KeyError",
            f"========================= 1 failed, {len(tests) - 1} passed in {rng.uniform(1, 3):.2f}s =========================",
        ]
    else:
        lines += [
            f"============================== {len(tests)} passed in {rng.uniform(1, 3):.2f}s =============================="
        ]
    return "\n".join(lines)


def _chinese_notes(rng: random.Random) -> str:
    sentences = [
        "部署说明：服务运行在 /srv/app，配置文件为 config.toml。",
        "重试策略：网络错误最多重试三次，每次等待时间加倍。",
        "注意：生产环境的数据库连接串不能写入日志。",
        "缓存层使用 LRU 策略，默认容量为 1024 条记录。",
        "如果健康检查连续失败，负载均衡器会摘除该实例。",
        "所有接口都需要携带认证令牌，过期时间为 30 分钟。",
    ]
    return "\n".join(rng.choice(sentences) for _ in range(rng.randint(12, 30)))


def _git_log(rng: random.Random) -> str:
    subjects = [
        "fix retry backoff",
        "修复配置加载",
        "add metrics endpoint",
        "refactor storage layer",
        "更新文档",
        "bump dependencies",
        "handle timeout in auth",
    ]
    return "\n".join(
        f"{rng.getrandbits(28):07x} {rng.choice(subjects)} ({rng.randint(1, 30)} days ago)"
        for _ in range(40)
    )


Task: TypeAlias = tuple[str, list[tuple[str, dict[str, Any], str]]]
"""A user request and the tool calls answering it: (tool name, tool input, tool output)."""


def _script(rng: random.Random) -> Iterator[Task]:
    """Yield (user request, [(tool name, tool input, tool output), ...]) per task."""
    yield from _debugging_tasks(rng)
    yield from _review_tasks(rng)


def _debugging_tasks(rng: random.Random) -> Iterator[Task]:
    """Find and fix a failing configuration load, then read up on the retry policy."""
    yield (
        "请帮我看看这个服务的配置加载为什么失败，先跑一下测试。",
        [
            (
                "bash",
                {"command": "cd /srv/app && python -m pytest -q"},
                _pytest_output(rng, failing=True),
            ),
            ("read_file", {"file_path": "src/app/config.py"}, _python_file(rng, "config", 120)),
            (
                "read_file",
                {"file_path": "config.toml"},
                '1: [provider]\n2: name = "anthropic"\n3: model = "claude-sonnet"\n4: \n5: [network]\n6: timeout = 30\n',
            ),
        ],
    )
    yield (
        "Fix it so `retries` has a default of 3, then rerun the tests.",
        [
            (
                "edit_file",
                {
                    "file_path": "src/app/config.py",
                    "old": "cfg['retries']",
                    "new": "cfg.get('retries', 3)",
                },
                "Edited src/app/config.py: 1 replacement.",
            ),
            ("bash", {"command": "python -m pytest -q"}, _pytest_output(rng, failing=False)),
        ],
    )
    yield (
        "看一下部署文档和最近的提交记录，总结一下重试策略。",
        [
            ("read_file", {"file_path": "docs/deploy.md"}, _chinese_notes(rng)),
            ("bash", {"command": "git log --oneline -40"}, _git_log(rng)),
            ("read_file", {"file_path": "src/app/retry.py"}, _python_file(rng, "retry", 90)),
        ],
    )


def _review_tasks(rng: random.Random) -> Iterator[Task]:
    """Review each module's error handling."""
    for module in _MODULES[1:]:
        yield (
            f"Now review src/app/{module}.py for error handling problems.",
            [
                (
                    "read_file",
                    {"file_path": f"src/app/{module}.py"},
                    _python_file(rng, module, rng.randint(120, 200)),
                ),
                (
                    "bash",
                    {"command": f"grep -n 'raise' src/app/{module}.py"},
                    "\n".join(
                        f"{rng.randint(1, 140)}:        raise ValueError(...)" for _ in range(8)
                    ),
                ),
            ],
        )


_REPLIES: Final = (
    "测试失败的原因是 config.toml 缺少 retries 字段，load_config 直接索引导致 KeyError。",
    "Done: `retries` now defaults to 3 and the full suite passes (20 passed).",
    "重试策略：网络错误最多重试三次，退避时间加倍；最近的提交修复了 backoff 计算。",
)


def _reply(task: int, request: str) -> str:
    if task < len(_REPLIES):
        return _REPLIES[task]
    path = request.split()[2]
    return (
        f"Reviewed {path}: several functions raise ValueError without the original cause; "
        f"I suggest `raise ... from exc` and one log line per failure. {path} 的错误处理需要补充上下文。"
    )


def _fit(text: str, width: int) -> str:
    """Clip and pad ``text`` to ``width`` terminal columns (CJK characters take two)."""
    out, used = [], 0
    for char in text:
        size = 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
        if used + size > width:
            break
        out.append(char)
        used += size
    return "".join(out) + " " * (width - used)


def _calls(compactor: Compactor) -> int:
    provider = compactor.provider
    return provider.calls if isinstance(provider, CountingProvider) else 0


def _step(
    compactor: Compactor,
    turn: int,
    messages: list[Message],
    turns: list[TurnRecord] | None,
    *,
    force: bool = False,
) -> tuple[int, CompactionResult]:
    """Run the compactor (forced on the closing ``/compact``) and record the turn."""
    tokens_in, index, calls = estimate_tokens(messages), len(messages), _calls(compactor)
    result = compactor(messages, force=force)
    if turns is not None:
        turns.append(
            TurnRecord.of(
                result,
                turn=turn,
                index=index,
                tokens_in=tokens_in,
                messages=len(messages),
                summary_calls=_calls(compactor) - calls,
            )
        )
    return tokens_in, result


def _turn(
    out: TextIO,
    compactor: Compactor,
    turn: int,
    event: str,
    messages: list[Message],
    *,
    turns: list[TurnRecord] | None = None,
) -> None:
    """Run the compactor as an agent loop does at the start of a turn, and print a row."""
    tokens_in, result = _step(compactor, turn, messages, turns)
    freed = tokens_in - result.tokens_before if result.truncated else "-"
    out.write(
        f"{turn:>4}  {_fit(event, 34)}  {len(messages):>4}  "
        f"{tokens_in:>6} -> {result.tokens_after:<6}  {freed:>5}  "
        f"{result.action.value:<6}  {result.truncated:>5}\n"
    )


def _tool_exchange(
    call_id: int, name: str, tool_input: dict[str, Any], output: str
) -> list[Message]:
    """The assistant's call of tool ``name`` and the user message carrying its result."""
    tool_id = f"toolu_{call_id:04d}"
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"Calling {name}."},
                {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}],
        },
    ]


def _write_header(out: TextIO, threshold: int) -> None:
    out.write(
        f"bareagent-compact demo: scripted session, threshold {threshold} estimated tokens, "
        "keep_tool_pairs=True, offline summariser\n\n"
    )
    out.write(
        "Each row is one agent turn: compactor(messages) runs before the model call.\n"
        "tokens: estimate when the turn starts -> after compaction; freed: what\n"
        "micro-compaction freed of it (0 when the results it truncated were already as\n"
        "short as their marker); action: none, micro (old tool results truncated) or\n"
        "full (summarised); trunc: results truncated.\n\n"
    )
    out.write(f"turn  {_fit('event', 34)}  msgs  tokens            freed  action  trunc\n")


def _write_history(out: TextIO, messages: list[Message]) -> None:
    out.write("\nRebuilt history:\n")
    for index, message in enumerate(messages):
        content = (
            message["content"] if isinstance(message["content"], str) else str(message["content"])
        )
        body = textwrap.indent(content, "    ")
        out.write(f"[{index}] {message['role']}:\n{body}\n")
    out.write(f"\nFinal estimate: {estimate_tokens(messages)} tokens.\n")


def run_demo(
    out: TextIO,
    threshold: int = DEMO_THRESHOLD,
    seed: int = 7,
    turns: list[TurnRecord] | None = None,
) -> list[Message]:
    """Run the scripted session, writing a table per turn to ``out``; returns the history.

    ``turns``, when given, receives a record per turn, the closing ``/compact``
    included (for ``plot.svg_chart``).
    """
    rng = random.Random(seed)
    compactor = Compactor(
        CountingProvider(OfflineSummarizer()),
        threshold=threshold,
        session_id="demo",
        keep_tool_pairs=True,
    )
    messages: list[Message] = [{"role": "system", "content": SYSTEM_PROMPT}]
    _write_header(out, threshold)
    turn = 0
    call_id = 0
    for task, (request, calls) in enumerate(_script(rng)):
        messages.append({"role": "user", "content": request})
        event = f"user: {request}"
        for name, tool_input, output in calls:
            turn += 1
            _turn(out, compactor, turn, event, messages, turns=turns)
            event = f"tool_result: {name}"
            call_id += 1
            messages += _tool_exchange(call_id, name, tool_input, output)
        turn += 1
        _turn(out, compactor, turn, f"tool_result: {calls[-1][0]}", messages, turns=turns)
        messages.append({"role": "assistant", "content": _reply(task, request)})

    _, result = _step(compactor, turn + 1, messages, turns, force=True)
    out.write(
        f"\n/compact (force=True): {result.action.value}, {result.tokens_before} -> "
        f"{result.tokens_after} estimated tokens, {len(messages)} messages\n"
    )
    _write_history(out, messages)
    return messages


def scripted_history(seed: int = 7) -> list[Message]:
    """The demo's session as an agent would record it, never compacted (for ``replay``)."""
    rng = random.Random(seed)
    messages: list[Message] = [{"role": "system", "content": SYSTEM_PROMPT}]
    call_id = 0
    for task, (request, calls) in enumerate(_script(rng)):
        messages.append({"role": "user", "content": request})
        for name, tool_input, output in calls:
            call_id += 1
            messages += _tool_exchange(call_id, name, tool_input, output)
        messages.append({"role": "assistant", "content": _reply(task, request)})
    return messages
