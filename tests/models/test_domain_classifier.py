"""The subject classifier: trained by the real training code on a tiny corpus (deterministic, byte
for byte), loaded through the real loader, and refused with a clear error when its files are bad;
the shipped weights load and answer plain questions."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from extproc.models.attack_classifier import LexicalConfig
from extproc.models.domain_classifier import (
    DEFAULT_WEIGHTS_DIR,
    HEAD_FILE,
    LEXICAL_FILE,
    META_FILE,
    NEIGHBOURS_FILE,
    NUMBER_PLACEHOLDER,
    STATIC_FILE,
    SUBJECTS,
    DomainClassifier,
    DomainClassifierError,
    neutralise_numbers,
)
from extproc.models.static_embedding import load_tokenizer, packaged_tokenizer_path
from extproc.tools.domain_evaluation import TfidfFeatures, evaluate
from extproc.tools.domain_sources import fit_temperature, source_balanced_weights
from extproc.tools.domain_training import (
    TrainConfig,
    balanced_weights,
    fit_head,
    fit_softmax,
    knee,
    load_rows,
    scores,
    train,
)

TOPICS: dict[str, list[str]] = {
    "biology": ["cell", "dna", "organism", "enzyme", "species"],
    "business": ["revenue", "marketing", "invoice", "customer", "profit"],
    "chemistry": ["molecule", "reaction", "acid", "titration", "bond"],
    "computer science": ["algorithm", "compiler", "array", "python", "recursion"],
    "economics": ["inflation", "demand", "supply", "gdp", "tariff"],
    "engineering": ["beam", "torque", "circuit", "turbine", "load"],
    "health": ["patient", "symptom", "dose", "diagnosis", "nurse"],
    "history": ["empire", "revolution", "treaty", "dynasty", "war"],
    "law": ["contract", "court", "plaintiff", "statute", "tort"],
    "math": ["integral", "equation", "prime", "matrix", "derivative"],
    "other": ["recipe", "holiday", "garden", "travel", "music"],
    "philosophy": ["ethics", "kant", "virtue", "metaphysics", "socrates"],
    "physics": ["velocity", "quantum", "photon", "momentum", "gravity"],
    "psychology": ["memory", "behavior", "cognition", "anxiety", "freud"],
}


class HashEmbedder:
    """Deterministic unit vectors per text (a stand-in for MiniLM; same text, same vector)."""

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        self.calls += 1
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for i, t in enumerate(texts):
            v = np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).standard_normal(384)
            out[i] = v / np.linalg.norm(v)
        return out


def write_corpus(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 6), ("test", 2)):
        with (directory / f"{split}.jsonl").open("w", encoding="utf-8") as fh:
            for label, words in TOPICS.items():
                for i in range(n):
                    a, b = words[i % 5], words[(i + 2) % 5]
                    text = f"Question {i}: explain the {a} and how the {b} relates to it ({split})."
                    group = f"{label}|{split}|{i % 3}"
                    fh.write(json.dumps({"text": text, "label": label, "group": group}) + "\n")
    return directory


TINY = TrainConfig(
    lexical=LexicalConfig(bits=12, ngram_min=2, ngram_max=4, shape_bits=0),
    folds=2,
    first_max_iter=60,
    head_max_iter=60,
)


def random_token_vectors() -> np.ndarray[Any, Any]:
    """A stand-in for the distilled table: a fixed random vector per vocabulary token."""
    vocab = load_tokenizer(packaged_tokenizer_path()).get_vocab_size()
    return np.random.default_rng(7).standard_normal((vocab, 384)).astype(np.float32)


TOKEN_VECTORS = random_token_vectors()


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("domain")
    data = write_corpus(root / "data")
    out = root / "weights"
    metrics = train(data, out, embedder=HashEmbedder(), token_vectors=TOKEN_VECTORS, config=TINY)
    return data, out, metrics


def test_training_is_reproducible_byte_for_byte(trained: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    data, out, _ = trained
    again = tmp_path / "again"
    train(data, again, embedder=HashEmbedder(), token_vectors=TOKEN_VECTORS, config=TINY)
    for name in (LEXICAL_FILE, STATIC_FILE, HEAD_FILE, NEIGHBOURS_FILE, META_FILE):
        assert (out / name).read_bytes() == (again / name).read_bytes(), name


def test_source_balanced_head_changes_stage_2_only(tmp_path: Path) -> None:
    """The head's source weighting (every corpus source / written batch of a subject alike) is a
    stage-2 setting: stage 1's files stay byte for byte, the head's change and meta.json says so."""
    data = write_corpus(tmp_path / "data")
    extra = tmp_path / "extra_train.jsonl"  # one more math source, smaller than the corpus's
    extra.write_text(
        "".join(
            json.dumps({"text": f"solve for x in equation {w}", "label": "math", "source": "written"}) + "\n"
            for w in ("one", "two", "three")
        )
    )
    folders = {}
    for power in (1.0, 0.0):
        folders[power] = tmp_path / f"power-{power}"
        cfg = dataclasses.replace(TINY, head_source_power=power)
        train(data, folders[power], embedder=HashEmbedder(), token_vectors=TOKEN_VECTORS, config=cfg, extra=extra)
        assert json.loads((folders[power] / META_FILE).read_text())["training"]["head_source_power"] == power
    for name in (LEXICAL_FILE, STATIC_FILE):
        assert (folders[1.0] / name).read_bytes() == (folders[0.0] / name).read_bytes(), name
    assert (folders[1.0] / HEAD_FILE).read_bytes() != (folders[0.0] / HEAD_FILE).read_bytes()
    assert TINY.head_source_power == 0.0  # the shipped recipe's setting: class-balanced only


def test_blended_head_is_the_calibrated_mix_of_a_plain_and_a_source_balanced_head() -> None:
    """`head_blend` folds two heads into one linear head: blend 0 is the plain head alone, blend 1 the
    source-balanced head over its training-set temperature, and any blend their weighted mix, so
    serving (one matrix product) is unchanged. A big source and a small one teach subject 0 with
    different directions: the source-balanced head leans to the small source, the plain one to the big."""
    rng = np.random.default_rng(3)
    big, small, other = rng.normal(0, 1, (60, 8)), rng.normal(0, 1, (6, 8)), rng.normal(0, 1, (30, 8))
    big[:, 0] += 2.0
    small[:, 1] += 2.0
    other[:, 0] -= 2.0
    x = np.concatenate([big, small, other])
    y = np.array([0] * 66 + [1] * 30, dtype=np.int64)
    sources = ["book"] * 60 + ["written"] * 6 + ["other"] * 30
    cfg = dataclasses.replace(TINY, head_max_iter=100, head_blend=0.0)
    plain = fit_softmax(x, y, balanced_weights(y, 2), 2, l2=cfg.head_l2, max_iter=100)
    assert all(np.array_equal(a, b) for a, b in zip(fit_head(x, y, sources, 2, cfg), plain, strict=True))
    balanced = fit_softmax(x, y, source_balanced_weights(y, sources, 2, 1.0), 2, l2=cfg.head_blend_l2, max_iter=100)
    t_plain, t_bal = fit_temperature(x @ plain[0] + plain[1], y), fit_temperature(x @ balanced[0] + balanced[1], y)
    one = fit_head(x, y, sources, 2, dataclasses.replace(cfg, head_blend=1.0))
    assert np.allclose(one[0], balanced[0] / t_bal) and np.allclose(one[1], balanced[1] / t_bal)
    half = fit_head(x, y, sources, 2, dataclasses.replace(cfg, head_blend=0.5))
    assert np.allclose(half[0], 0.5 * plain[0] / t_plain + 0.5 * balanced[0] / t_bal)
    assert np.allclose(half[1], 0.5 * plain[1] / t_plain + 0.5 * balanced[1] / t_bal)
    # the small source's direction counts for more in the source-balanced head than in the plain one
    lean = [w[1, 0] - w[1, 1] for w in (plain[0] / t_plain, half[0], one[0])]
    assert lean[0] < lean[1] < lean[2]


def test_trained_weights_load_and_classify(trained: tuple[Path, Path, dict[str, Any]]) -> None:
    data, out, metrics = trained
    clf = DomainClassifier.load(out)
    assert clf.labels == SUBJECTS and 0.0 <= clf.confident <= 1.01
    meta = json.loads((out / META_FILE).read_text())
    assert meta["corpus"]["rows"] == 14 * 6 and "SOURCES.md" in meta["corpus"]["sources"]
    assert metrics["cv_tradeoff"] and 0.0 <= metrics["cv_accuracy"] <= 1.0
    p = clf.first_stage_probs("how does the integral of this equation behave")
    assert p.shape == (14,) and abs(float(p.sum()) - 1.0) < 1e-5
    assert clf.labels[int(p.argmax())] == "math"
    assert clf.labels[int(clf.first_stage_probs("the plaintiff sued over the contract in court").argmax())] == "law"
    # The cascade on the test split: figures, the share stage 1 decided, the trade-off curve.
    report = evaluate(clf, load_rows(data / "test.jsonl"), HashEmbedder().embed, timing_repeats=1)
    assert report["cascade"]["accuracy"] >= 0.8
    assert 0.0 <= report["stage1_share"] <= 1.0 and report["tradeoff"][-1]["embedded"] == 1.0
    # A second stage on an embedding gives a distribution too.
    q = clf.embedding_probs(HashEmbedder().embed(["x"])[0], p)
    assert q.shape == (14,) and abs(float(q.sum()) - 1.0) < 1e-5


def test_extra_training_rows_are_used_and_recorded(trained: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    data, _, _ = trained
    extra = tmp_path / "extra_train.jsonl"
    extra.write_text(json.dumps({"text": "a sonnet about the sea", "label": "other"}) + "\n")
    metrics = train(
        data, tmp_path / "w", embedder=HashEmbedder(), token_vectors=TOKEN_VECTORS, config=TINY, extra=extra
    )
    assert metrics["extra_rows"] == 1
    assert json.loads((tmp_path / "w" / META_FILE).read_text())["corpus"]["extra"]["rows"] == 1
    extra.write_text(json.dumps({"text": "x", "label": "astrology"}) + "\n")
    with pytest.raises(ValueError, match="unknown subject 'astrology'"):
        train(data, tmp_path / "w2", embedder=HashEmbedder(), token_vectors=TOKEN_VECTORS, config=TINY, extra=extra)


def test_head_only_rows_train_stage_2_alone_and_are_recorded(
    trained: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """`head_train.jsonl` rows reach stage 2 only: stage 1's files stay byte for byte those trained
    without them, the head moves towards them, and meta.json records the file; a bad label is refused."""
    data, out, _ = trained
    head_rows = tmp_path / "head_train.jsonl"
    head_rows.write_text(
        "".join(
            json.dumps({"text": f"a {w} sonnet about the quiet sea", "label": "other", "source": "written"}) + "\n"
            for w in ("short", "long", "sad", "happy")
        )
    )
    with_rows = tmp_path / "with"
    metrics = train(
        data, with_rows, embedder=HashEmbedder(), token_vectors=TOKEN_VECTORS, config=TINY, head_extra=head_rows
    )
    assert metrics["head_only_rows"] == 4
    meta = json.loads((with_rows / META_FILE).read_text())
    assert meta["corpus"]["head_extra"]["rows"] == 4 and meta["corpus"]["head_extra"]["file"] == "head_train.jsonl"
    assert "head_extra" not in json.loads((out / META_FILE).read_text())["corpus"]
    for name in (LEXICAL_FILE, STATIC_FILE):
        assert (with_rows / name).read_bytes() == (out / name).read_bytes(), name
    assert (with_rows / HEAD_FILE).read_bytes() != (out / HEAD_FILE).read_bytes()
    sonnet = HashEmbedder().embed(["a sad sonnet about the quiet sea"])[0]
    before, after = DomainClassifier.load(out), DomainClassifier.load(with_rows)
    p1 = before.first_stage_probs("a sad sonnet about the quiet sea")
    assert np.array_equal(p1, after.first_stage_probs("a sad sonnet about the quiet sea"))
    other = SUBJECTS.index("other")
    assert after.embedding_probs(sonnet, p1)[other] > before.embedding_probs(sonnet, p1)[other]
    head_rows.write_text(json.dumps({"text": "x", "label": "astrology"}) + "\n")
    with pytest.raises(ValueError, match="unknown subject 'astrology'"):
        train(
            data,
            tmp_path / "bad",
            embedder=HashEmbedder(),
            token_vectors=TOKEN_VECTORS,
            config=TINY,
            head_extra=head_rows,
        )


def test_bad_weight_folders_are_refused_clearly(trained: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    _, out, _ = trained
    with pytest.raises(DomainClassifierError, match=r"metadata .* is missing"):
        DomainClassifier.load(tmp_path / "nothing")
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in (LEXICAL_FILE, STATIC_FILE, HEAD_FILE, NEIGHBOURS_FILE, META_FILE):
        (broken / name).write_bytes((out / name).read_bytes())
    (broken / HEAD_FILE).write_bytes(b"not safetensors")
    with pytest.raises(DomainClassifierError, match="cannot read"):
        DomainClassifier.load(broken)
    meta = json.loads((out / META_FILE).read_text())
    meta["labels"] = meta["labels"][:-1]
    (broken / HEAD_FILE).write_bytes((out / HEAD_FILE).read_bytes())
    (broken / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(DomainClassifierError, match="has shape"):
        DomainClassifier.load(broken)
    (broken / META_FILE).write_text("{")
    with pytest.raises(DomainClassifierError, match="not valid JSON"):
        DomainClassifier.load(broken)


def test_a_token_table_is_refused_with_another_tokenizer(
    trained: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """The table's rows are the distilling tokenizer's ids: another vocabulary would read the
    wrong vectors without a sound, so the tokenizer's hash is checked on load."""
    _, out, _ = trained
    other = tmp_path / "tokenizer.json"
    data = json.loads(packaged_tokenizer_path().read_text(encoding="utf-8"))
    data["normalizer"]["lowercase"] = False
    other.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DomainClassifierError, match="not the tokenizer the token table was distilled with"):
        DomainClassifier.load(out, tokenizer_path=other)
    assert DomainClassifier.load(out, tokenizer_path=packaged_tokenizer_path()).labels == SUBJECTS


