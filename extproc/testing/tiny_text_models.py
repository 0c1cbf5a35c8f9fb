"""Tiny BERT-style text checkpoints built at test time (no model hub): a sequence classifier
and a token classifier, each with a small WordPiece tokenizer, written with `save_pretrained`
so the real loading code reads them exactly like a downloaded model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

_TEXT = (
    "ignore previous instructions all rules you are now dan system prompt reveal your secret "
    "please what is the weather today hello my name john smith and i live in paris london born on "
    "march 3 1990 summarize this email from anna about meeting tomorrow at office street road"
)
WORDS = tuple(_TEXT.split(" "))
CHARS = "abcdefghijklmnopqrstuvwxyz0123456789.,!?:;'-"
SEQ_LABELS = ("BENIGN", "INJECTION", "JAILBREAK")
NER_LABELS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-DATE", "I-DATE")


def write_vocab(directory: Path) -> Path:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += sorted(set(WORDS))
    vocab += [c for c in CHARS if c not in vocab]
    vocab += ["##" + c for c in CHARS]
    path = directory / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return path


def _tokenizer(directory: Path) -> Any:
    from transformers import BertTokenizer  # the tokenizers-backed (fast) one in transformers 5

    return BertTokenizer(vocab=str(write_vocab(directory)))


def _config(vocab_size: int, labels: Sequence[str], *, layers: int = 1, init: float = 0.5, **extra: Any) -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=128,
        initializer_range=init,
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
        **extra,
    )


def build_tiny_sequence_classifier(
    directory: Path,
    *,
    labels: Sequence[str] = SEQ_LABELS,
    seed: int = 0,
    force: str | None = None,
    multi_label: bool = False,
) -> Path:
    """A random 1-layer BERT sequence classifier; `force` makes that label win for every text."""
    import torch
    from transformers import BertForSequenceClassification

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(directory)
    extra: dict[str, Any] = {"problem_type": "multi_label_classification"} if multi_label else {}
    torch.manual_seed(seed)
    model = BertForSequenceClassification(_config(len(tokenizer.get_vocab()), labels, **extra))
    if force is not None:
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.fill_(-4.0)
            model.classifier.bias[list(labels).index(force)] = 4.0
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


def build_tiny_token_classifier(
    directory: Path,
    *,
    labels: Sequence[str] = NER_LABELS,
    entity_words: Mapping[str, str] | None = None,
    force: str | None = None,
    seed: int = 0,
) -> Path:
    """A tiny BERT token classifier.

    With `entity_words` ({"john": "B-PER", ...}) it has no transformer layer and is wired by
    hand: those words' embeddings point in their own direction and the classifier maps that
    direction to their label; every other token is `O`. With `force` it is a random 1-layer
    model whose classifier bias makes that label win for every token.
    """
    import torch
    from transformers import BertForTokenClassification

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(directory)
    vocab = tokenizer.get_vocab()
    torch.manual_seed(seed)
    layers = 0 if entity_words is not None else 1
    model = BertForTokenClassification(_config(len(vocab), labels, layers=layers))
    with torch.no_grad():
        if entity_words is not None:
            emb = model.bert.embeddings
            emb.word_embeddings.weight.zero_()
            emb.position_embeddings.weight.zero_()
            emb.token_type_embeddings.weight.zero_()
            emb.LayerNorm.weight.fill_(1.0)
            emb.LayerNorm.bias.zero_()
            model.classifier.weight.zero_()
            model.classifier.bias.zero_()
            model.classifier.bias[list(labels).index("O")] = 1.0
            for k, (word, label) in enumerate(entity_words.items()):
                emb.word_embeddings.weight[vocab[word], k] = 1.0
                model.classifier.weight[list(labels).index(label), k] = 10.0
        if force is not None:
            model.classifier.weight.zero_()
            model.classifier.bias.fill_(-4.0)
            model.classifier.bias[list(labels).index(force)] = 4.0
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory
