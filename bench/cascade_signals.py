"""The shipped cascades' signals on a fixed text set: what each answers, and which stage decided.

    PYTHONPATH=$PWD .venv/bin/python bench/cascade_signals.py [--limit 2000] [--dump OUT.jsonl]

Builds the policy's `domain` signals on the shipped weights and its `classifier` signals on
`builtin:prompt-attack` (the real MiniLM embedder), and evaluates each on one-message requests
of the realistic mix (`bench/text_mix.py`, the first `--limit` texts), the safety corpus test
split's attack rows (`--attacks`) and short chats made of consecutive mix texts (`--chats`):

- per signal, the share of requests that ran stage 2 (the MiniLM embedding and a head) and
  how many texts it embedded, per text set;
- with `--routed N`, the first N mix texts routed through the default settings' router instead
  (lazy dispatch: a signal runs only where some rule still needs it): per signal, the share of
  requests it ran on and, for the cascades, the share whose stage 2 ran;
- with `--dump`, every evaluation (matched, score, labels, evidence) as one JSON line, so that
  two trees' answers can be compared exactly: run it once with PYTHONPATH on each and `cmp`
  the dumps (how the cascade refactor of issue 49 showed it changed no answer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from text_mix import _rows, _shared, realistic_mix  # noqa: E402

from extproc.cli.common import build_context  # noqa: E402
from extproc.policy.load import load_policy  # noqa: E402
from extproc.protocol.openai import parse_request  # noqa: E402
from extproc.settings import Settings  # noqa: E402
from extproc.signals.base import Evaluation, Signal, SignalContext  # noqa: E402

_EMBEDDED = re.compile(r"stage: embedding(?: for (\d+) of \d+)?")


def request(texts: list[str]) -> Any:
    roles = ["user", "assistant"]
    messages = [{"role": roles[(len(texts) - 1 - i) % 2], "content": t} for i, t in enumerate(texts)]
    return parse_request({"model": "auto", "messages": messages})


async def answer(signal: Signal, req: Any, run: SignalContext) -> Evaluation:
    if signal.inline:
        return signal.compute(req)
    now = signal.answer_now(req)
    return now if now is not None else await signal.evaluate(req, run)


def needs_stage_two(signal: Signal, req: Any) -> bool:
    """Would this signal embed for this request if no cache held a stage-2 answer?"""
    stage = getattr(signal.spec, "stage", None)
    if stage is not None:  # builtin:prompt-attack: the embedding stage embeds every text, lexical none
        return stage == "embedding"
    from extproc.signals.domain import select_turns

    model = signal.model
    if model is None:
        return False
    confident = signal.confident(model)  # type: ignore[attr-defined]
    return any(float(model.inner.first_stage_probs(t.text).max()) < confident for t in select_turns(req, signal.spec))


def embedded(evaluation: Evaluation) -> int | None:
    """Texts this evaluation sent to stage 2 (None: stage 1 decided)."""
    for note in evaluation.evidence:
        found = _EMBEDDED.search(note)
        if found:
            return int(found.group(1) or 1)
    return None


async def routed(limit: int) -> int:
    """Route `limit` mix texts through the router `make run` builds; per-signal shares."""
    from extproc.router import Router

    router = Router.from_settings(Settings.load(None, environ={}))
    texts = realistic_mix(limit)
    ran: Counter[str] = Counter()
    stage_two: Counter[str] = Counter()
    kinds: dict[str, str] = {}
    started = time.perf_counter()
    for text in texts:
        body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()
        outcome = await router.route(body)
        for result in outcome.signals:
            kinds[result.name] = result.type
            ran[result.name] += 1
            if any(_EMBEDDED.search(note) for note in result.evidence):
                stage_two[result.name] += 1
    router.close()
    print(f"{len(texts)} mix texts routed, one message each; {time.perf_counter() - started:.0f} s")
    print(f"{'signal':34}{'ran on':>10}{'stage 2 ran on':>16}")
    for name, count in sorted(ran.items(), key=lambda kv: -kv[1]):
        if kinds[name] not in ("domain", "classifier", "complexity", "semantic", "kb"):
            continue
        share2 = f"{stage_two[name] / len(texts):.1%}" if kinds[name] in ("domain", "classifier") else "-"
        print(f"  {name + ' [' + kinds[name] + ']':32}{count / len(texts):>10.1%}{share2:>16}")
    return 0


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", type=Path, default=REPO / "policies" / "default.yaml")
    parser.add_argument("--limit", type=int, default=2000, help="texts of the realistic mix")
    parser.add_argument("--attacks", type=int, default=500, help="attack rows of the safety test split")
    parser.add_argument("--chats", type=int, default=200, help="three-message chats of mix texts")
    parser.add_argument("--dump", type=Path, default=None)
    parser.add_argument("--routed", type=int, default=0, help="route this many mix texts instead (see above)")
    args = parser.parse_args()
    if args.routed:
        return await routed(args.routed)
    ctx = build_context(Settings())
    policy = load_policy(args.policy, ctx)
    signals = [
        s
        for s in [*policy.signals.values(), *policy.tool_signals.values()]
        if getattr(s.spec, "type", "") == "domain"
        or (getattr(s.spec, "type", "") == "classifier" and str(getattr(s.spec, "model", "")).startswith("builtin:"))
    ]
    signals = list({s.name: s for s in signals}.values())
    mix = realistic_mix(args.limit)
    attacks = [str(r["text"]) for r in _rows(_shared("safety/test.jsonl")) if r.get("label") == "attack"]
    sets: dict[str, list[list[str]]] = {
        "mix": [[t] for t in mix],
        "attacks": [[t] for t in attacks[: args.attacks]],
        "chats": [mix[i : i + 3] for i in range(0, 3 * args.chats, 3) if len(mix[i : i + 3]) == 3],
    }
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    stage_two: Counter[tuple[str, str]] = Counter()
    texts_embedded: Counter[tuple[str, str]] = Counter()
    needed: Counter[tuple[str, str]] = Counter()
    started = time.perf_counter()
    for set_name, requests in sets.items():
        for index, texts in enumerate(requests):
            req = request(texts)
            for signal in signals:
                run = SignalContext(executor=ctx.executor, deadline=time.monotonic() + 60.0)
                needed[set_name, signal.name] += needs_stage_two(signal, req)
                evaluation = await answer(signal, req, run)
                n = embedded(evaluation)
                if n is not None:
                    stage_two[set_name, signal.name] += 1
                    texts_embedded[set_name, signal.name] += n
                if dump is not None:
                    row = {
                        "set": set_name,
                        "i": index,
                        "signal": signal.name,
                        "matched": evaluation.matched,
                        "score": round(evaluation.score, 6),
                        "labels": {k: round(v, 6) for k, v in sorted(evaluation.labels.items())},
                        "evidence": list(evaluation.evidence),
                    }
                    dump.write(json.dumps(row, ensure_ascii=False) + "\n")
    if dump is not None:
        dump.close()
    took = time.perf_counter() - started
    print(f"{len(signals)} cascade signal(s) of {args.policy.name}; {took:.0f} s")
    header = "".join(f"{name + f' ({len(reqs)})':>22}" for name, reqs in sets.items())
    for title, counts in (
        ("requests stage 1 leaves to stage 2", needed),
        ("requests that embedded (after caches)", stage_two),
    ):
        print(f"{title:40}{header}")
        for signal in signals:
            stage = getattr(signal.spec, "stage", "cascade")
            cells = ""
            for set_name, requests in sets.items():
                share = counts[set_name, signal.name] / max(1, len(requests))
                extra = f" ({texts_embedded[set_name, signal.name]} texts)" if counts is stage_two else ""
                cells += f"{f'{share:.1%}{extra}':>22}"
            print(f"  {signal.name + ' [' + signal.spec.type + '/' + str(stage) + ']':38}{cells}")
    ctx.executor.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