def test_static_vectors_tokenise_word_by_word_as_the_whole_text(trained: tuple[Path, Path, dict[str, Any]]) -> None:
    """The word cache gives the ids the tokenizer gives the whole text (punctuation, accents,
    CJK, long words), and repeated words come from the cache."""
    _, out, _ = trained
    static = DomainClassifier.load(out).static
    tokenizer = load_tokenizer(packaged_tokenizer_path())
    for text in [
        "What is the derivative of x^2, and why?",
        "Café au lait: naïve résumé (déjà vu)!",
        "解释一下 quantum entanglement 的原理",
        "supercalifragilisticexpialidocious antidisestablishmentarianism",
        "  tabs\tand\nnewlines   ",
        "",
    ]:
        expected = tokenizer.encode(text, add_special_tokens=False).ids
        assert static.token_ids(text).tolist() == expected, text
        assert static.token_ids(text).tolist() == expected, text  # cached words, same ids
    assert "derivative" in static.word_ids
    v = static.vector("the integral of the equation")
    assert v.shape == (384,) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
    assert not static.vector("").any()


def test_scores_and_knee() -> None:
    y = np.array([0, 0, 1, 1, 2])
    pred = np.array([0, 1, 1, 1, 0])
    s = scores(y, pred, ["a", "b", "c"])
    assert s["accuracy"] == 0.6 and s["confusion"] == [[1, 1, 0], [0, 2, 0], [1, 0, 0]]
    assert s["per_label"]["b"]["recall"] == 1.0 and s["per_label"]["c"]["recall"] == 0.0
    assert s["macro_f1"] == pytest.approx((0.5 + 0.8 + 0.0) / 3, abs=1e-4)  # a: P 1/2 R 1/2; b: P 2/3 R 1
    curve = [
        {"confident": 0.0, "embedded": 0.0, "accuracy": 0.80},
        {"confident": 0.5, "embedded": 0.05, "accuracy": 0.85},
        {"confident": 0.9, "embedded": 0.6, "accuracy": 0.87},
    ]
    assert knee(curve, 0.1) == 0.5  # 55 points more embedded for 2 points more accuracy: not worth it
    assert knee(curve, 0.0) == 0.9


