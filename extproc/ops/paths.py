"""Where the repository's files are, for the tooling that renders or starts them.

In a source checkout `REPO_ROOT` is the repository; after a plain `pip install` it is the
site-packages folder, which holds no `envoy/` or `docker/`: tools that need those say so
(`require_repository`) instead of failing on a missing file.
"""

from __future__ import annotations

from pathlib import Path

from extproc.settings import DEFAULT_POLICY

PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = PACKAGE_DIR.parent

__all__ = ["DEFAULT_POLICY", "PACKAGE_DIR", "REPO_ROOT", "TRAINING_ONLY", "in_repository", "require_repository"]

# Training rows written for the project stay in the repository (the wheel leaves them out).
TRAINING_ONLY = (
    "retraining needs a source checkout of the project: the wheel leaves its training rows out "
    "(extproc/tools/*.jsonl, the domain weights' extra_train.jsonl). Run it from a clone."
)


def in_repository() -> bool:
    """True when running from a source checkout (the repository's envoy/ and docker/ are there)."""
    return (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "envoy").is_dir()


def require_repository(what: str) -> Path:
    """The repository root, or a clear error naming what needed it."""
    if not in_repository():
        raise FileNotFoundError(
            f"{what} needs a source checkout of the project (its envoy/ and docker/ folders); "
            f"{REPO_ROOT} is not one. Run it from a clone, or pass explicit paths."
        )
    return REPO_ROOT
