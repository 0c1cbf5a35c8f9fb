"""Session-wide OCR fixtures: the rendered scenes (rendered once) and one real OCR service."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # ocr_scenes, shared with bench/bench_ocr.py

from ocr_scenes import (
    car_photo,
    code_screenshot,
    degrade,
    injection_banner,
    jpeg_bytes,
    landscape_photo,
    passport_page,
    png_bytes,
    scanned_form,
    tampered_mrz,
)

from extproc.models.executor import HeavyExecutor
from extproc.models.ocr import OCR_MODEL_NAME, OcrService, load_ocr_service
from extproc.models.registry import ModelRegistry
from extproc.settings import Settings
from extproc.signals.base import BuildContext, SignalContext


@pytest.fixture(scope="session")
def scene_bytes() -> dict[str, bytes]:
    """Every OCR scene rendered once (noise makes each render differ, so the cache needs one copy)."""
    passport = passport_page()
    return {
        "passport": png_bytes(passport),
        "passport_degraded": degrade(passport),
        "passport_tampered": png_bytes(passport_page(tampered_mrz())),
        "code": png_bytes(code_screenshot()),
        "form": scanned_form(),
        "injection": png_bytes(injection_banner()),
        "landscape": png_bytes(landscape_photo()),
        "car": jpeg_bytes(car_photo()),
    }


@pytest.fixture(scope="session")
def ocr_settings() -> Settings:
    # A generous budget: the build machines' 2 cores are shared, and a test must not flake on load.
    return Settings.load(None, environ={"VSR_OCR__BUDGET_MS": "60000"})


@pytest.fixture(scope="session")
def ocr_registry(ocr_settings: Settings) -> ModelRegistry:
    """A registry holding one real rapidocr service for the whole session (models load once)."""
    registry = ModelRegistry()
    registry.get(OCR_MODEL_NAME, lambda: load_ocr_service(ocr_settings.ocr, default_threads=2))
    return registry


@pytest.fixture(scope="session")
def ocr_service(ocr_registry: ModelRegistry, ocr_settings: Settings) -> OcrService:
    service: OcrService = ocr_registry.get(OCR_MODEL_NAME, lambda: load_ocr_service(ocr_settings.ocr))
    return service


@pytest.fixture(scope="session")
def heavy() -> Iterator[HeavyExecutor]:
    executor = HeavyExecutor(1, 2)
    yield executor
    executor.shutdown()


@pytest.fixture(scope="session")
def ocr_build_ctx(ocr_settings: Settings, heavy: HeavyExecutor, ocr_registry: ModelRegistry) -> BuildContext:
    return BuildContext(settings=ocr_settings, executor=heavy, models=ocr_registry)


@pytest.fixture
def signal_ctx(heavy: HeavyExecutor) -> SignalContext:
    return SignalContext(executor=heavy, deadline=time.monotonic() + 30.0)
