"""An offline stand-in for the Anthropic and OpenAI APIs, for the examples and their tests.

``FakeServer`` is the handler of an HTTP mock transport that the real
``anthropic`` and ``openai`` clients talk to (``http_client=...``). It answers
``/v1/messages``, ``/v1/chat/completions`` and ``/v1/responses`` with valid API
JSON from a scripted model that calls tools, and it checks every request the
way the real APIs do, answering HTTP 400 with the API's error shape when a rule
is broken:

- every message or input item matches the SDK's own request type (its
  ``*Param`` TypedDict): no unknown keys such as ``parsed`` or ``annotations``
  on a Chat message, no ``None`` where the request type does not allow it,
  required keys present;
- the first message that is not a system (or developer) message is a user one;
- every tool result answers a tool call of the immediately preceding assistant
  turn, and every tool call is answered before the next assistant turn;
- Responses API reasoning items are followed by the item they came with, and a
  function call that came with a reasoning item is sent with it;
- with Anthropic's ``thinking`` enabled, the final assistant turn starts with a
  thinking block: the one that pending tool results answer, and a last message
  of the assistant (a prefill the acknowledgement of a summary would be).

A request without ``tools`` is a summary request: the answer is a short summary;
so is a request whose last message is a continuation summariser's instruction
(the conversation itself, then the instruction). Every request is compared with
the previous one on its path (the prompt cache, modelled as an exact prefix):
``prefix_reads`` says how many of its first messages or items, after the same
model, system prompt and tools, equal those of the previous request (a
``cache_control`` marker aside), and a summary request's usage reports them as
read from the cache (``cache_read_input_tokens``, ``cached_tokens``).
The on-demand compactions answer too: an Anthropic request with the
``compaction`` parameter gets a compaction block alone, and ``POST
/v1/responses/compact`` the output window (the user messages, then one
compaction item); both are registered, so later requests must send them back
unchanged. With nothing to summarise they answer 400
``compaction_nothing_to_summarize``; with ``compaction_unavailable=True`` 529
``compaction_unavailable``. With a ``context_window``, a request longer than it
(JSON characters / 4), an on-demand compaction too, gets the API's context
overflow error.
When an Anthropic request offers the ``recall_truncated`` tool and its messages
show a truncation marker with a recall handle, the scripted model calls that
tool once, with the first handle it sees.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import typing_extensions


def http_library(sdk: str) -> types.ModuleType:
    """The HTTP library ``sdk`` (``"anthropic"`` or ``"openai"``) is built on.

    Recent SDKs use ``httpx2`` and refuse an ``httpx`` client; older ones use
    ``httpx``. The fake server answers each request in its own library.
    """
    base = importlib.import_module(f"{sdk}._base_client")
    for name in ("httpx2", "httpx"):
        module = getattr(base, name, None)
        if isinstance(module, types.ModuleType):
            return module
    return importlib.import_module("httpx")


def _library_of(request: Any) -> types.ModuleType:
    """The HTTP library a request object comes from."""
    return sys.modules[type(request).__module__.split(".")[0]]


BASE_URL = "http://fake-api.local"
SUMMARY_TEXT = "Goal: inspect the logs and files the user asked about. Done: several tool calls."


# --------------------------------------------------------------------------- request types


@functools.cache
def _hints(typeddict: type) -> dict[str, Any]:
    return typing.get_type_hints(typeddict, include_extras=True)


def _is_typeddict(tp: object) -> bool:
    return isinstance(tp, type) and typing_extensions.is_typeddict(tp)


def _strip(tp: Any) -> tuple[Any, bool | None]:
    """The type without Required/NotRequired/Annotated, and what the wrapper said."""
    required: bool | None = None
    while True:
        origin = typing.get_origin(tp)
        if origin in (typing.Required, typing_extensions.Required):
            tp, required = typing.get_args(tp)[0], True
        elif origin in (typing.NotRequired, typing_extensions.NotRequired):
            tp, required = typing.get_args(tp)[0], False
        elif origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        else:
            return tp, required


def type_errors(value: Any, tp: Any, path: str) -> list[str]:
    """What makes ``value`` not a ``tp`` (a request type of the SDKs); empty if it is one."""
    tp, _ = _strip(tp)
    if tp is Any or tp is object:
        return []
    if tp is type(None) or tp is None:
        return [] if value is None else [f"{path}: expected null"]
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        return _union_errors(value, args, path)
    if origin is typing.Literal or origin is typing_extensions.Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {list(args)}"]
    if _is_typeddict(tp):
        return _typeddict_errors(value, tp, path)
    if tp is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string, got {value!r:.60}"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean"]
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected an integer"]
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected a number"]
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        return [] if isinstance(value, Mapping) else [f"{path}: expected an object"]
    if origin in (list, Iterable, typing.Sequence, tuple) or tp in (list, tuple):
        if not isinstance(value, list):
            return [f"{path}: expected an array, got {type(value).__name__}"]
        item = args[0] if args else Any
        return [e for i, v in enumerate(value) for e in type_errors(v, item, f"{path}[{i}]")]
    if isinstance(tp, type):  # an SDK model class: only its instances (JSON never holds one)
        return [] if isinstance(value, tp) else [f"{path}: expected a {tp.__name__}"]
    return []  # aliases of file and binary types the examples never send


def _union_errors(value: Any, members: tuple[Any, ...], path: str) -> list[str]:
    candidates = [m for m in members if _could_be(value, m)]
    if not candidates:
        return [f"{path}: matches none of the accepted shapes"]
    best: list[str] | None = None
    for member in candidates:
        errors = type_errors(value, member, path)
        if not errors:
            return []
        if best is None or len(errors) < len(best):
            best = errors
    return best or []


def _could_be(value: Any, member: Any) -> bool:
    """Whether ``member`` is the variant meant: its ``type``/``role`` literals fit ``value``."""
    member, _ = _strip(member)
    origin = typing.get_origin(member)
    if member in (str, bool, type(None)):
        return isinstance(value, member)
    if member in (int, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin in (list, Iterable, typing.Sequence, tuple):
        return isinstance(value, list)
    if origin is typing.Literal:
        return value in typing.get_args(member)
    if not _is_typeddict(member):
        if isinstance(member, type) and origin is None and member not in (dict, list):
            return isinstance(value, member)
        return True
    if not isinstance(value, Mapping):
        return False
    hints = _hints(member)
    for key in ("type", "role"):
        if key not in hints:
            continue
        tp, _ = _strip(hints[key])
        literal = [a for a in typing.get_args(tp) if a is not type(None)] if tp else []
        options: list[Any] = []
        for arg in literal:
            if typing.get_origin(arg) is typing.Literal:
                options.extend(typing.get_args(arg))
        if typing.get_origin(tp) is typing.Literal:
            options = list(typing.get_args(tp))
        if options and key in value and value[key] not in options:
            return False
        if options and key not in value and key == "role":
            return False
    return True


def _typeddict_errors(value: Any, typeddict: type, path: str) -> list[str]:
    if not isinstance(value, Mapping):
        return [f"{path}: expected an object, got {type(value).__name__}"]
    hints = _hints(typeddict)
    total = getattr(typeddict, "__total__", True)
    errors = [f"{path}.{key}: unknown field" for key in value if key not in hints]
    for key, hint in hints.items():
        _, required = _strip(hint)
        if key not in value:
            if required or (required is None and total):
                errors.append(f"{path}.{key}: required field missing")
            continue
        errors.extend(type_errors(value[key], hint, f"{path}.{key}"))
    return errors


def _sdk_type(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


# --------------------------------------------------------------------------- protocol rules


def check_anthropic(
    body: Mapping[str, Any], signatures: Mapping[str, str] | None = None
) -> list[str]:
    """The Messages API's rules for ``messages``.

    ``signatures`` maps the signature of each thinking block the server wrote to
    its text: a thinking block sent back must be unchanged. With ``thinking``
    enabled, the assistant turn that pending tool results answer must start
    with its thinking block.
    """
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return ["max_tokens: Field required"]
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    newest = newest_compaction(messages)
    module = "anthropic.types.beta" if newest >= 0 else "anthropic.types"
    message_type = _sdk_type(module, "BetaMessageParam" if newest >= 0 else "MessageParam")
    errors = [
        e for i, m in enumerate(messages) for e in type_errors(m, message_type, f"messages.{i}")
    ]
    if errors:
        return errors
    dialogue = [m for m in live_part(messages) if m.get("role") != "system"]
    if not dialogue or (dialogue[0]["role"] != "user" and newest < 0):
        errors.append("messages: the first message must use the user role")
    for index, message in enumerate(dialogue):
        previous = dialogue[index - 1] if index else None
        following = dialogue[index + 1] if index + 1 < len(dialogue) else None
        results = _blocks(message, "tool_result")
        if results:
            kinds = [b.get("type") for b in message["content"]]
            if kinds[: len(results)] != ["tool_result"] * len(results):
                errors.append(f"messages.{index}: tool_result blocks must come first")
            calls = {b["id"] for b in _blocks(previous, "tool_use")} if previous else set()
            orphans = [b["tool_use_id"] for b in results if b["tool_use_id"] not in calls]
            if message["role"] != "user" or orphans:
                errors.append(
                    f"messages.{index}.content: unexpected tool_use_id found in tool_result "
                    f"blocks: {orphans}. Each tool_result block must have a corresponding "
                    "tool_use block in the previous message."
                )
        calls = [b["id"] for b in _blocks(message, "tool_use")]
        if calls and following is not None:
            answered = {b["tool_use_id"] for b in _blocks(following, "tool_result")}
            missing = [c for c in calls if c not in answered]
            if missing:
                errors.append(
                    f"messages.{index}: tool_use ids were found without tool_result blocks "
                    f"immediately after: {missing}"
                )
        elif calls and message["role"] == "assistant":
            errors.append(f"messages.{index}: the last message has tool_use blocks")
        for block in _blocks(message, "thinking"):
            if signatures is not None and signatures.get(block["signature"]) != block["thinking"]:
                errors.append(f"messages.{index}.content: Invalid `signature` in `thinking` block")
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
        errors.extend(_thinking_errors(dialogue))
    return errors


def newest_compaction(messages: list[Any]) -> int:
    """The index of the message holding the newest compaction block or item, or -1."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("type") == "compaction" or _blocks(message, "compaction"):
            return index
    return -1


