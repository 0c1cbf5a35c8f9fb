"""Envoy ext_proc router for OpenAI-style LLM traffic."""

__version__ = "0.1.0"
