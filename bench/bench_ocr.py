"""OCR cost and accuracy over the project's OCR corpus: today's settings against the new defaults, one run.

The corpus: the OCR test scenes (extproc/testing/ocr_scenes.py, rendered with Pillow: a passport
page with a TD3 MRZ, a degraded and a tampered copy, a code screenshot leaking an AWS key,
a scanned form, an injection banner, two text-free photos) and the 24 images of
tests/corpus/images (real photos and scans in every mode and size the router accepts).

Engines, loaded once each: "baseline" (`OcrTuning.legacy()`, the first wave's rapidocr
settings), "today" (the fast pipeline with the wheel's fp32 detector: the default before the
int8 detector, and the reference for routing labels), "int8" (the defaults, `OcrTuning()`, on
onnxruntime: what `make run` installs, detection through the shipped int8 detector),
"gated" (the defaults with the opt-in cheap first look, `OcrTuning.gated()`),
with `--edges` "int8-prev" (the defaults with rapidocr's own detector input and box steps,
`extproc/testing/ocr_reference.py`: the pipeline before `extproc/models/ocr_det.py`)
and, when OpenVINO is importable, "today-ov" and "gated-ov" (the same on
OpenVINO). Each repeat reads every image cold (a fresh result cache, a new DecodedImage,
so decoding is timed too) with every engine back to back, rotating which goes first, so
all see the same machine load: compare within one run, never across runs.
Printed: per-image cold p50 ms, the totals and their ratios (the target: new <= 1/3 of
baseline), p50 per image class (identity document, code screenshot, form, text-free photo,
large medical image), resident memory each engine added, and an accuracy table:
characters read, character error rate where the scene's text is known, MRZ valid, secrets
found, code likeness, and the routing labels (image_text and document signals), which must
be the same for every engine. Exits 1 when any engine changes a routing label against
"today" (full OCR) on any image.

Run: .venv/bin/python bench/bench_ocr.py [--repeat N] [--threads T] [--try k=v,k=v ...]
     PYTHONPATH=DIR_WITH_OPENVINO .venv/bin/python bench/bench_ocr.py   # adds "new-ov"
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

from extproc.detectors.code import code_likeness  # noqa: E402
from extproc.detectors.mrz import find_mrz  # noqa: E402
from extproc.models.ocr import OcrResult, OcrService, OcrTuning, RapidOcrEngine, openvino_available  # noqa: E402
from extproc.settings import Settings  # noqa: E402
from extproc.signals.document import DocumentSpec, classify  # noqa: E402
from extproc.signals.image_text import ImageTextSignal, ImageTextSpec  # noqa: E402
from extproc.testing.ocr_reference import use_rapidocr_edges  # noqa: E402
from extproc.testing.ocr_routing import corpus_images, routing_view  # noqa: E402
from extproc.testing.ocr_scenes import (  # noqa: E402
    AWS_KEY,
    CODE_LINES,
    FORM_LINES,
    INJECTION_TEXT,
    PASSPORT_FIELDS,
    as_image,
    tampered_mrz,
    valid_mrz,
)

CORPUS_DIR = ROOT / "tests" / "corpus" / "images"

_PASSPORT_LABELS = [
    "UTOPIA", "PASSPORT / PASSEPORT", "Type / Type", "Code / Code", "Passport No. / No du passeport",
    "Surname / Nom", "Given names / Prenoms", "Nationality / Nationalite", "Date of birth / Date de naissance",
    "Sex / Sexe", "Date of issue / Date de delivrance", "Date of expiry / Date d'expiration",
    PASSPORT_FIELDS["number"], PASSPORT_FIELDS["surname"], PASSPORT_FIELDS["given"], "UTOPIAN",
    "17 MAR 1985", "23 JUN 2021", "22 JUN 2031",
]  # fmt: skip


# Image classes the figures are reported by (the classes); the rest is "other".
CLASSES: dict[str, list[str]] = {
    "identity document": ["passport", "passport_degraded", "passport_tampered"],
    "code screenshot": ["code"],
    "form": ["form"],
    "text-free photo": [
        "landscape", "car", "astronaut.jpg", "camera.png", "coffee.jpg", "rocket.jpg", "rocket_cmyk.jpg",
        "hubble_deep_field.webp", "clock_motion.png", "coins.png", "horse.png", "chelsea_rgba.png",
    ],
    "large medical image": ["retina.jpg", "retina_2400.jpg", "cell.png", "ihc.jpg"],
}  # fmt: skip


def corpus() -> tuple[dict[str, bytes], dict[str, list[str]]]:
    """The images by name, and the text each rendered scene is known to hold (ground truth)."""
    images = corpus_images()
    truth = {
        "passport": [*valid_mrz(), *_PASSPORT_LABELS],
        "passport_degraded": [*valid_mrz(), *_PASSPORT_LABELS],
        "passport_tampered": [*tampered_mrz(), *_PASSPORT_LABELS],
        "code": ["upload.py", *(line.strip() for line, _ in CODE_LINES if line.strip())],
        "form": list(FORM_LINES),
        "injection": list(INJECTION_TEXT),
        "landscape": [],
        "car": [],
    }
    return images, truth


# ----------------------------------------------------------------------------- accuracy


def _substring_distance(needle: str, hay: str) -> int:
    """Edit distance from `needle` to the best-matching substring of `hay` (semi-global alignment)."""
    if not needle:
        return 0
    prev = [0] * (len(hay) + 1)  # a match may start anywhere in hay
    for i, c in enumerate(needle, 1):
        cur = [i] + [0] * len(hay)
        for j, h in enumerate(hay, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (c != h))
        prev = cur
    return min(prev)


def cer(truth: list[str], text: str) -> float | None:
    """Character error rate of the known strings against the OCR text, spaces ignored."""
    wanted = [t.replace(" ", "") for t in truth if t.strip()]
    if not wanted:
        return None
    hay = text.replace(" ", "")
    return sum(_substring_distance(t, hay) for t in wanted) / sum(len(t) for t in wanted)


@dataclass
class Outcome:
    chars: int = 0
    cer: float | None = None
    mrz: str = "-"
    secrets: str = "-"
    code: float = 0.0
    text_labels: frozenset[str] = frozenset()
    doc_labels: frozenset[str] = frozenset()
    text: str = ""

    @property
    def routing(self) -> tuple[frozenset[str], frozenset[str]]:
        return self.text_labels, self.doc_labels


def outcome(result: OcrResult, truth: list[str], image_text: ImageTextSignal, doc_min: float) -> Outcome:
    labels, _ = image_text.scan(result.text, result.layout_text())
    doc = classify(result)
    mrz = find_mrz(result.text)
    secrets = sorted(k.split(":", 1)[1] for k in labels if k.startswith("secrets:"))
    return Outcome(
        chars=result.char_count,
        cer=cer(truth, result.text),
        mrz="valid" if any(m.valid for m in mrz) else ("invalid" if mrz else "-"),
        secrets=",".join(secrets) or "-",
        code=code_likeness(result.layout_text()),
        text_labels=frozenset(labels),
        doc_labels=frozenset(k for k, v in doc.items() if v >= doc_min),
        text=result.text,
    )


# ----------------------------------------------------------------------------- timing


@dataclass
class Run:
    name: str
    engine: RapidOcrEngine
    times: dict[str, list[float]] = field(default_factory=dict)
    cpu_s: float = 0.0  # process CPU time of all reads (every thread: ORT's spinning workers count too)
    results: dict[str, OcrResult] = field(default_factory=dict)


def read_cold(run: Run, name: str, data: bytes, max_side: int) -> None:
    service = OcrService(run.engine, max_side=max_side, budget_ms=600_000)  # an empty result cache
    image = as_image(data)  # a new request's image: pixels not yet decoded
    c0 = time.process_time()
    t0 = time.perf_counter()
    result = service.read_sync(image)
    run.times.setdefault(name, []).append((time.perf_counter() - t0) * 1000)
    run.cpu_s += time.process_time() - c0
    run.results.setdefault(name, result)


def parse_tuning(text: str) -> OcrTuning:
    """`k=v,k=v` over OcrTuning's fields, on top of the defaults (or of legacy with `base=legacy`)."""
    kinds = {f.name: f.type for f in fields(OcrTuning)}
    values: dict[str, Any] = {}
    base = OcrTuning()
    for item in filter(None, text.split(",")):
        key, _, raw = item.partition("=")
        if key == "base":
            base = OcrTuning.legacy() if raw == "legacy" else OcrTuning()
            continue
        if key not in kinds:
            raise SystemExit(f"unknown tuning field {key!r}; known: {', '.join(kinds)}")
        kind = str(kinds[key])
        if kind == "int":
            values[key] = int(raw)
        elif kind == "bool":
            values[key] = raw.lower() in ("1", "true", "yes")
        elif "float" in kind:
            values[key] = None if raw.lower() == "none" else float(raw)
        else:
            values[key] = raw
    merged = {f.name: getattr(base, f.name) for f in fields(OcrTuning)} | values
    return OcrTuning(**merged)