def live_part(messages: list[Any]) -> list[Any]:
    """What the server reads: system messages, then from the newest compaction on."""
    newest = newest_compaction(messages)
    if newest < 0:
        return messages
    systems = [m for m in messages[:newest] if m.get("role") in ("system", "developer")]
    return systems + messages[newest:]


def compaction_errors(messages: list[Any], registry: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Each compaction block or item must be one this server returned, unchanged, and
    an Anthropic block must open an assistant message."""
    errors = []
    for index, message in enumerate(messages):
        if message.get("type") == "compaction":
            found: list[tuple[int, Mapping[str, Any]]] = [(0, message)]
        else:
            content = message.get("content")
            found = [
                (i, b) for i, b in enumerate(content if isinstance(content, list) else [])
                if isinstance(b, Mapping) and b.get("type") == "compaction"
            ]  # fmt: skip
            if found and (found[0][0] != 0 or message.get("role") != "assistant" or len(found) > 1):
                errors.append(f"messages.{index}: compaction_block_misplaced")
        for _, block in found:
            key = block.get("signature") or block.get("id")
            original = registry.get(str(key))
            if original is None:
                errors.append(f"messages.{index}: compaction_signature_invalid")
            elif block.get("content") != original.get("content"):
                errors.append(f"messages.{index}: compaction_content_mismatch")
            elif dict(block) != dict(original):
                errors.append(f"messages.{index}: compaction block fields changed")
    return errors


def _thinking_errors(dialogue: list[Mapping[str, Any]]) -> list[str]:
    """With thinking enabled, the final assistant turn starts with a thinking block:
    the one that pending tool results answer, and a last message of the assistant
    (a prefill, which the API refuses without one)."""
    if not dialogue:
        return []
    index = len(dialogue) - 1
    while index >= 0 and dialogue[index]["role"] == "user":
        index -= 1  # consecutive user messages are one turn (the API merges them)
    results = any(_blocks(m, "tool_result") for m in dialogue[index + 1 :])
    if index < 0 or (index < len(dialogue) - 1 and not results):
        return []
    content = dialogue[index].get("content")
    first = content[0].get("type") if isinstance(content, list) and content else "text"
    if first in ("thinking", "redacted_thinking"):
        return []
    return [
        f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
        f"found `{first}`. When `thinking` is enabled, a final `assistant` message must "
        "start with a thinking block."
    ]


def _blocks(message: Mapping[str, Any] | None, kind: str) -> list[Mapping[str, Any]]:
    content = message.get("content") if message else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == kind]


def check_chat(body: Mapping[str, Any]) -> list[str]:
    """The Chat Completions API's rules for ``messages``."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    message_type = _sdk_type("openai.types.chat", "ChatCompletionMessageParam")
    errors = [
        e for i, m in enumerate(messages) for e in type_errors(m, message_type, f"messages[{i}]")
    ]
    if errors:
        return errors
    dialogue = [m for m in messages if m["role"] not in ("system", "developer")]
    if not dialogue or dialogue[0]["role"] != "user":
        errors.append("messages: the first non-system message must be a user message")
    pending: list[str] = []  # calls of the last assistant message not answered yet
    answerable: set[str] = set()
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in answerable:
                errors.append(
                    f"messages[{index}]: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'"
                )
            answerable.discard(call_id)
            if call_id in pending:
                pending.remove(call_id)
            continue
        if pending:
            errors.append(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {pending}"
            )
        calls = [c["id"] for c in message.get("tool_calls") or []] if role == "assistant" else []
        pending, answerable = list(calls), set(calls)
    if pending:
        errors.append(f"the last assistant message's tool calls are unanswered: {pending}")
    return errors


@dataclass
class ResponsesMemory:
    """What the fake Responses API remembers of its own output items."""

    reasoning_follower: dict[str, str] = field(default_factory=dict)  # rs id -> next item id
    call_reasoning: dict[str, str] = field(default_factory=dict)  # fc id -> rs id


def check_responses(body: Mapping[str, Any], memory: ResponsesMemory) -> list[str]:
    """The Responses API's rules for ``input``."""
    items = body.get("input")
    if isinstance(items, str):
        return []
    if not isinstance(items, list) or not items:
        return ["input: a string or a non-empty list of items is required"]
    item_type = _sdk_type("openai.types.responses", "ResponseInputItemParam")
    errors = [e for i, m in enumerate(items) for e in type_errors(m, item_type, f"input[{i}]")]
    if errors:
        return errors
    compacted = newest_compaction(items) >= 0
    items = live_part(items)
    kinds = [_kind(item) for item in items]
    dialogue = [k for k in kinds if k not in ("system", "developer", "compaction")]
    if not compacted and (not dialogue or dialogue[0] != "user"):
        errors.append("input: the first item that is not a system message must be a user message")
    ids = [item.get("id") for item in items]
    pending: list[str] = []
    answerable: set[str] = set()
    previous = ""
    for index, (item, kind) in enumerate(zip(items, kinds, strict=True)):
        if kind == "reasoning":
            follower = memory.reasoning_follower.get(item["id"])
            if follower is not None and (index + 1 >= len(items) or ids[index + 1] != follower):
                errors.append(
                    f"Item '{item['id']}' of type 'reasoning' was provided without its "
                    "required following item."
                )
        if kind == "function_call":
            needed = memory.call_reasoning.get(item.get("id") or "")
            if needed is not None and needed not in ids[:index]:
                errors.append(
                    f"Item '{item['id']}' of type 'function_call' was provided without its "
                    f"required 'reasoning' item: '{needed}'."
                )
        if kind == "function_call_output":
            if item.get("call_id") not in answerable:
                errors.append(
                    f"No tool call found for function call output with call_id "
                    f"{item.get('call_id')}."
                )
            answerable.discard(item.get("call_id"))
            if item.get("call_id") in pending:
                pending.remove(item["call_id"])
        else:
            produced = ("function_call", "reasoning", "assistant", "compaction")
            if kind in produced and previous in produced:
                if kind == "function_call":
                    pending.append(item["call_id"])
                    answerable.add(item["call_id"])
            else:
                if pending:
                    errors.append(f"No tool output found for function call {pending[0]}.")
                pending, answerable = [], set()
                if kind == "function_call":
                    pending, answerable = [item["call_id"]], {item["call_id"]}
        previous = kind
    if pending:
        errors.append(f"No tool output found for function call {pending[0]}.")
    return errors


def _as_window_message(item: Mapping[str, Any]) -> dict[str, Any]:
    """A user message of the input as the output window of a compaction gives it back."""
    content = item.get("content")
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    return {"type": "message", "role": "user", "content": content}


def _kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type", "message")
    if kind == "message":
        return str(item.get("role"))
    return str(kind)


# --------------------------------------------------------------------------- the scripted model


@dataclass(frozen=True)
class PrefixRead:
    """One request compared with the previous one on its path (the prompt cache)."""

    summary: bool
    matched: int  # its first messages or items equal to the previous request's
    previous: int  # how many the previous request had
    tokens: int  # the matched prefix (its model, system, tools and messages), JSON / 4


CONTINUATION_LEADS = ("This is not a new task", "这不是新的任务")
"""How a continuation summariser's instruction opens."""


def _text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[0], Mapping):
        text = content[0].get("text")
        return text if isinstance(text, str) else ""
    return ""


