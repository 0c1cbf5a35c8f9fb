"""Named entities from a local token-classification checkpoint (for PII: names, places, dates).

A checkpoint directory is loaded with `AutoTokenizer` + `AutoModelForTokenClassification`,
`local_files_only=True`. Its labels (`config.id2label`) use a BIO-style scheme: `B-PER`,
`I-PER`, `O`, also `E-`/`S-` (BIOES) or `L-`/`U-` (BILOU), or bare types (`PER`). The
entity *types* are the labels without their prefix (`PER`, `LOC`, `DATE`...).

`find(text)` runs the model over the text in overlapping windows of at most `max_length`
tokens (a fast tokenizer's overflow with `stride`), and aggregates per word: a word takes
the label and probability of its first sub-token (so `Par ##is` stays one word), words are
grouped into entities by their prefixes, and an entity's span is the character offsets of
its first and last words (`return_offsets_mapping`) and its score the mean of its words'
probabilities. Entities found twice in overlapping windows are kept once (the higher score).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from extproc.models.hf_classifier import checkpoint_labels
from extproc.models.local_checkpoint import checkpoint_dir, load_local
from extproc.models.registry import ModelRegistry, ModelUnavailable

MAX_TOKENS = 512
_BEGIN = frozenset({"B", "S", "U"})  # starts an entity
_END = frozenset({"E", "L", "S", "U"})  # ends it after this word
_PREFIXES = _BEGIN | _END | {"I"}


class NerCheckpointError(ModelUnavailable):
    """The directory is missing or is not a usable token-classification checkpoint."""


@dataclass(frozen=True, slots=True)
class Entity:
    type: str  # the label without its B-/I- prefix, e.g. "PER"
    start: int  # character offsets in the text given to `find` (end exclusive)
    end: int
    score: float  # mean probability of its words' labels


def split_tag(label: str) -> tuple[str | None, str | None]:
    """(prefix, type) of a label: "B-PER" -> ("B", "PER"), "PER" -> (None, "PER"), "O" -> (None, None)."""
    if label.upper() == "O" or not label:
        return None, None
    for sep in ("-", "_"):
        head, found, tail = label.partition(sep)
        if found and head.upper() in _PREFIXES and tail:
            return head.upper(), tail
    return None, label


def entity_types(labels: Sequence[str]) -> frozenset[str]:
    return frozenset(t for t in (split_tag(label)[1] for label in labels) if t is not None)


@dataclass(slots=True)
class _Word:
    start: int
    end: int
    label: str
    score: float


def group_words(words: Sequence[_Word]) -> list[Entity]:
    """BIO(ES) grouping of labelled words into entities."""
    out: list[Entity] = []
    current: list[_Word] = []
    current_type: str | None = None

    def close() -> None:
        nonlocal current, current_type
        if current and current_type is not None:
            score = float(np.mean([w.score for w in current]))
            out.append(Entity(current_type, current[0].start, current[-1].end, score))
        current, current_type = [], None

    for word in words:
        prefix, kind = split_tag(word.label)
        if kind is None:
            close()
            continue
        if prefix in _BEGIN or kind != current_type:
            close()
        current.append(word)
        current_type = kind
        if prefix in _END:
            close()
    close()
    return out


def _drop_duplicates(entities: list[Entity]) -> list[Entity]:
    """Overlapping entities (from overlapping windows): the higher score wins; sorted by start."""
    kept: list[Entity] = []
    for e in sorted(entities, key=lambda e: (-e.score, e.start)):
        if all(e.end <= k.start or e.start >= k.end for k in kept):
            kept.append(e)
    return sorted(kept, key=lambda e: e.start)


def _check_dir(model_dir: Path) -> Path:
    return checkpoint_dir(model_dir, "NER checkpoint", NerCheckpointError)


class NerModel:
    """A token-classification checkpoint; `find(text)` gives entity spans with character offsets."""

    def __init__(
        self,
        model_dir: Path,
        *,
        max_length: int | None = None,
        stride: int = 32,
        batch_size: int = 8,
        torch_threads: int | None = None,
    ) -> None:
        self.model_dir = _check_dir(model_dir)
        tokenizer, model = load_local(self.model_dir, "AutoModelForTokenClassification", torch_threads=torch_threads)
        if not getattr(tokenizer, "is_fast", False):
            raise NerCheckpointError(
                f"NER checkpoint {self.model_dir}: needs a fast tokenizer (tokenizer.json) for character offsets"
            )
        self.tokenizer: Any = tokenizer
        self.model: Any = model
        try:
            self.labels: tuple[str, ...] = checkpoint_labels(self.model.config)
        except ValueError as exc:
            raise NerCheckpointError(f"NER checkpoint {self.model_dir}: {exc}") from exc
        self.types = entity_types(self.labels)
        if not self.types:
            raise NerCheckpointError(f"NER checkpoint {self.model_dir}: no entity labels in {list(self.labels)}")
        limits = [MAX_TOKENS]
        model_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(model_max, int) and 0 < model_max < 1_000_000:
            limits.append(model_max)
        positions = getattr(self.model.config, "max_position_embeddings", None)
        if isinstance(positions, int) and positions > 0:
            limits.append(positions)
        if max_length is not None:
            limits.append(max_length)
        self.max_length = max(8, min(limits))
        self.stride = max(0, min(stride, self.max_length // 4))
        self.batch_size = max(1, batch_size)

    def describe(self) -> str:
        return f"{self.model_dir} (entity types {sorted(self.types)}, {self.max_length} tokens)"

    def find(self, text: str) -> list[Entity]:
        """Entities in `text`, sorted by start offset."""
        if not text.strip():
            return []
        import torch

        enc = self.tokenizer(
            text,
            truncation=True,
            max_length=self.max_length,
            stride=self.stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=True,
            return_tensors="pt",
        )
        offsets = enc.pop("offset_mapping").tolist()
        enc.pop("overflow_to_sample_mapping", None)
        windows = len(offsets)
        word_ids = [enc.word_ids(i) for i in range(windows)]
        probs_chunks = []
        with torch.inference_mode():
            for start in range(0, windows, self.batch_size):
                batch = {k: v[start : start + self.batch_size] for k, v in enc.items()}
                probs_chunks.append(torch.softmax(self.model(**batch).logits.float(), dim=-1))
        probs = torch.cat(probs_chunks).numpy()
        found: list[Entity] = []
        for w in range(windows):
            best = probs[w].argmax(axis=-1)
            words: list[_Word] = []
            previous: int | None = None
            for t, word in enumerate(word_ids[w]):
                if word is None:  # special or padding token
                    continue
                start, end = offsets[w][t]
                if word == previous and words:
                    words[-1].end = max(words[-1].end, end)  # a sub-token continues its word
                    continue
                previous = word
                label_id = int(best[t])
                words.append(_Word(start, end, self.labels[label_id], float(probs[w, t, label_id])))
            found.extend(group_words(words))
        return _drop_duplicates(found)


def load_ner(model_dir: Path | str, *, torch_threads: int | None = None) -> NerModel:
    """Load a checkpoint directory; a missing or unusable one raises `NerCheckpointError`."""
    path = _check_dir(Path(model_dir))
    try:
        return NerModel(path, torch_threads=torch_threads)
    except NerCheckpointError:
        raise
    except Exception as exc:  # transformers raises OSError / ValueError / KeyError for broken folders
        raise NerCheckpointError(f"cannot load NER checkpoint {path}: {exc}") from exc


def get_ner(models: ModelRegistry, model_dir: Path | str, *, torch_threads: int | None = None) -> NerModel:
    """The process's NER model for `model_dir`, loaded once via the model registry."""
    return models.get(
        f"ner:{Path(model_dir).expanduser().resolve()}",
        lambda: load_ner(model_dir, torch_threads=torch_threads),
        detail=f"token classifier from {model_dir}",
    )
