"""Reading a provider's answer: the summary text, or why there is none."""

from __future__ import annotations

import logging

from bareagent_compact.engine.full.attempt import left_as
from bareagent_compact.providers import adapter_hint, response_text
from bareagent_compact.requests import Outcome
from bareagent_compact.result import Reason

logger = logging.getLogger("bareagent_compact.compactor")


def summary_text(response: object) -> str | None:
    """Normalise a provider's answer to the summary text, or ``None`` when unusable.

    Usable: a ``str``, an object whose ``text`` attribute is a ``str``, or an SDK
    response returned as it is (an Anthropic ``Message``, an OpenAI
    ``ChatCompletion`` or ``Response``, or their dicts; read as the provider
    adapters read them), holding something other than whitespace. The usage
    an answer carries is read apart (:func:`bareagent_compact.usage.answer_cost`).
    """
    text = response if isinstance(response, str) else getattr(response, "text", None)
    if not isinstance(text, str):
        text = response_text(response)
    if not isinstance(text, str) or not text.strip():
        return None
    return str(text)  # a plain str, whatever the adapter's str subclass carried


def read_summary(answer: Outcome, truncated: int = 0) -> tuple[str | None, Reason | None]:
    """The summary text of a provider's answer, or ``None`` and why not (logged);
    ``truncated``: results micro-compaction truncated in the same call."""
    left = left_as(truncated)
    if answer.failed:
        logger.warning(
            "summary provider failed%s; %s",
            answer.because(),
            left,
            exc_info=answer.error,
        )
        return None, Reason.PROVIDER_RAISED if answer.reason is None else Reason.PROVIDER_AWAITABLE
    try:
        summary = summary_text(answer.value)
    except Exception:
        logger.warning("reading the summary failed; %s", left, exc_info=True)
        return None, Reason.PROVIDER_RAISED
    if summary is None:
        logger.warning(
            "summary provider returned an unusable summary (%s%s); %s",
            type(answer.value).__name__,
            adapter_hint(answer.value),
            left,
        )
        return None, Reason.UNUSABLE_SUMMARY
    return summary, None