def test_tfidf_baseline_features() -> None:
    tfidf = TfidfFeatures(["the cell divides", "the cell grows", "a court rules"])
    ids, vals = tfidf("the cell and the court")
    assert len(ids) == len(vals) > 0 and abs(float(np.linalg.norm(vals)) - 1.0) < 1e-9


@pytest.mark.skipif(not (DEFAULT_WEIGHTS_DIR / META_FILE).is_file(), reason="shipped weights not built")
def test_shipped_weights_answer_plain_questions() -> None:
    clf = DomainClassifier.load()
    assert clf.labels == SUBJECTS
    for text, label in [
        ("Solve for x: 3x^2 - 12x + 9 = 0, and find the derivative of the result.", "math"),
        ("What are the elements of a valid contract, and when is a tort claim barred by statute?", "law"),
        ("Balance the redox reaction and compute the molarity of the acid after titration.", "chemistry"),
    ]:
        assert clf.labels[int(clf.first_stage_probs(text).argmax())] == label, text


BENCH_DATA = Path(__file__).resolve().parents[2] / "bench" / "data"
HELD_OUT_SETS = ["domain_everyday.jsonl", "domain_exam.jsonl", "domain_unseen.jsonl"]


@pytest.mark.parametrize("name", HELD_OUT_SETS)
def test_written_evaluation_sets_cover_every_subject(name: str) -> None:
    rows = load_rows(BENCH_DATA / name)
    counts = {label: sum(r.label == label for r in rows) for label in SUBJECTS}
    assert set(r.label for r in rows) <= set(SUBJECTS)
    assert min(counts.values()) >= 6, counts


