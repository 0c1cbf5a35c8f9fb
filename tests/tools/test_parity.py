"""The parity harness passes on the corpus and fails on each injected drift; the corpus is what it says."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from extproc.cli import main as cli_main
from extproc.tools.parity import ReferencePath, corpus_files, run_parity

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def references(siglip_dir: Path, siglip2_dir: Path) -> dict[Path, ReferencePath]:
    return {siglip_dir: ReferencePath(siglip_dir), siglip2_dir: ReferencePath(siglip2_dir)}


def test_corpus_covers_modes_and_sizes(corpus_dir: Path) -> None:
    files = corpus_files(corpus_dir)
    assert len(files) >= 20
    modes, sides = set(), []
    for path in files:
        with Image.open(path) as img:
            modes.add(img.mode)
            sides.append(max(img.size))
    assert {"RGB", "RGBA", "L", "P", "CMYK"} <= modes
    assert min(sides) <= 32 and max(sides) >= 2000
    sources = (corpus_dir.parent / "SOURCES.md").read_text(encoding="utf-8")
    missing = [p.name for p in files if p.name not in sources]
    assert not missing, f"not recorded in SOURCES.md: {missing}"
    assert sum(p.stat().st_size for p in files) < 4_000_000


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_parity_passes_on_the_corpus(
    any_model_dir: Path, corpus_dir: Path, references: dict[Path, ReferencePath], precision: str
) -> None:
    report = run_parity(
        any_model_dir,
        corpus_dir,
        precision=precision,
        reference=references[any_model_dir],  # type: ignore[arg-type]
    )
    assert report.passed, report.format()
    assert report.count_at_threshold == len(report.rows) >= 20
    assert report.max_pixel_diff <= 1e-6  # our preprocessing is bit-exact
    assert report.min_cosine >= (0.9999 if precision == "fp32" else 0.999)


def test_no_normalisation_fails(any_model_dir: Path, corpus_dir: Path, references: dict[Path, ReferencePath]) -> None:
    report = run_parity(any_model_dir, corpus_dir, drift="no_normalize", reference=references[any_model_dir])
    assert not report.passed
    assert report.min_cosine < 0.9  # caught by the embeddings
    assert report.max_pixel_diff > 0.5  # and by the pixels


def test_bilinear_resize_fails(any_model_dir: Path, corpus_dir: Path, references: dict[Path, ReferencePath]) -> None:
    report = run_parity(any_model_dir, corpus_dir, drift="bilinear", reference=references[any_model_dir])
    assert not report.passed
    # Random weights barely react to the resize filter; the pixel tensors do.
    assert report.max_pixel_diff > 0.05
    assert any("pixel tensors" in f for f in report.failures())


def test_mean_pooling_fails(any_model_dir: Path, corpus_dir: Path, references: dict[Path, ReferencePath]) -> None:
    report = run_parity(any_model_dir, corpus_dir, drift="mean_pool", reference=references[any_model_dir])
    assert not report.passed
    assert report.max_pixel_diff == 0.0  # the pixels are right; the pooling is not
    assert report.min_cosine < 0.5


def test_cli_exit_codes(siglip_dir: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["parity", "--model", str(siglip_dir), "--images", str(corpus_dir), "--precision", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "min cosine" in out and ">= 0.999: 24/24" in out
    code = cli_main(["parity", "--model", str(siglip_dir), "--images", str(corpus_dir), "--drift", "mean_pool"])
    assert code == 1 and "FAIL" in capsys.readouterr().out
    assert cli_main(["parity", "--model", str(siglip_dir / "nope"), "--images", str(corpus_dir)]) == 2


def test_models_pull_fails_clearly_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = cli_main(["models", "pull", "google/siglip-base-patch16-224", "--dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "could not download" in err and "needs internet access" in err
    assert not any(tmp_path.iterdir())  # nothing half-made left behind


def test_models_check(siglip_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["models", "check", str(siglip_dir)]) == 0
    assert "OK: siglip" in capsys.readouterr().out
    assert cli_main(["models", "check", str(tmp_path)]) == 1
    assert "no config.json" in capsys.readouterr().err


def test_sample_probe_runs(siglip_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    probe = REPO / "policies" / "probes" / "sample.yaml"
    assert cli_main(["probe", "--model", str(siglip_dir), "--probe", str(probe), "--precision", "fp32"]) == 0
    out = capsys.readouterr().out
    assert "top-1 accuracy" in out and "inversion rate" in out
    # random weights cannot be held to an accuracy bar
    code = cli_main(["probe", "--model", str(siglip_dir), "--probe", str(probe), "--min-accuracy", "1.01"])
    assert code == 1
