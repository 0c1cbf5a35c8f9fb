"""Loading a Hugging Face checkpoint from a local directory, the one way every text model here does
it: offline (`local_files_only`), no progress bars (they would break the JSON log lines), torch's
thread budget applied, the model in eval mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extproc.models.registry import ModelUnavailable


def checkpoint_dir(model_dir: Path | str, what: str, error: type[ModelUnavailable] = ModelUnavailable) -> Path:
    """The resolved checkpoint folder, or `error` saying why it is not one."""
    path = Path(model_dir).expanduser()
    if not path.is_dir():
        raise error(f"{what} {path} is not a directory")
    if not (path / "config.json").is_file():
        raise error(f"{what} {path} has no config.json")
    return path.resolve()


def load_local(model_dir: Path, auto_class: str, *, torch_threads: int | None = None) -> tuple[Any, Any]:
    """(tokenizer, model) from `model_dir`, the model built by transformers' `auto_class`
    (e.g. "AutoModel", "AutoModelForSequenceClassification"), in eval mode."""
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = getattr(transformers, auto_class).from_pretrained(str(model_dir), local_files_only=True)
    model.eval()
    return tokenizer, model
