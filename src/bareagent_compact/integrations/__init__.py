"""Glue for the agent frameworks: LangChain, the OpenAI Agents SDK, Pydantic AI and
smolagents.

Each submodule imports its framework when it is imported itself, never before:
``import bareagent_compact`` loads none of them, and each needs its optional extra
(``pip install "bareagent-compact[langchain]"`` and so on).
"""