def test_extra_training_rows_stay_apart_from_the_written_evaluation_sets() -> None:
    """The evaluation sets measure unseen questions only while no extra training row equals or
    nearly repeats one of them (word 3-gram Jaccard >= 0.5, the filter the rows went through)."""
    from extproc.tools.attack_everyday import near_any

    held_out = [r.text for name in HELD_OUT_SETS for r in load_rows(BENCH_DATA / name)]
    near = near_any(held_out, jaccard=0.5)
    extra = load_rows(DEFAULT_WEIGHTS_DIR / "extra_train.jsonl")
    assert len(extra) > 1000
    assert [r.text for r in extra if near(r.text)] == []
    head_only = load_rows(DEFAULT_WEIGHTS_DIR / "head_train.jsonl")  # stage 2's own written rows
    assert len(head_only) > 400
    assert [r.text for r in head_only if near(r.text)] == []
    # The check can fail: a held-out question, reworded slightly, is caught.
    assert near(held_out[0].replace("?", " ?") + " Explain.")


@pytest.mark.parametrize(
    ("text", "tagged"),
    [
        ("What is the capital of Australia, and why?", "What is the capital of Australia, and why? (question 4821)"),
        (
            "Can you suggest a quiet hotel near the old town?",
            "Can you suggest a quiet hotel near the old town? Ref 7f3a9c21e4",
        ),
        ("How do I reset my router password?", "How do I reset my router password? Ticket INV-20931-B"),
    ],
)
def test_shipped_weights_read_no_subject_into_numbers_and_ids(text: str, tagged: str) -> None:
    """A question number, a hex reference or a ticket id carries no subject: stage 1 gives the
    tagged text the same top subject (and nearly the same probability) as the plain one."""
    clf = DomainClassifier.load()
    assert clf.neutralise
    plain, with_id = clf.first_stage_probs(text), clf.first_stage_probs(tagged)
    assert int(plain.argmax()) == int(with_id.argmax()), (clf.labels[int(with_id.argmax())], tagged)
    assert clf.labels[int(with_id.argmax())] != "math"