def asks_continuation(listed: object) -> bool:
    """Whether a request's messages or items end with a continuation instruction."""
    if not isinstance(listed, list) or not listed or not isinstance(listed[-1], Mapping):
        return False
    last = listed[-1]
    return last.get("role") == "user" and _text_of(last).startswith(CONTINUATION_LEADS)


def _unmarked(value: Any) -> Any:
    """``value`` without its ``cache_control`` markers (not part of the cached text)."""
    if isinstance(value, Mapping):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


@dataclass
class Stats:
    """What the fake server saw."""

    agent_requests: int = 0
    summary_requests: int = 0
    rejected: int = 0
    overflows: int = 0
    recalls: int = 0
    rejections: list[str] = field(default_factory=list)
    bodies: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    prefix_reads: list[PrefixRead] = field(default_factory=list)


TOOLS = {"search_logs": "query", "read_file": "path"}

RECALL_HANDLE = re.compile(r"; recall (r-[0-9a-f]{12})\]")
"""A recall handle in a truncation marker."""


def tool_calls_for(turn: int) -> list[tuple[str, dict[str, str]]]:
    """The script: every fifth agent request ends the task with text; others call tools."""
    if turn % 5 == 0:
        return []
    calls = [("search_logs", {"query": f"timeout in worker {turn}"})]
    if turn % 3 == 1:
        calls.append(("read_file", {"path": f"src/worker_{turn}.py"}))
    return calls


