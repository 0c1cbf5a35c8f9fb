"""Per-text cost of reading a text as a reader sees it (`extproc.detectors.reader_view`) and of
the quoted-phrase check (`extproc.detectors.quoted`), beside the cost of what they feed in the
same run: the jailbreak patterns and the prompt-attack classifier's lexical stage.

    .venv/bin/python bench/bench_reader_view.py [--repeat 3]

Texts: the everyday request sets and the safety corpus's test split (what traffic looks like:
mostly nothing to undo), then the same English attacks rewritten by `safety_evasion`'s
obfuscations (every one has something to undo). Best of `--repeat` passes, microseconds per text.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import safety_evasion  # noqa: E402

from extproc.detectors.jailbreak import find_jailbreak  # noqa: E402
from extproc.detectors.quoted import asked_about_quote  # noqa: E402
from extproc.detectors.reader_view import reader_view  # noqa: E402
from extproc.models.registry import ModelRegistry  # noqa: E402
from extproc.signals.prompt_attack_model import get_prompt_attack  # noqa: E402


def per_text_us(fn: Callable[[str], object], texts: Sequence[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for text in texts:
            fn(text)
        best = min(best, time.perf_counter() - started)
    return best / len(texts) * 1e6


def read(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "safety")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    everyday = [r["text"] for name in ("everyday_requests.jsonl", "everyday_unseen.jsonl")
                for r in read(REPO / "bench" / "data" / name)]  # fmt: skip
    test = read(args.data / "test.jsonl")
    ordinary = everyday + [r["text"] for r in test]
    english = [r["text"] for r in test if r["label"] == "attack" and r["lang"] == "en"][:200]
    obfuscated = [rewrite(t) for name, rewrite in safety_evasion.REWRITES.items() if name != "padding" for t in english]
    model = get_prompt_attack(ModelRegistry())
    print(f"{'us per text':34}{'ordinary':>12}{'obfuscated':>12}")
    print(f"{'  (texts)':34}{len(ordinary):>12}{len(obfuscated):>12}")
    for name, fn in (
        ("reader_view", reader_view),
        ("asked_about_quote", asked_about_quote),
        ("find_jailbreak", find_jailbreak),
        ("lexical classifier stage", model.lexical_scores),
    ):
        cells = "".join(f"{per_text_us(fn, texts, args.repeat):>12.1f}" for texts in (ordinary, obfuscated))
        print(f"  {name:32}{cells}")
    changed = sum(reader_view(t) is not None for t in ordinary)
    print(f"ordinary texts with something to undo: {changed} of {len(ordinary)} ({changed / len(ordinary):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