@pytest.mark.skipif(not (DEFAULT_WEIGHTS_DIR / META_FILE).is_file(), reason="shipped weights not built")
@pytest.mark.parametrize("text", ["what is 2 + 2", "17*23?", "what's 144 / 12", "How much is 7 times 8?"])
def test_shipped_weights_read_bare_arithmetic_as_math(text: str) -> None:
    """Short numbers read as a placeholder, not as nothing: a sum is still maths (issue 44; with
    the numbers removed "17*23?" read as `other`)."""
    clf = DomainClassifier.load()
    assert clf.number_placeholder == NUMBER_PLACEHOLDER
    probs = clf.first_stage_probs(text)
    assert clf.labels[int(probs.argmax())] == "math", (text, clf.labels[int(probs.argmax())])
    assert float(probs.max()) >= 0.5


@pytest.mark.skipif(not (DEFAULT_WEIGHTS_DIR / META_FILE).is_file(), reason="shipped weights not built")
@pytest.mark.parametrize(
    "text",
    [
        "reminder: dentist 12/6 at 3pm, pay rent $1,200 by 1/1",
        "1. call mom\n2. buy milk ($4)\n3. book flight for the 3rd",
    ],
)
def test_shipped_weights_do_not_read_dates_and_lists_as_math(text: str) -> None:
    """Dates, times, prices and list markers go before the placeholder: with them read as "0/0"
    and "0." stage 1 called both of these maths (0.67, 0.77)."""
    clf = DomainClassifier.load()
    assert clf.drop_shapes
    probs = clf.first_stage_probs(text)
    assert clf.labels[int(probs.argmax())] != "math", (text, float(probs.max()))


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("what is 2 + 2", "what is 0 + 0"),  # a short number keeps its place: arithmetic stays arithmetic
        ("17*23?", "0*0?"),
        ("Solve 2x + 3.5 = 10kN", "Solve 0x + 0.0 = 0kN"),
        ("What is the capital of Australia? (question 4821)", "What is the capital of Australia? (question  )"),
        ("ref 7f3a9c21e4 and 0x1F2E3D", "ref   and  "),  # hex strings go whole
        ("Ticket INV-20931-B", "Ticket INV- -B"),  # an id of 4+ digits goes whole
        ("Balance H2SO4 + NaOH", "Balance H2SO4 + NaOH"),  # chemical formulas stay
    ],
)
def test_short_numbers_read_as_the_placeholder_and_ids_go(text: str, read: str) -> None:
    assert neutralise_numbers(text, NUMBER_PLACEHOLDER) == read
    assert neutralise_numbers(read, NUMBER_PLACEHOLDER) == read  # reading twice changes nothing
    # without a placeholder (the weights before it) every digit run goes
    assert not any(c.isdigit() for c in neutralise_numbers(text).replace("H2SO4", ""))


