"""Build small random SigLIP / SigLIP2 checkpoints (and their tokenizers) in a directory.

No model hub is reachable from the build machines, so tests make their own checkpoints:
random weights, a tokenizer trained in a second on a few label phrases, and the processor
config a real checkpoint ships. They are written with `save_pretrained` and read back by
the real loading code, exactly like a downloaded model. `build_base_siglip` makes a
base/16-224-sized one (random weights time like real ones) for benchmarks.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

# Words the label prompts use; the tokenizer is trained on these so prompts tokenize sensibly.
_CORPUS = [
    "a photo of a passport",
    "a photo of an identity card",
    "a scan of a driver's license",
    "an id document with a portrait and machine readable zone",
    "a chest x-ray radiograph",
    "a medical scan, an mri or ct image",
    "a fundus photograph of a retina",
    "a microscope image of cells and tissue",
    "a screenshot of source code in an editor",
    "a terminal window with command line output",
    "a photo of a car, a truck, a rocket or a motorcycle",
    "an everyday photo of a cat, a dog, people, food or coffee",
    "a photo of the night sky with stars and galaxies",
    "a scanned page of printed text",
    "a picture of a landscape, a building or a street",
]


def _sentencepiece_model(vocab_size: int = 160) -> bytes:
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_CORPUS * 8),
        model_writer=buf,
        vocab_size=vocab_size,
        model_type="unigram",
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=1,
    )
    return buf.getvalue()


def _siglip_tokenizer(directory: Path, max_length: int) -> Any:
    from transformers import SiglipTokenizer

    spm_path = directory / "_train_spiece.model"
    spm_path.write_bytes(_sentencepiece_model())
    tokenizer = SiglipTokenizer(vocab_file=str(spm_path), model_max_length=max_length)
    tokenizer.save_pretrained(str(directory))
    spm_path.unlink()
    return tokenizer


def _siglip2_tokenizer(directory: Path, max_length: int) -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers.models.siglip2.tokenization_siglip2 import Siglip2Tokenizer

    special = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
    bpe = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    bpe.normalizer = normalizers.Sequence([normalizers.Lowercase(), normalizers.Replace(" ", "▁")])
    bpe.pre_tokenizer = pre_tokenizers.Split(pattern="▁", behavior="merged_with_next")
    bpe.train_from_iterator(_CORPUS * 4, trainers.BpeTrainer(vocab_size=200, special_tokens=special))
    state = json.loads(bpe.to_str())["model"]
    merges: Any = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in state["merges"]]
    tokenizer = Siglip2Tokenizer(vocab=state["vocab"], merges=merges, model_max_length=max_length)
    tokenizer.save_pretrained(str(directory))
    return tokenizer


def _token_ids(tokenizer: Any) -> dict[str, int | None]:
    ids = {
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": getattr(tokenizer, "bos_token_id", None),
    }
    return {k: (None if v is None else int(v)) for k, v in ids.items()}


def _finish(model: Any, directory: Path, seed: int, logit_scale: float, logit_bias: float) -> None:
    import torch

    with torch.no_grad():
        model.logit_scale.fill_(logit_scale)
        model.logit_bias.fill_(logit_bias)
    model.save_pretrained(str(directory))


def build_tiny_siglip(
    directory: Path,
    *,
    image_size: int = 48,
    patch_size: int = 8,
    hidden_size: int = 32,
    layers: int = 2,
    text_length: int = 16,
    seed: int = 0,
    logit_scale: float = math.log(10.0),
    logit_bias: float = -2.0,
) -> Path:
    """A random SigLIP (v1) checkpoint: fixed-size input, SentencePiece tokenizer, bicubic."""
    import torch
    from transformers import SiglipConfig, SiglipModel
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _siglip_tokenizer(directory, text_length)
    tower = {
        "hidden_size": hidden_size,
        "intermediate_size": hidden_size * 2,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
    }
    config = SiglipConfig(
        text_config={
            **tower,
            "vocab_size": len(tokenizer),
            "max_position_embeddings": text_length,
            **_token_ids(tokenizer),
        },
        vision_config={**tower, "image_size": image_size, "patch_size": patch_size},
    )
    torch.manual_seed(seed)
    _finish(SiglipModel(config), directory, seed, logit_scale, logit_bias)
    SiglipImageProcessorPil(size={"height": image_size, "width": image_size}).save_pretrained(str(directory))
    return directory


def build_tiny_siglip2(
    directory: Path,
    *,
    patch_size: int = 8,
    max_num_patches: int = 64,
    hidden_size: int = 32,
    layers: int = 2,
    text_length: int = 16,
    seed: int = 0,
    logit_scale: float = math.log(10.0),
    logit_bias: float = -2.0,
) -> Path:
    """A random SigLIP2 NaFlex checkpoint: patchified variable-size input, BPE tokenizer."""
    import torch
    from transformers import Siglip2Config, Siglip2Model
    from transformers.models.siglip2.image_processing_pil_siglip2 import Siglip2ImageProcessorPil

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _siglip2_tokenizer(directory, text_length)
    tower = {
        "hidden_size": hidden_size,
        "intermediate_size": hidden_size * 2,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
    }
    config = Siglip2Config(
        text_config={
            **tower,
            "vocab_size": len(tokenizer),
            "max_position_embeddings": text_length,
            **_token_ids(tokenizer),
        },
        vision_config={**tower, "num_patches": max_num_patches, "patch_size": patch_size},
    )
    torch.manual_seed(seed)
    _finish(Siglip2Model(config), directory, seed, logit_scale, logit_bias)
    Siglip2ImageProcessorPil(patch_size=patch_size, max_num_patches=max_num_patches, resample=2).save_pretrained(
        str(directory)
    )
    return directory


def build_base_siglip(directory: Path, *, seed: int = 0) -> Path:
    """Random weights in the google/siglip-base-patch16-224 shape (~200M parameters, ~0.8 GB)."""
    import torch
    from transformers import SiglipConfig, SiglipModel
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _siglip_tokenizer(directory, 64)
    config = SiglipConfig(
        text_config={"vocab_size": 32000, "max_position_embeddings": 64, **_token_ids(tokenizer)},
        vision_config={"image_size": 224, "patch_size": 16},
    )
    torch.manual_seed(seed)
    _finish(SiglipModel(config), directory, seed, math.log(117.0), -12.9)
    SiglipImageProcessorPil(size={"height": 224, "width": 224}).save_pretrained(str(directory))
    return directory


def drop_weights(directory: Path, prefix: str) -> list[str]:
    """Rewrite the checkpoint without the tensors whose names start with `prefix`; returns them."""
    from safetensors.torch import load_file, save_file

    path = Path(directory) / "model.safetensors"
    tensors = load_file(str(path))
    dropped = sorted(k for k in tensors if k.startswith(prefix))
    save_file({k: v for k, v in tensors.items() if k not in dropped}, str(path), metadata={"format": "pt"})
    return dropped
