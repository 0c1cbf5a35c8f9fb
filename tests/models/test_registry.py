"""The model registry: a model that failed to load is remembered, and retried after a reload."""

from __future__ import annotations

import pytest

from extproc.models.registry import ModelRegistry, ModelUnavailable


def test_a_reload_retries_models_that_failed_to_load() -> None:
    registry = ModelRegistry()
    attempts: list[int] = []

    def broken() -> object:
        attempts.append(1)
        raise OSError("weights missing")

    for _ in range(2):
        with pytest.raises(ModelUnavailable):
            registry.get("vision", broken)
    assert len(attempts) == 1  # a failure is remembered, not retried per request
    assert registry.forget_failures() == ["vision"]
    assert registry.get("vision", lambda: "loaded now") == "loaded now"
    assert [s.loaded for s in registry.statuses()] == [True]


def test_on_load_hears_each_model_once_and_never_a_failure() -> None:
    registry = ModelRegistry()
    heard: list[str] = []
    registry.on_load = heard.append

    def broken() -> object:
        raise OSError("weights missing")

    assert registry.get("embedder", lambda: "minilm") == "minilm"
    assert registry.get("embedder", lambda: "another") == "minilm"  # cached: no second load, no second call
    with pytest.raises(ModelUnavailable):
        registry.get("vision", broken)
    assert heard == ["embedder"]