def test_weights_without_the_neutralise_flag_read_numbers_as_before(
    trained: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    _, out, _ = trained
    meta = json.loads((out / META_FILE).read_text())
    assert meta["features"]["neutralise_numbers"] is True
    assert meta["features"]["number_placeholder"] == NUMBER_PLACEHOLDER
    assert DomainClassifier.load(out).neutralise
    assert DomainClassifier.load(out).number_placeholder == NUMBER_PLACEHOLDER
    assert meta["features"]["drop_number_shapes"] is True and DomainClassifier.load(out).drop_shapes
    meta.pop("features")
    old = tmp_path / "old"
    old.mkdir()
    for name in (LEXICAL_FILE, HEAD_FILE, STATIC_FILE, NEIGHBOURS_FILE):
        (old / name).write_bytes((out / name).read_bytes())
    (old / META_FILE).write_text(json.dumps(meta))
    loaded = DomainClassifier.load(old)
    assert not loaded.neutralise
    text = "Question 12345: explain the enzyme"
    assert not np.allclose(loaded.first_stage_probs(text), DomainClassifier.load(out).first_stage_probs(text))
    # weights from before the placeholder (issue 44's first weights) remove short numbers too
    (old / META_FILE).write_text(json.dumps({**meta, "features": {"neutralise_numbers": True}}))
    removed = DomainClassifier.load(old)
    assert removed.neutralise and removed.number_placeholder == "" and not removed.drop_shapes
    # weights with the placeholder but before dropping dates (the first placeholder weights) read
    # "3/14" as "0/0"; the current ones as nothing
    placeholder_only = {"neutralise_numbers": True, "number_placeholder": NUMBER_PLACEHOLDER}
    (old / META_FILE).write_text(json.dumps({**meta, "features": placeholder_only}))
    dated = DomainClassifier.load(old)
    assert not dated.drop_shapes
    assert np.allclose(dated.first_stage_probs("mtg 3/14"), dated.first_stage_probs("mtg 0/0"))
    assert np.allclose(DomainClassifier.load(out).first_stage_probs("mtg 3/14"), dated.first_stage_probs("mtg  "))
    sum_text = "what is 2 + 2"
    assert np.allclose(removed.first_stage_probs(sum_text), removed.first_stage_probs("what is  + "))
    current = DomainClassifier.load(out)
    assert not np.allclose(current.first_stage_probs(sum_text), current.first_stage_probs("what is  + "))


def test_leave_source_out_predicts_every_row_without_its_source(tmp_path: Path) -> None:
    from extproc.tools.domain_loso import leave_source_out

    data = write_corpus(tmp_path / "data")
    corpus = load_rows(data / "train.jsonl") + load_rows(data / "test.jsonl")
    result = leave_source_out(corpus, [], HashEmbedder().embed, TOKEN_VECTORS, TINY)
    assert result.first.shape == (len(corpus), len(SUBJECTS))
    assert np.allclose(result.first.sum(axis=1), 1.0) and np.allclose(result.head.sum(axis=1), 1.0)
    assert set(result.folds.tolist()) == {0, 1}
    report = result.report(confident=0.5)
    assert report["rows"] == len(corpus) and 0.0 <= report["cascade"] <= 1.0
    assert set(report["per_subject"]) == set(SUBJECTS)
    # every group here is smaller than SMALL_SOURCE, so a subject's groups are held out together:
    # no row's subject was seen by the model that predicted it, and none is predicted right
    for label in SUBJECTS:
        assert len({int(f) for f, r in zip(result.folds, corpus, strict=True) if r.label == label}) == 1
    assert report["stage1"] == 0.0


def test_the_neighbour_vote_is_served_as_it_was_trained(
    trained: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """Stage 2 served (int8 memory on disk) equals the training code's stage 2 (float memory of the
    head's training rows) on the same embedding; the vote is recorded in meta.json, a folder without
    its memory file is refused, and weights without `head.neighbours` serve the head alone."""
    from extproc.tools.domain_training import row_sources, stage2_probs

    data, out, _ = trained
    clf = DomainClassifier.load(out)
    meta = json.loads((out / META_FILE).read_text())
    assert clf.neighbours is not None and meta["head"]["neighbours"]["k"] == TINY.neighbours_k
    rows = load_rows(data / "train.jsonl")
    memory = (
        HashEmbedder().embed([r.text for r in rows]),
        np.array([SUBJECTS.index(r.label) for r in rows]),
        row_sources(rows),
    )
    texts = [rows[0].text, rows[40].text, "an unseen question about nothing in particular"]
    x = HashEmbedder().embed(texts)
    first = np.stack([clf.first_stage_probs(t) for t in texts])
    served = np.stack([clf.embedding_probs(x[i], first[i]) for i in range(len(texts))])
    trained_head, _ = stage2_probs(
        x @ clf.head_weight + clf.head_bias,
        x,
        memory,
        TINY,
        vote_temperature=meta["cv_metrics"]["cv_temperatures"]["vote"],
    )
    assert np.abs(served - (clf.head_mix * trained_head + (1 - clf.head_mix) * first)).max() < 2e-3
    # the control: the head alone answers otherwise
    del meta["head"]["neighbours"]
    alone = tmp_path / "alone"
    alone.mkdir()
    for name in (LEXICAL_FILE, STATIC_FILE, HEAD_FILE):
        (alone / name).write_bytes((out / name).read_bytes())
    (alone / META_FILE).write_text(json.dumps(meta))
    head_alone = DomainClassifier.load(alone)
    assert head_alone.neighbours is None
    assert not np.allclose(head_alone.embedding_probs(x[0], first[0]), served[0], atol=1e-3)
    # a vote named in meta.json with no memory beside it is refused
    (alone / META_FILE).write_bytes((out / META_FILE).read_bytes())
    with pytest.raises(DomainClassifierError, match=r"neighbours.safetensors are missing"):
        DomainClassifier.load(alone)
