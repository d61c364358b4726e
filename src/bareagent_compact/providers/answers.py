"""An SDK response a provider returned as it is: its text, read as the adapters
read it, or the adapter to wrap the client with when its shape is unknown."""

from __future__ import annotations

from typing import Final

from bareagent_compact.providers._common import _get, _is_list
from bareagent_compact.providers.anthropic import _read_anthropic
from bareagent_compact.providers.openai_chat import _read_chat
from bareagent_compact.providers.openai_responses import _read_responses

__all__ = ["adapter_hint", "response_text"]

_READERS: Final = (
    ("choices", _read_chat),
    ("output", _read_responses),
    ("content", _read_anthropic),
)
"""The key that tells an SDK response's shape, and the adapter's reader for it."""

_ADAPTERS: Final = {
    "anthropic": ("anthropic_provider",),
    "openai": ("openai_chat_provider", "openai_responses_provider"),
}


def response_text(response: object) -> str | None:
    """The text of an SDK response a provider returned as it is: an Anthropic
    ``Message``, an OpenAI ``ChatCompletion`` or ``Response``, or their dicts
    (``model_dump()``), read as the adapters read them (``""`` for a refusal or
    no text, with a warning); ``None`` for any other shape."""
    for key, read in _READERS:
        if _is_list(_get(response, key)):
            return read(response)
    return None


def adapter_hint(response: object) -> str:
    """For a warning about an answer of no known shape: the adapter to use
    (guessed from the answer's module), or ``""`` when the shape is known."""
    if isinstance(response, str) or isinstance(getattr(response, "text", None), str):
        return ""
    if any(_is_list(_get(response, key)) for key, _ in _READERS):
        return ""
    package = type(response).__module__.partition(".")[0]
    names = _ADAPTERS.get(package, (*_ADAPTERS["anthropic"], *_ADAPTERS["openai"]))
    if package not in _ADAPTERS:
        names = (*names, "bareagent_provider")
    adapters = " or ".join(f"bareagent_compact.providers.{name}(...)" for name in names)
    return f"; return a str, or wrap the client with {adapters}"
