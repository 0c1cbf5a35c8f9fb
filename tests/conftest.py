from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.settings import Settings
from extproc.signals.base import BuildContext


@pytest.fixture
def settings() -> Settings:
    return Settings.load(None, environ={})


@pytest.fixture
def build_ctx(settings: Settings) -> Iterator[BuildContext]:
    executor = HeavyExecutor(1, None)
    yield BuildContext(settings=settings, executor=executor, models=ModelRegistry())
    executor.shutdown()