def rss_mib() -> float:
    """This process's resident memory now (Linux /proc), MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="cold reads per image and engine")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--try", dest="tries", action="append", default=[], metavar="K=V,...",
                        help="also time this OcrTuning variant (fields over the defaults)")  # fmt: skip
    parser.add_argument("--only", default="", help="comma-separated image names (default: the whole corpus)")
    parser.add_argument("--texts", action="store_true", help="print each engine's text where the outcomes differ")
    parser.add_argument("--edges", action="store_true",
                        help="also time int8-prev: the defaults with rapidocr's own detector edges")  # fmt: skip
    args = parser.parse_args()

    settings = Settings.load(None)
    max_side = settings.ocr.max_side
    min_score = settings.ocr.min_text_score
    tunings = {
        "baseline": OcrTuning.legacy(),
        "today": OcrTuning(runtime="onnxruntime", det_precision="fp32"),
        "int8": OcrTuning(runtime="onnxruntime"),
    }
    if args.edges:
        tunings["int8-prev"] = OcrTuning(runtime="onnxruntime")
    if openvino_available():
        tunings["today-ov"] = OcrTuning(runtime="openvino")
    tunings["gated"] = OcrTuning.gated(runtime="onnxruntime")
    if openvino_available():
        tunings["gated-ov"] = OcrTuning.gated(runtime="openvino")
    for i, text in enumerate(args.tries, 1):
        tunings[f"try{i}"] = parse_tuning(text)
    runs = []
    rss_loaded: dict[str, float] = {}
    print(f"process RSS before any engine: {rss_mib():.0f} MiB")
    for name, tuning in tunings.items():
        r0 = rss_mib()
        t0 = time.perf_counter()
        engine = RapidOcrEngine(threads=args.threads, min_score=min_score, tuning=tuning)
        if name == "int8-prev":
            use_rapidocr_edges(engine)
        engine.warm_up()
        load_ms = (time.perf_counter() - t0) * 1000
        rss_loaded[name] = rss_mib() - r0
        print(f"{name:9} {engine.name:28} load+warm-up {load_ms:5.0f} ms, +{rss_loaded[name]:4.0f} MiB RSS: "
              f"{tuning.describe()}")  # fmt: skip
        runs.append(Run(name, engine))

    images, truth = corpus()
    if args.only:
        images = {k: v for k, v in images.items() if k in set(args.only.split(","))}
    print(f"corpus: {len(images)} images; threads={args.threads}; repeat={args.repeat}; max_side={max_side}")
    for rep in range(args.repeat):
        k = rep % len(runs)
        order = runs[k:] + runs[:k]  # each engine goes first in turn: same machine load for all
        for name, data in images.items():
            for run in order:
                read_cold(run, name, data, max_side)
    print(f"process RSS after all reads: {rss_mib():.0f} MiB")

    # --------------------------------------------------------------- latency
    base = runs[0]
    today = next(r for r in runs if r.name == "today")
    later = runs[1:]
    cols = "".join(f" {r.name + ' ms':>11}" for r in runs) + "".join(f" {r.name + '/base':>11}" for r in later)
    print(f"\ncold OCR per image (p50 of {args.repeat}; ms; one interleaved run)")
    print(f"{'image':32}{cols}")
    totals = {r.name: 0.0 for r in runs}
    firsts = {r.name: 0.0 for r in runs}
    p50s: dict[str, dict[str, float]] = {}
    for name in images:
        p50 = {r.name: statistics.median(r.times[name]) for r in runs}
        p50s[name] = p50
        for r in runs:
            totals[r.name] += p50[r.name]
            firsts[r.name] += r.times[name][0]
        ratios = "".join(f" {p50[r.name] / p50[base.name]:11.2f}" for r in later)
        print(f"{name:32}" + "".join(f" {p50[r.name]:11.0f}" for r in runs) + ratios)
    n = len(images)
    print(f"{'TOTAL (sum of p50)':32}" + "".join(f" {totals[r.name]:11.0f}" for r in runs)
          + "".join(f" {totals[r.name] / totals[base.name]:11.2f}" for r in later))  # fmt: skip
    print(f"{'mean per image':32}" + "".join(f" {totals[r.name] / n:11.0f}" for r in runs))
    print(f"{'TOTAL first reads only':32}" + "".join(f" {firsts[r.name]:11.0f}" for r in runs)
          + "".join(f" {firsts[r.name] / firsts[base.name]:11.2f}" for r in later))  # fmt: skip
    print(f"{'CPU s, all reads':32}" + "".join(f" {r.cpu_s:11.1f}" for r in runs)
          + "".join(f" {r.cpu_s / base.cpu_s:11.2f}" for r in later))  # fmt: skip
    print(f"{'TOTAL / today':32}" + "".join(f" {totals[r.name] / totals[today.name]:11.2f}" for r in runs))
    for r in runs:
        s = r.engine.stats
        print(f"  {r.name}: {s.images} images, {s.gate_looks} first looks, {s.gate_skipped} judged text-free "
              f"(full OCR skipped, {s.gate_probes} candidate lines read), {s.det_empty} with no text box, "
              f"{s.rec_calls} recognition calls, {s.lines_read} lines read")  # fmt: skip

    # --------------------------------------------------------------- per class
    print("\ncold p50 per image class (median over the class's images of each image's p50; ms)")
    print(f"{'class':22} {'images':>6}" + "".join(f" {r.name + ' ms':>11}" for r in runs)
          + "".join(f" {r.name + '/base':>11}" for r in later) + "  labels (today)")  # fmt: skip
    for cls, names in CLASSES.items():
        names = [x for x in names if x in images]
        if not names:
            continue
        med = {r.name: statistics.median(p50s[x][r.name] for x in names) for r in runs}
        labels = sorted({routing_view(today.results[x]).describe() for x in names})
        print(f"{cls:22} {len(names):6}" + "".join(f" {med[r.name]:11.0f}" for r in runs)
              + "".join(f" {med[r.name] / med[base.name]:11.2f}" for r in later)
              + "  " + " ; ".join(labels))  # fmt: skip
    print("resident memory each engine added at load (MiB): "
          + ", ".join(f"{k} +{v:.0f}" for k, v in rss_loaded.items()))  # fmt: skip

    # --------------------------------------------------------------- accuracy
    image_text = ImageTextSignal(ImageTextSpec(name="image_text", type="image_text"), None, "bench")
    doc_min = DocumentSpec(name="document", type="document").min_score
    outcomes = {r.name: {k: outcome(r.results[k], truth.get(k, []), image_text, doc_min) for k in images} for r in runs}
    print("\naccuracy (first read of each engine): chars read, CER vs known text, MRZ, secrets, code likeness;")
    print("labels = image_text labels | document labels (>= min_score); 'same' = both label sets equal to baseline's")
    changed_vs_today = 0
    for r in later:
        print(f"\n{'image':28} {'chars b/' + r.name[:3]:>12} {'CER b/' + r.name[:3]:>13} {'MRZ':>13} {'secrets':>16}"
              f" {'code b/' + r.name[:3]:>11}  same  labels (baseline)")  # fmt: skip
        changed = 0
        for name in images:
            b, o = outcomes[base.name][name], outcomes[r.name][name]
            same = b.routing == o.routing
            changed += not same
            changed_vs_today += outcomes[today.name][name].routing != o.routing
            cer_text = "-" if b.cer is None or o.cer is None else f"{b.cer:.3f}/{o.cer:.3f}"
            mrz = "-" if b.mrz == o.mrz == "-" else f"{b.mrz}/{o.mrz}"
            secrets = "-" if b.secrets == o.secrets == "-" else f"{b.secrets}/{o.secrets}"
            labels = ",".join(sorted(b.text_labels)) + " | " + ",".join(sorted(b.doc_labels))
            print(f"{name:28} {f'{b.chars}/{o.chars}':>12} {cer_text:>13} {mrz:>13} {secrets:>16}"
                  f" {f'{b.code:.2f}/{o.code:.2f}':>11}  {'yes' if same else 'NO':4}  {labels}")  # fmt: skip
            if not same:
                print(f"{'':28} {r.name}: " + ",".join(sorted(o.text_labels)) + " | " + ",".join(sorted(o.doc_labels)))
            if args.texts and (not same or b.text != o.text):
                print(f"    baseline: {b.text!r}\n    {r.name}: {o.text!r}")
        known = [k for k in images if outcomes[base.name][k].cer is not None]
        mean_b = statistics.mean(outcomes[base.name][k].cer or 0.0 for k in known) if known else 0.0
        mean_o = statistics.mean(outcomes[r.name][k].cer or 0.0 for k in known) if known else 0.0
        codes = [k for k in ["code"] if k in images]
        key_found = all(AWS_KEY in outcomes[x][k].text.replace(" ", "") for x in (base.name, r.name) for k in codes)
        print(f"{r.name}: routing labels changed on {changed} of {len(images)} images vs baseline; mean CER over the "
              f"{len(known)} scenes with known text {mean_b:.3f} (baseline) vs {mean_o:.3f}; "
              f"AWS key read verbatim by both: {key_found}")  # fmt: skip
    print(f"\nrouting labels changed against today's full OCR, every engine and image: {changed_vs_today}")
    if changed_vs_today:
        sys.exit(1)


if __name__ == "__main__":
    main()
