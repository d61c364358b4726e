"""Tests with the real anthropic and openai clients (the integration extra)."""
