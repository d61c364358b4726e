"""Input checks at the API boundary, run before anything is mutated."""

from __future__ import annotations

import math
from collections.abc import MutableSequence
from typing import Any, Final

from bareagent_compact import dialects

_READS: Final = (
    "the compactor reads message dicts (Anthropic Messages, OpenAI Chat Completions or "
    "Responses) and anthropic or openai SDK objects"
)

_LANGCHAIN_HINT: Final = (
    "use bareagent_compact.integrations.langchain.CompactionMiddleware(compactor) in "
    "create_agent(middleware=[...]), or convert them first, e.g. with "
    "langchain_core.messages.convert_to_openai_messages(messages)"
)
_SMOLAGENTS_ROLES: Final = (
    "map the roles tool-call -> assistant and tool-response -> user, as smolagents "
    "does for models without tool roles"
)
_FRAMEWORKS: Final = {
    "langchain_core": ("LangChain", _LANGCHAIN_HINT),
    "langchain": ("LangChain", _LANGCHAIN_HINT),
    "langchain_community": ("LangChain", _LANGCHAIN_HINT),
    "pydantic_ai": (
        "Pydantic AI",
        "compact them with the Pydantic AI integration: Agent(..., capabilities=["
        "ProcessHistory(compaction_processor(compactor))]) with compaction_processor from "
        "bareagent_compact.integrations.pydantic_ai "
        '(pip install "bareagent-compact[pydantic-ai]")',
    ),
    "smolagents": (
        "smolagents",
        "use bareagent_compact.integrations.smolagents.CompactingMemory(agent, compactor), "
        "which keeps agent.memory.steps compacted; or convert them first, e.g. with "
        "agent.write_memory_to_messages() or step.to_messages(), "
        f"then each ChatMessage with .dict(), and {_SMOLAGENTS_ROLES}",
    ),
    "agents": (
        "OpenAI Agents SDK",
        "use compaction_input_filter(compactor) for RunConfig(call_model_input_filter=...) "
        "and CompactingSession(session, compactor), both from "
        "bareagent_compact.integrations.openai_agents",
    ),
}
"""The agent frameworks whose message objects the compactor does not read, by the
top-level package their classes come from: their name and the way forward."""

_PROVIDERS: Final = {
    "LangChain": (
        "wrap it: langchain_chat_provider(model) from bareagent_compact.integrations.langchain"
    ),
    "Pydantic AI": (
        "wrap it: summary_provider(model) from bareagent_compact.integrations.pydantic_ai "
        "(with AsyncCompactor)"
    ),
}
"""The way to make a framework's chat model the summariser."""

_LANGCHAIN_TYPES: Final = frozenset(
    {"human", "ai", "system", "tool", "function", "chat", "remove"}
    | {f"{kind}MessageChunk" for kind in ("AI", "Human", "System", "Tool", "Function", "Chat")}
)
"""The ``type`` of a LangChain message as a dict (``model_dump()``, ``messages_to_dict``)."""

_ROLE_HINTS: Final = {
    "human": f"a LangChain message type; {_LANGCHAIN_HINT}",
    "ai": f"a LangChain message type; {_LANGCHAIN_HINT}",
    "tool-call": f"a smolagents role; {_SMOLAGENTS_ROLES}",
    "tool-response": f"a smolagents role; {_SMOLAGENTS_ROLES}",
}


def framework_of(value: object) -> tuple[str, str] | None:
    """``(name, way forward)`` of the agent framework ``value``'s class (or a class it
    derives from) belongs to, by module path (no framework is imported), else ``None``."""
    for cls in type(value).__mro__:
        module = getattr(cls, "__module__", None)
        if isinstance(module, str):
            found = _FRAMEWORKS.get(module.partition(".")[0])
            if found is not None:
                return found
    return None


def foreign(where: str, value: object) -> TypeError | None:
    """The error for a framework's message object at ``where``, else ``None``."""
    found = framework_of(value)
    if found is None:
        return None
    name, hint = found
    article = "an" if name[0] in "AEIOU" else "a"
    return TypeError(
        f"{where} is {article} {name} {type(value).__name__}: {_READS}, not {name} messages; "
        f"{hint}"
    )


def not_a_list(messages: object) -> TypeError:
    """The error for a ``messages`` argument that is not a list (naming the way
    forward when it is an agent framework's object)."""
    return foreign("messages", messages) or TypeError(
        f"messages must be a list of dicts, got {type(messages).__name__}"
    )


def not_a_provider(provider: object) -> TypeError:
    """The error for a ``provider`` that is not callable (naming the wrapper of a
    framework's chat model)."""
    error = f"provider must be callable, got {type(provider).__name__}"
    found = framework_of(provider)
    hint = _PROVIDERS.get(found[0]) if found is not None else None
    return TypeError(f"{error}: a {found[0]} model; {hint}" if found and hint else error)


def not_a_dict(index: int, message: object) -> TypeError:
    """The error for an item of ``messages`` that is not a dict, naming its index (and
    the framework and the way forward for an agent framework's message object)."""
    error = foreign(f"messages[{index}]", message)
    if error is not None:
        return error
    return TypeError(f"messages[{index}] must be a dict, got {type(message).__name__}")


