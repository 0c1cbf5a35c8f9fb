"""`difficulty`'s static first stage (issue 43) beside the same policy without it, in one run.

    nice .venv/bin/python bench/bench_difficulty.py [--mix 1000] [--dump rows.jsonl]

Two routers on the default settings: the default policy as shipped, and the same policy with
`difficulty`'s `first_stage` line removed (MiniLM for every turn, as before issue 43). Every text
goes through both. Reported for each: hard STEM problems of `bench/data/routing_eval.jsonl` sent
to the reasoning model (`stem_hard`) and its decision accuracy (`expected_decision` /
`expected_not`, as `extproc eval` scores it), the 2,658 everyday requests (`everyday_requests`,
`everyday_unseen`, `everyday_safety_questions`) sent to the reasoning model, and on those plus
the first `--mix` texts of the realistic mix (`bench/text_mix.py`), how often `difficulty` was
asked, how often its MiniLM embedding was its own (subject's stage 1 was sure, so none was
cached) and how often the first stage answered instead. `--dump` writes, for each text the
router without the first stage embedded for `difficulty`, its MiniLM level and margin and the
static margin the first stage computes (to choose the band).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from text_mix import realistic_mix  # noqa: E402

from extproc.protocol.openai import parse_request  # noqa: E402
from extproc.router import Router  # noqa: E402
from extproc.settings import DEFAULT_POLICY, Settings  # noqa: E402
from extproc.signals.complexity import ComplexitySignal  # noqa: E402
from tests.policy.default_routing import read_jsonl, route_text  # noqa: E402
from tests.suite_env import SUITE_ENVIRON  # noqa: E402

DATA = REPO / "bench" / "data"
EVERYDAY = ("everyday_requests", "everyday_unseen", "everyday_safety_questions")
FIRST_STAGE_LINE = re.compile(r"^\s*first_stage:.*\n", re.MULTILINE)


def router_for(policy: Path) -> Router:
    return Router.from_settings(Settings.load(None, environ={**SUITE_ENVIRON, "VSR_POLICY_PATH": str(policy)}))


class Tally:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, router: Router, text: str, case: dict[str, Any] | None, group: str) -> dict[str, Any]:
        outcome = route_text(router, text)
        decision = outcome.decision
        c = self.counts
        if group == "eval" and case is not None:
            if case.get("expected_decision") == "stem_hard":
                c["eval hard"] += 1
                c["eval hard -> reasoning"] += decision == "stem_hard"
            expected = case.get("expected_decision")
            c["eval right"] += (decision == expected) if expected else decision not in case.get("expected_not", [])
        if group == "everyday":
            c["everyday"] += 1
            c["everyday -> reasoning"] += decision == "stem_hard"
        found = {s.name: s for s in outcome.signals}
        difficulty = found.get("difficulty")
        row: dict[str, Any] = {"decision": decision}
        if difficulty is None or not difficulty.known:
            return row
        area = found.get("subject_area")
        own = area is not None and any("stage: first" in e for e in area.evidence)  # no embedding cached
        first = any("stage: first" in e for e in difficulty.evidence)
        c[f"{group} difficulty asked"] += 1
        c[f"{group} difficulty own embedding"] += own and not first
        c[f"{group} difficulty first stage"] += first
        row.update(level=next(iter(difficulty.labels)), own=own, first=first, evidence=list(difficulty.evidence))
        return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mix", type=int, default=1000, help="realistic-mix texts (0: none)")
    parser.add_argument("--dump", type=Path, default=None)
    args = parser.parse_args()
    shipped = DEFAULT_POLICY.read_text(encoding="utf-8")
    if not FIRST_STAGE_LINE.search(shipped):
        raise SystemExit("the default policy's difficulty has no first_stage line to compare against")
    with tempfile.TemporaryDirectory() as tmp:
        before_path = Path(tmp) / "policy.yaml"
        before_path.write_text(FIRST_STAGE_LINE.sub("", shipped, count=1), encoding="utf-8")
        before, after = router_for(before_path), router_for(DEFAULT_POLICY)
    signal = after.policy.signals["difficulty"]
    assert isinstance(signal, ComplexitySignal)
    texts: list[tuple[str, dict[str, Any] | None, str]] = [
        (str(r["text"]), r, "eval") for r in read_jsonl(DATA / "routing_eval.jsonl")
    ]
    texts += [(str(r["text"]), None, "everyday") for name in EVERYDAY for r in read_jsonl(DATA / f"{name}.jsonl")]
    texts += [(t, None, "mix") for t in realistic_mix(args.mix)] if args.mix else []
    tallies = {"without first stage": Tally(), "with first stage (shipped)": Tally()}
    dump = []
    for text, case, group in texts:
        a = tallies["without first stage"].add(before, text, case, group)
        b = tallies["with first stage (shipped)"].add(after, text, case, group)
        if "level" in a:
            newest = signal.newest(parse_request({"model": "auto", "messages": [{"role": "user", "content": text}]}))
            read = signal.static_margin(newest) if newest else None
            static = None if read is None else round(read, 4)
            dump.append({"group": group, "text": text[:200], "before": a, "after": b, "static": static})
    before.close()
    after.close()
    keys = sorted({k for t in tallies.values() for k in t.counts})
    print(f"{'':44s}" + "".join(f"{name:>28s}" for name in tallies))
    for key in keys:
        print(f"{key:44s}" + "".join(f"{t.counts[key]:>28d}" for t in tallies.values()))
    changed = [d for d in dump if d["before"]["decision"] != d["after"]["decision"]]
    print(f"decisions changed: {len(changed)}")
    for d in changed:
        print(f"  [{d['group']}] {d['before']['decision']} -> {d['after']['decision']}: {d['text'][:100]!r}")
    if args.dump:
        args.dump.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in dump), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
