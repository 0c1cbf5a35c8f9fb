from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from extproc.models.executor import HeavyExecutor  # noqa: E402
from extproc.models.registry import ModelRegistry  # noqa: E402
from extproc.settings import Settings  # noqa: E402
from extproc.signals.base import BuildContext  # noqa: E402


@pytest.fixture
def settings() -> Settings:
    return Settings.load(None, environ={})


@pytest.fixture
def build_ctx(settings: Settings) -> Iterator[BuildContext]:
    executor = HeavyExecutor(1, None)
    yield BuildContext(settings=settings, executor=executor, models=ModelRegistry())
    executor.shutdown()