def check_int(name: str, value: object, minimum: int = 0) -> int:
    """``value`` if it is an ``int`` (not a ``bool``) of at least ``minimum``, else
    ``TypeError`` / ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_name(name: str, value: object) -> str:
    """``value`` as a non-empty ``str``; else a ``TypeError`` or ``ValueError`` naming ``name``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{name} must not be empty")
    return value


def validate_messages(
    messages: Any, *, objects: bool = False, only: list[int] | None = None
) -> None:
    """Raise ``TypeError`` naming the first index that is not a message dict.

    A message has a ``str`` role, one a dialect knows; an OpenAI Responses item
    other than a message (``function_call``, ``reasoning`` ...) may have a ``str``
    type instead, but not a LangChain message's. With ``objects``, SDK model
    objects (anything with ``model_dump`` that is no agent framework's message) are
    let through unchecked, to be converted. ``only``: the indices to check, in
    order (the others are known to be valid).
    """
    if type(messages) is not list and not isinstance(messages, MutableSequence):
        raise not_a_list(messages)
    indexed = enumerate(messages) if only is None else ((i, messages[i]) for i in only)
    for index, message in indexed:
        if not isinstance(message, dict):
            if objects and is_sdk_object(message):
                continue
            raise not_a_dict(index, message)
        _check_role(index, message)


def is_sdk_object(value: object) -> bool:
    """True for an SDK model object: anything with pydantic's ``model_dump`` that is
    no agent framework's message (see :func:`framework_of`)."""
    return callable(getattr(value, "model_dump", None)) and framework_of(value) is None


def _check_role(index: int, message: dict[Any, Any]) -> None:
    role = message.get("role")
    if isinstance(role, str):
        if role not in dialects.KNOWN_ROLES and dialects.typed_item(message) is None:
            raise _unknown_role(index, role)
    elif not _is_item(message, role):
        raise TypeError(f"messages[{index}]['role'] must be a str, got {type(role).__name__}")
    elif message["type"] in _LANGCHAIN_TYPES and not dialects.claims_item_type(message["type"]):
        raise TypeError(
            f"messages[{index}] is a LangChain message dict (type {message['type']!r}): "
            f"{_READS}; {_LANGCHAIN_HINT}"
        )


def _unknown_role(index: int, role: str) -> TypeError:
    known = ", ".join(repr(name) for name in sorted(dialects.KNOWN_ROLES))
    role = str.__str__(role)  # the value of a str enum member (smolagents' MessageRole)
    hint = _ROLE_HINTS.get(role)
    return TypeError(
        f"messages[{index}]['role'] is {role!r}, which no dialect knows (known: {known})"
        + (f": {hint}" if hint else "")
    )


def _is_item(message: dict[Any, Any], role: object) -> bool:
    """True for an OpenAI Responses item other than a message: no role, a ``str`` type."""
    return role is None and dialects.typed_item(message) is not None


def _check_window(window: object) -> int | None:
    """``context_window``: ``None`` or an ``int >= 1``."""
    if window is None:
        return None
    return check_int("context_window", window, 1)


def threshold_tokens(threshold: object, window: object) -> int:
    """The absolute threshold in force: an ``int`` as given (at most
    ``context_window`` when that is given), or a ``float`` in ``(0, 1]`` as that
    share of ``context_window`` (``floor``, at least 1 token); else ``TypeError`` /
    ``ValueError``."""
    window = _check_window(window)
    if isinstance(threshold, float):
        if not 0 < threshold <= 1:  # NaN fails this too
            raise ValueError(
                "threshold as a float is a share of context_window, in (0, 1]; give an "
                f"absolute count as an int, got {threshold!r}"
            )
        if window is None:
            raise ValueError(
                f"threshold={threshold!r} is a share of the context window: give "
                "context_window=N (tokens), or an absolute threshold as an int"
            )
        tokens = math.floor(threshold * window)
        if tokens < 1:
            raise ValueError(
                f"threshold={threshold!r} of context_window={window} is less than one token"
            )
        return tokens
    threshold = check_int("threshold", threshold)
    if window is not None and threshold > window:
        raise ValueError(
            f"threshold={threshold} is over context_window={window}: the requests would "
            "be refused before any compaction (give threshold= at most the window, or a "
            "share of it such as 0.8)"
        )
    return threshold


SUMMARY_CONTENTS: Final = ("str", "auto", "blocks")
"""What ``summary_content`` takes: ``"str"`` (the specification's), ``"auto"``
(text blocks when the history's messages hold lists of blocks), ``"blocks"``."""


def check_summary_content(value: object) -> None:
    """``summary_content``: one of :data:`SUMMARY_CONTENTS`, else ``TypeError`` /
    ``ValueError``."""
    if not isinstance(value, str):
        raise TypeError(f"summary_content must be a str, got {type(value).__name__}")
    if value not in SUMMARY_CONTENTS:
        raise ValueError(f"summary_content must be one of {list(SUMMARY_CONTENTS)}, got {value!r}")
