"""Probe for issue 43: how often would a static-vector first stage agree with `difficulty`'s MiniLM reading?

Routes routing_eval + the 2,658 everyday requests through the default policy, keeps each text whose
`difficulty` was asked, and writes its MiniLM margin, level and the static margin (the subject
classifier's static token vectors, examples embedded the same way, same top_k and cues) to JSONL.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from extproc.protocol.request import Role, RoutingRequest  # noqa: E402,F401
from extproc.signals.complexity import ComplexitySignal, cue_shift  # noqa: E402
from extproc.signals.domain import get_shipped_domain  # noqa: E402
from tests.policy.default_routing import default_router, read_jsonl, route_text  # noqa: E402

FILES = ["routing_eval", "everyday_requests", "everyday_unseen", "everyday_safety_questions"]
MARGIN = re.compile(r"margin ([+-][0-9.]+) \(similarity ([+-][0-9.]+)")


def main() -> None:
    router = default_router()
    sig = router.policy.signals["difficulty"]
    assert isinstance(sig, ComplexitySignal)
    static = get_shipped_domain(router.models).inner.static
    hard = np.stack([static.vector(t) for t in sig.spec.hard])
    easy = np.stack([static.vector(t) for t in sig.spec.easy])
    k = sig.spec.top_k
    seen: list[str] = []
    judge = sig.judge

    def spy(text: str, vec: np.ndarray) -> object:
        seen.append(text)
        return judge(text, vec)

    sig.judge = spy  # type: ignore[method-assign]
    out = open(sys.argv[1], "w", encoding="utf-8")
    for name in FILES:
        for i, row in enumerate(read_jsonl(REPO / "bench" / "data" / f"{name}.jsonl")):
            seen.clear()
            outcome = route_text(router, row["text"])
            ds = [s for s in outcome.signals if s.name == "difficulty"]
            rec = {"file": name, "i": i, "decision": outcome.decision, "expected": row.get("expected_decision")}
            m = MARGIN.search(" ".join(ds[0].evidence)) if ds else None
            if ds:
                rec.update(status=ds[0].status.value, level=next(iter(ds[0].labels), None), ev=list(ds[0].evidence))
            rec["subject_first"] = any("stage: first" in e for s in outcome.signals if s.name == "subject_area" for e in s.evidence)
            if m and seen:
                text = seen[-1]
                v = static.vector(text)
                s = float(np.sort(hard @ v)[-k:].mean() - np.sort(easy @ v)[-k:].mean())
                shift, _ = cue_shift(text, sig.spec.cues)
                rec.update(margin=float(m.group(1)), sim=float(m.group(2)), static=s, shift=shift, chars=len(text))
            out.write(json.dumps(rec) + "\n")
        print(name, "done", flush=True)
    router.close()


if __name__ == "__main__":
    main()