class FakeServer:
    """Answers the three APIs from the script above; rejects requests that break their rules."""

    def __init__(self, *, keep_bodies: bool = False, context_window: int | None = None) -> None:
        self.stats = Stats()
        self.keep_bodies = keep_bodies
        self.context_window = context_window  # in tokens, counted as JSON characters / 4
        self.responses_memory = ResponsesMemory()
        self.thinking_signatures: dict[str, str] = {}
        self.compactions: dict[str, dict[str, Any]] = {}  # signature or id -> as returned
        self.live_tokens: list[int] = []  # the live input of each agent request
        self.server_compactions = 0
        self.on_demand = 0  # of which asked for (compaction parameter, responses.compact)
        self.compaction_unavailable = False
        self._ids = itertools.count(1)
        self._previous: dict[str, tuple[str, list[Any]]] = {}  # path -> head, listed

    def client(self, sdk: str, *, asynchronous: bool = False) -> Any:
        """An HTTP client for ``sdk``'s ``http_client=``, answered by this server."""
        http = http_library(sdk)
        transport = http.MockTransport(self.handle)
        if asynchronous:
            return http.AsyncClient(transport=transport)
        return http.Client(transport=transport)

    def handle(self, request: Any) -> Any:
        http = _library_of(request)
        body = json.loads(request.content or b"{}")
        path = request.url.path
        if self.keep_bodies:
            self.stats.bodies.append((path, body))
        routes: dict[str, tuple[Callable[[Mapping[str, Any]], list[str]], Callable[..., Any]]] = {
            "/v1/messages": (
                lambda b: check_anthropic(b, self.thinking_signatures),
                self._anthropic,
            ),
            "/v1/chat/completions": (check_chat, self._chat),
            "/v1/responses": (
                lambda b: check_responses(b, self.responses_memory),
                self._responses,
            ),
            "/v1/responses/compact": (
                lambda b: check_responses(b, self.responses_memory),
                self._responses,  # answered by _on_demand
            ),
        }
        if path not in routes:
            return http.Response(404, json={"error": {"message": f"no route {path}"}})
        check, answer = routes[path]
        errors = check(body)
        listed = body.get("messages") if path == "/v1/messages" else body.get("input")
        if isinstance(listed, list) and path != "/v1/chat/completions":
            errors = errors or compaction_errors(listed, self.compactions)
        if errors:
            self.stats.rejected += 1
            self.stats.rejections.append(f"{path}: {errors[0]}")
            return self._error(http, path, "; ".join(errors[:3]))
        tokens = len(request.content) // 4
        if self.context_window is not None and tokens > self.context_window:
            self.stats.overflows += 1
            return self._overflow(http, path, tokens, self.context_window)
        if path == "/v1/responses/compact" or (path == "/v1/messages" and "compaction" in body):
            return self._on_demand(http, path, body)
        conversation = body.get("input" if path.startswith("/v1/responses") else "messages")
        summary = not body.get("tools") or asks_continuation(conversation)
        if summary:
            self.stats.summary_requests += 1
        else:
            self.stats.agent_requests += 1
        read = self._prefix_read(path, body, summary)
        answered = answer(body, summary, self.stats.agent_requests)
        if summary:
            _report_cache_read(answered, read.tokens)
        return http.Response(200, json=answered)

    def _prefix_read(self, path: str, body: Mapping[str, Any], summary: bool) -> PrefixRead:
        """Compare the request with the previous one on ``path``: an exact prefix of
        the same head (model, system or instructions, tools), message by message."""
        key = "input" if path.startswith("/v1/responses") else "messages"
        listed = _unmarked(list(body.get(key) or []))
        head = json.dumps(_unmarked({
            k: body.get(k) for k in ("model", "system", "instructions", "tools")
        }))  # fmt: skip
        before_head, before = self._previous.get(path, ("", []))
        matched = 0
        if head == before_head:
            for now, then in zip(listed, before, strict=False):
                if now != then:
                    break
                matched += 1
        self._previous[path] = (head, listed)
        tokens = (len(head) + len(json.dumps(listed[:matched]))) // 4 if matched else 0
        read = PrefixRead(summary, matched, len(before), tokens)
        self.stats.prefix_reads.append(read)
        return read

    def _on_demand(self, http: types.ModuleType, path: str, body: Mapping[str, Any]) -> Any:
        """An on-demand compaction: the block alone, or the output window."""
        if self.compaction_unavailable:
            error = {"type": "overloaded_error", "message": "compaction_unavailable"}
            return http.Response(529, json={"type": "error", "error": error})
        key = "messages" if path == "/v1/messages" else "input"
        live = live_part(list(body.get(key) or []))
        dialogue = [m for m in live if m.get("role") not in ("system", "developer")]
        if len(dialogue) < 2:
            return self._error(
                http, path, "compaction_nothing_to_summarize: nothing to summarize",
                code="compaction_nothing_to_summarize",
            )
        self.on_demand += 1
        n = next(self._ids)
        tokens = len(json.dumps(body)) // 4
        if path == "/v1/messages":
            return http.Response(200, json={
                "id": f"msg_{n}", "type": "message", "role": "assistant",
                "model": body.get("model", "fake"),
                "content": [self._compaction(n, anthropic=True)],
                "stop_reason": "compaction", "stop_sequence": None,
                "usage": {"input_tokens": tokens, "output_tokens": 40},
            })  # fmt: skip
        window = [_as_window_message(m) for m in dialogue if _kind(m) == "user"]
        return http.Response(200, json={
            "id": f"cmpresp_{n}", "object": "response.compaction",
            "created_at": 1_700_000_000 + n,
            "output": [*window, self._compaction(n, anthropic=False)],
            "usage": {
                "input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": tokens + 40,
            },
        })  # fmt: skip

    @staticmethod
    def _overflow(http: types.ModuleType, path: str, tokens: int, window: int) -> Any:
        """The error each API answers when the prompt does not fit its context window."""
        if path == "/v1/messages":
            message = f"prompt is too long: {tokens} tokens > {window} maximum"
            error = {"type": "invalid_request_error", "message": message}
            return http.Response(400, json={"type": "error", "error": error})
        if path == "/v1/chat/completions":
            message = (
                f"This model's maximum context length is {window} tokens. However, your "
                f"messages resulted in {tokens} tokens. Please reduce the length of the messages."
            )
            param = "messages"
        else:
            message = (
                "Your input exceeds the context window of this model. Please adjust your "
                "input and try again."
            )
            param = "input"
        error = {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": "context_length_exceeded",
        }
        return http.Response(400, json={"error": error})

    @staticmethod
    def _error(http: types.ModuleType, path: str, message: str, code: str | None = None) -> Any:
        if path == "/v1/messages":
            error = {"type": "invalid_request_error", "message": message}
            return http.Response(400, json={"type": "error", "error": error})
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": code}
        return http.Response(400, json={"error": error})

    def _recall(self, body: Mapping[str, Any]) -> list[tuple[str, dict[str, str]]]:
        """A call of the recall tool, once, when it is offered and a handle is shown."""
        offered = any(tool.get("name") == "recall_truncated" for tool in body.get("tools") or ())
        found = RECALL_HANDLE.search(json.dumps(body.get("messages")))
        if self.stats.recalls or not offered or found is None:
            return []
        self.stats.recalls += 1
        return [("recall_truncated", {"handle": found.group(1)})]

    def _live(self, body: Mapping[str, Any], key: str, summary: bool) -> int:
        """The live input, as JSON characters / 4: the request without what comes
        before its newest compaction artefact."""
        listed = body.get(key)
        live = live_part(listed) if isinstance(listed, list) else listed
        tokens = len(json.dumps({**body, key: live})) // 4
        if not summary:
            self.live_tokens.append(tokens)
        return tokens

    def _compaction(self, n: int, anthropic: bool) -> dict[str, Any]:
        """A compaction block (Anthropic) or item (Responses), registered as returned."""
        self.server_compactions += 1
        if anthropic:
            block = {"type": "compaction", "content": SUMMARY_TEXT, "signature": f"csig_{n}"}
            self.compactions[f"csig_{n}"] = block
        else:
            block = {"id": f"cmp_{n}", "type": "compaction", "encrypted_content": f"enc_{n}"}
            self.compactions[f"cmp_{n}"] = block
        return dict(block)

    def _anthropic(self, body: Mapping[str, Any], summary: bool, turn: int) -> dict[str, Any]:
        n = next(self._ids)
        live = self._live(body, "messages", summary)
        edits = (body.get("context_management") or {}).get("edits") or []
        triggers = [
            e.get("trigger", {}).get("value", 150_000)
            for e in edits if e.get("type") == "compact_20260112"
        ]  # fmt: skip
        calls = [] if summary else self._recall(body) or tool_calls_for(turn)
        content: list[dict[str, Any]] = []
        if summary:
            content.append({"type": "text", "text": SUMMARY_TEXT})
        elif calls:
            content.append({"type": "text", "text": "Let me look at that."})
            content.extend(
                {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
                for i, (name, args) in enumerate(calls)
            )
        else:
            content.append({"type": "text", "text": f"Task done after {turn} requests."})
        thinking = body.get("thinking")
        if not summary and isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
            text, signature = f"The user wants step {turn}.", f"sig_{n}"
            self.thinking_signatures[signature] = text
            content.insert(0, {"type": "thinking", "thinking": text, "signature": signature})
        if triggers and not summary and live > triggers[0]:
            content.insert(0, self._compaction(n, anthropic=True))
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": live,
                "output_tokens": 20,
            },
        }

    def _chat(self, body: Mapping[str, Any], summary: bool, turn: int) -> dict[str, Any]:
        n = next(self._ids)
        calls = [] if summary else tool_calls_for(turn)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": SUMMARY_TEXT if summary else (None if calls else f"Done after {turn}."),
            "refusal": None,
            "annotations": [],
        }
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for i, (name, args) in enumerate(calls)
            ]
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 1_700_000_000 + n,
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _responses(self, body: Mapping[str, Any], summary: bool, turn: int) -> dict[str, Any]:
        n = next(self._ids)
        calls = [] if summary else tool_calls_for(turn)
        output: list[dict[str, Any]] = []
        live = self._live(body, "input", summary)
        thresholds = [
            e.get("compact_threshold", 200_000)
            for e in body.get("context_management") or [] if e.get("type") == "compaction"
        ]  # fmt: skip
        if thresholds and not summary and live > thresholds[0]:
            output.append(self._compaction(n, anthropic=False))
        first = len(output)
        reasoning = not summary and n % 2 == 0
        if reasoning:
            output.append({"id": f"rs_{n}", "type": "reasoning", "summary": [], "status": None})
        for i, (name, args) in enumerate(calls):
            output.append(
                {
                    "id": f"fc_{n}_{i}",
                    "type": "function_call",
                    "call_id": f"call_{n}_{i}",
                    "name": name,
                    "arguments": json.dumps(args),
                    "status": "completed",
                }
            )
        if not calls:
            text = SUMMARY_TEXT if summary else f"Done after {turn} requests."
            output.append(
                {
                    "id": f"msg_{n}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        if reasoning:
            self.responses_memory.reasoning_follower[f"rs_{n}"] = output[first + 1]["id"]
            for item in output[first + 1 :]:
                if item["type"] == "function_call":
                    self.responses_memory.call_reasoning[item["id"]] = f"rs_{n}"
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 1_700_000_000 + n,
            "model": body.get("model", "fake"),
            "status": "completed",
            "output": output,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "metadata": {},
            "parallel_tool_calls": True,
            "temperature": 1.0,
            "top_p": 1.0,
            "tool_choice": "auto",
            "tools": body.get("tools", []),
            "usage": {
                "input_tokens": live,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15,
            },
        }


def _report_cache_read(answered: dict[str, Any], tokens: int) -> None:
    """Put ``tokens`` read from the cache into an answer's usage, as each API says it."""
    usage = answered.get("usage")
    if not isinstance(usage, dict):
        return
    if "prompt_tokens" in usage:  # Chat
        usage["prompt_tokens"] = max(usage["prompt_tokens"], tokens)
        usage["prompt_tokens_details"] = {"cached_tokens": tokens}
    elif "input_tokens_details" in usage:  # Responses
        usage["input_tokens"] = max(usage["input_tokens"], tokens)
        usage["input_tokens_details"] = {"cached_tokens": tokens}
    else:  # Anthropic: input_tokens is what was not read from the cache
        usage["input_tokens"] = max(usage["input_tokens"] - tokens, 0)
        usage["cache_read_input_tokens"] = tokens


# --------------------------------------------------------------------------- clients


def anthropic_client(server: FakeServer, *, asynchronous: bool = False) -> Any:
    """A real ``anthropic`` client (sync or async) talking to ``server``."""
    anthropic = importlib.import_module("anthropic")
    if asynchronous:
        return anthropic.AsyncAnthropic(
            api_key="offline",
            base_url=BASE_URL,
            max_retries=0,
            http_client=server.client("anthropic", asynchronous=True),
        )
    return anthropic.Anthropic(
        api_key="offline", base_url=BASE_URL, max_retries=0, http_client=server.client("anthropic")
    )


def openai_client(server: FakeServer, *, asynchronous: bool = False) -> Any:
    """A real ``openai`` client (sync or async) talking to ``server``."""
    openai = importlib.import_module("openai")
    url = BASE_URL + "/v1"
    if asynchronous:
        return openai.AsyncOpenAI(
            api_key="offline",
            base_url=url,
            max_retries=0,
            http_client=server.client("openai", asynchronous=True),
        )
    return openai.OpenAI(
        api_key="offline", base_url=url, max_retries=0, http_client=server.client("openai")
    )
