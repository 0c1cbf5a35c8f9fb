"""Fixtures for the vision tests: tiny random SigLIP / SigLIP2 checkpoints built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from extproc.testing.tiny_siglip import build_tiny_siglip, build_tiny_siglip2

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "images"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return CORPUS


@pytest.fixture(scope="session")
def siglip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_siglip(tmp_path_factory.mktemp("siglip"))


@pytest.fixture(scope="session")
def siglip2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_siglip2(tmp_path_factory.mktemp("siglip2"))


@pytest.fixture(scope="session", params=["siglip", "siglip2"])
def any_model_dir(request: pytest.FixtureRequest, siglip_dir: Path, siglip2_dir: Path) -> Path:
    return siglip_dir if request.param == "siglip" else siglip2_dir
