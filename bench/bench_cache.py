"""The semantic cache: how well its hit rule separates paraphrases from different questions,
and what a hit and a miss cost through Envoy.

    .venv/bin/python bench/bench_cache.py [--quick] [--no-envoy]

a. **Threshold table** over `bench/data/cache_pairs.jsonl` (hand-labelled pairs: paraphrases a
   user would accept one answer for, and different questions, many of them hard negatives: an
   entity, a number or a direction swapped, a negation, the same topic asked differently). For
   each threshold t: the paraphrase hit rate and the false-hit rate on different pairs, for the
   service's two-stage rule (static candidate score >= t - candidate_margin, then MiniLM cosine
   >= t) and for MiniLM alone; how many paraphrases the candidate stage drops; a margin sweep
   at the policy's threshold; the static embedding's cost per query beside a MiniLM embed's.
   One stored entry per pair, so the `candidates` top-k limit never binds here.

b. **Through Envoy** (`--no-envoy` skips it): a real stack (demo upstreams, `extproc serve`,
   Envoy), streamed requests with an `authorization` header (the cache is per tenant): miss and
   hit latency with a realistic upstream delay, then throughput with every request a miss
   beside a second stack with the cache off (`VSR_CACHE__ENABLED=false`), same Envoy config.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.client import Client, fetch, session  # noqa: E402
from extproc.cache.embedding import StaticEmbedder  # noqa: E402
from extproc.cache.keys import normalise, numbers_of, semantically_compatible  # noqa: E402
from extproc.models.text_embedder import TextEmbedder, load_text_embedder  # noqa: E402
from extproc.settings import DEFAULT_POLICY, CacheSettings, EmbedderSettings  # noqa: E402

if TYPE_CHECKING:
    from extproc.ops.stack import Stack, StackConfig

PAIRS = REPO / "bench" / "data" / "cache_pairs.jsonl"
THRESHOLDS = [round(0.85 + 0.01 * i, 2) for i in range(13)]  # 0.85 .. 0.97
BEYOND = [0.98, 0.99]  # shown too: where the hardest negatives (order swaps) stop hitting
WARM_EXTRA = 16  # pool prompts spent on warming each server up
MARGINS = [0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40]
TARGET_FALSE = 0.01  # false hits on different pairs we accept


# -- a. the pair set --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pair:
    a: str
    b: str
    label: str  # paraphrase | different
    kind: str


@dataclass(frozen=True, slots=True)
class Scored:
    pair: Pair
    minilm: float  # cosine of the MiniLM sentence embeddings
    static: float  # cosine of the static candidate vectors
    exact: bool  # same normalised text: the service's exact key would hit
    guarded: bool  # the service's guards pass: same numbers (in the context) and semantically_compatible

    @property
    def paraphrase(self) -> bool:
        return self.pair.label == "paraphrase"


def load_pairs(path: Path) -> list[Pair]:
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["label"] not in ("paraphrase", "different"):
                raise ValueError(f"{path}: bad label {row['label']!r}")
            pairs.append(Pair(row["a"], row["b"], row["label"], row["kind"]))
    return pairs


def unique_texts(pairs: Sequence[Pair]) -> list[str]:
    return list(dict.fromkeys(t for p in pairs for t in (p.a, p.b)))


def score_pairs(
    pairs: Sequence[Pair], embedder: TextEmbedder, static: StaticEmbedder
) -> tuple[list[Scored], dict[str, np.ndarray], dict[str, np.ndarray]]:
    texts = unique_texts(pairs)
    # The service embeds the last user turn as sent (not normalised); so do we.
    minilm = dict(zip(texts, embedder.embed(texts), strict=True))
    cheap = {t: static.embed(t) for t in texts}
    scored = [
        Scored(
            p,
            float(np.dot(minilm[p.a], minilm[p.b])),
            float(np.dot(cheap[p.a], cheap[p.b])),
            normalise(p.a) == normalise(p.b),
            same_numbers_text(p.a, p.b) and semantically_compatible(p.a, p.b),
        )
        for p in pairs
    ]
    return scored, minilm, cheap


def two_stage_hit(s: Scored, t: float, margin: float) -> bool:
    """The service's rule: the exact key, or a candidate over the floor, passing the guards, that
    MiniLM verifies."""
    return s.exact or (s.guarded and s.static >= t - margin and s.minilm >= t)


def unguarded_hit(s: Scored, t: float, margin: float) -> bool:
    """The rule without the guards (numbers, negation, names, direction): embeddings alone."""
    return s.exact or (s.static >= t - margin and s.minilm >= t)


def minilm_hit(s: Scored, t: float) -> bool:
    return s.exact or s.minilm >= t


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def same_numbers_text(a: str, b: str) -> bool:
    """The service keys numbers into the context: both texts must carry the same numbers."""
    return numbers_of(a) == numbers_of(b)


def rate(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


@dataclass(slots=True)
class Row:
    t: float
    para_two: float
    para_minilm: float
    false_two: float
    false_minilm: float
    dropped: int  # paraphrases under the candidate floor
    lost: int  # ... that MiniLM alone would have accepted
    diff_verified: int  # different pairs over the floor: MiniLM runs for them
    para_guard: float  # the two-stage rule without the guards (embeddings alone)
    false_guard: float


def threshold_row(scored: Sequence[Scored], t: float, margin: float) -> Row:
    para = [s for s in scored if s.paraphrase]
    diff = [s for s in scored if not s.paraphrase]
    floor = t - margin
    return Row(
        t=t,
        para_two=rate([two_stage_hit(s, t, margin) for s in para]),
        para_minilm=rate([minilm_hit(s, t) for s in para]),
        false_two=rate([two_stage_hit(s, t, margin) for s in diff]),
        false_minilm=rate([minilm_hit(s, t) for s in diff]),
        dropped=sum(not s.exact and s.static < floor for s in para),
        lost=sum(not s.exact and s.static < floor and s.minilm >= t for s in para),
        diff_verified=sum(not s.exact and s.static >= floor for s in diff),
        para_guard=rate([unguarded_hit(s, t, margin) for s in para]),
        false_guard=rate([unguarded_hit(s, t, margin) for s in diff]),
    )


def policy_similarity(policy: Path) -> float:
    data = yaml.safe_load(policy.read_text(encoding="utf-8")) or {}
    default_rule = ((data.get("default") or {}).get("cache") or {}).get("similarity")
    if default_rule is not None:  # the default decision's own override wins for its requests
        return float(default_rule)
    return float((data.get("cache") or {}).get("similarity", 0.93))


def per_query_us(fn: Callable[[str], object], texts: Sequence[str], *, min_s: float) -> list[float]:
    """Per-call microseconds of fn over texts, cycling until at least min_s have passed."""
    times: list[float] = []
    spent = 0.0
    while spent < min_s or len(times) < len(texts):
        for text in texts:
            t0 = time.perf_counter()
            fn(text)
            dt = time.perf_counter() - t0
            times.append(dt * 1e6)
            spent += dt
        if len(times) >= 20 * len(texts):
            break
    return times


def section_a(args: argparse.Namespace, embedder: TextEmbedder, static: StaticEmbedder) -> dict[str, object]:
    import torch

    cache = CacheSettings()
    margin = args.margin if args.margin is not None else cache.candidate_margin
    default_t = policy_similarity(args.policy)
    pairs = load_pairs(args.pairs)
    t0 = time.perf_counter()
    scored, minilm, cheap = score_pairs(pairs, embedder, static)
    n_para = sum(s.paraphrase for s in scored)
    n_diff = len(scored) - n_para
    kinds = Counter(f"{s.pair.label}/{s.pair.kind}" for s in scored)
    print(f"\n== a. threshold table: {args.pairs.relative_to(REPO) if args.pairs.is_relative_to(REPO) else args.pairs}")
    print(
        f"{len(scored)} pairs: {n_para} paraphrase, {n_diff} different "
        f"({len(unique_texts(pairs))} texts embedded in {time.perf_counter() - t0:.1f}s)"
    )
    print("kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print(
        f"policy {args.policy.name}: cache.similarity {default_t:.2f}; CacheSettings: candidate_margin "
        f"{cache.candidate_margin:.2f}, candidates {cache.candidates} (margin used here: {margin:.2f})"
    )
    print()
    print(
        f"{'':>5}  {'paraphrase hit rate':^22}  {'false hits on different':^22}   "
        f"{f'candidate stage (margin {margin:.2f})':^34}  {'without the guards':^22}"
    )
    print(
        f"{'t':>5}  {'2-stage':>9} {'MiniLM only':>12}  {'2-stage':>9} {'MiniLM only':>12}"
        f"   {'para dropped':>12} {'(lost)':>6} {'diff verified':>13}  {'para hits':>10} {'false':>7}"
    )
    rows = {t: threshold_row(scored, t, margin) for t in [*THRESHOLDS, *BEYOND]}
    if default_t not in rows:
        rows[default_t] = threshold_row(scored, default_t, margin)
    for t in sorted(rows):
        r = rows[t]
        mark = "  <== default (policy cache.similarity)" if abs(t - default_t) < 1e-9 else ""
        mark += "  (beyond 0.97)" if t in BEYOND else ""
        print(
            f"{t:>5.2f}  {r.para_two:>9.1%} {r.para_minilm:>12.1%}  "
            f"{r.false_two:>8.1%} {r.false_minilm:>12.1%}   "
            f"{r.dropped:>5d}/{n_para:<6d} {r.lost:>6d} {r.diff_verified:>6d}/{n_diff:<6d}"
            f"  {r.para_guard:>10.1%} {r.false_guard:>7.1%}{mark}"
        )
    d = rows[default_t]
    print(
        f"\nDEFAULT t={default_t:.2f}, margin {margin:.2f}: paraphrase hits {d.para_two:.1%} (MiniLM alone "
        f"{d.para_minilm:.1%}); false hits {d.false_two:.1%} = {round(d.false_two * n_diff)}/{n_diff} "
        f"(MiniLM alone {d.false_minilm:.1%}); the candidate stage drops {d.dropped}/{n_para} paraphrases, "
        f"{d.lost} of which MiniLM would have accepted"
    )
    print("(para dropped: paraphrases whose static score is under t - margin; lost: of those, MiniLM >= t;")
    print(" diff verified: different pairs over the candidate floor, i.e. lookups that pay for a MiniLM embed;")
    print(" without the guards: the 2-stage rule on embeddings alone, no numbers/negation/names/direction check)")

    # The margin at the default threshold: what each would lose, and how often MiniLM must run.
    print(f"\nmargin sweep at t={default_t:.2f}")
    print(f"{'margin':>6}  {'floor':>5}  {'para hits':>9}  {'para lost':>9}  {'false hits':>10}  verified (all pairs)")
    for m in sorted({*MARGINS, margin}):
        r = threshold_row(scored, default_t, m)
        verified = sum(not s.exact and s.static >= default_t - m for s in scored)
        print(
            f"{m:>6.2f}  {default_t - m:>5.2f}  {r.para_two:>9.1%}  {r.lost:>9d}  {r.false_two:>10.1%}  "
            f"{verified:>10d}/{len(scored)} ({verified / len(scored):.0%})"
        )

    print(f"\nby kind at t={default_t:.2f} (2-stage hit rate; mean MiniLM / static cosine)")
    for kind in sorted(kinds):
        group = [s for s in scored if f"{s.pair.label}/{s.pair.kind}" == kind]
        hits = rate([two_stage_hit(s, default_t, margin) for s in group])
        print(
            f"  {kind:<26} n={len(group):>3}  hits {hits:>6.1%}  MiniLM {statistics.fmean(s.minilm for s in group):.3f}"
            f"  static {statistics.fmean(s.static for s in group):.3f}"
        )

    diff_sorted = sorted((s for s in scored if not s.paraphrase), key=lambda s: -s.minilm)
    print(f"\nhardest different pairs (highest MiniLM; * = a false hit at t={default_t:.2f})")
    for s in diff_sorted[: args.show]:
        flag = "*" if two_stage_hit(s, default_t, margin) else " "
        print(f" {flag} {s.minilm:.3f} static {s.static:.3f} [{s.pair.kind}] {s.pair.a!r} / {s.pair.b!r}")
    para_sorted = sorted((s for s in scored if s.paraphrase), key=lambda s: s.minilm)
    print(f"lowest-scoring paraphrases (missed at t={default_t:.2f} unless marked +)")
    for s in para_sorted[: args.show]:
        flag = "+" if two_stage_hit(s, default_t, margin) else " "
        print(f" {flag} {s.minilm:.3f} static {s.static:.3f} [{s.pair.kind}] {s.pair.a!r} / {s.pair.b!r}")

    # The recommendation: the lowest threshold whose two-stage false-hit rate is within the
    # target (most paraphrase hits), then the smallest margin that loses no paraphrase MiniLM
    # would accept there. When no threshold meets it, the trade-off at looser budgets.
    grid = [*THRESHOLDS, *BEYOND]
    no_swaps = [s for s in scored if s.pair.kind != "direction_swap"]
    print()
    for budget in (TARGET_FALSE, 0.02, 0.05, 0.10):
        line = []
        for name, subset in (("all pairs", scored), ("without direction_swap", no_swaps)):
            fit = [t for t in grid if threshold_row(subset, t, margin).false_two <= budget]
            if fit:
                r = threshold_row(subset, min(fit), margin)
                line.append(f"{name}: t={min(fit):.2f} (paraphrase hits {r.para_two:.1%}, false {r.false_two:.1%})")
            else:
                line.append(f"{name}: none up to {grid[-1]:.2f}")
        print(f"false hits <= {budget:>3.0%}: lowest t  " + "; ".join(line))
    ok = [t for t in grid if rows[t].false_two <= TARGET_FALSE]
    if ok:
        best = min(ok)
        safe_margins = [m for m in MARGINS if threshold_row(scored, best, m).lost == 0]
        best_m = min(safe_margins) if safe_margins else max(MARGINS)
        r = threshold_row(scored, best, best_m)
        print(
            f"RECOMMENDATION: t={best:.2f}, margin {best_m:.2f} -> paraphrase hits {r.para_two:.1%}, "
            f"false hits {r.false_two:.1%} (target <= {TARGET_FALSE:.0%})"
        )
    else:
        print(
            f"RECOMMENDATION: no t in {grid[0]:.2f}..{grid[-1]:.2f} keeps false hits <= {TARGET_FALSE:.0%} on this set "
            "with the cosine rule alone (see the budgets above and the false hits by kind below)"
        )
    safe_default = [m for m in MARGINS if threshold_row(scored, default_t, m).lost == 0]
    if safe_default:
        m = min(safe_default)
        print(
            f"at the default t={default_t:.2f}: smallest swept margin losing no paraphrase MiniLM accepts: {m:.2f} "
            f"(current {margin:.2f} loses {d.lost})"
        )
    culprits = Counter(s.pair.kind for s in scored if not s.paraphrase and two_stage_hit(s, default_t, margin))
    print(f"false hits at t={default_t:.2f} by kind: " + ", ".join(f"{k} {v}" for k, v in culprits.most_common()))

    # Cost per query, measured here: the static vector (tokenizer + gather) vs a MiniLM forward
    # pass over one text (uncached, as for a lookup's verification or a store).
    texts = unique_texts(pairs)[: args.cost_texts]
    for text in texts[:3]:
        embedder.embed_uncached([text])  # warm up the model's first passes
    static_us = per_query_us(static._embed, texts, min_s=0.5)  # uncached: its LRU would time dict lookups
    minilm_us = per_query_us(lambda x: embedder.embed_uncached([x]), texts, min_s=args.cost_seconds)
    s50, m50 = statistics.median(static_us), statistics.median(minilm_us)
    print(
        f"\ncost per query ({len(texts)} texts, torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs): "
        f"static embedding p50 {s50:.0f} µs (mean {statistics.fmean(static_us):.0f}); MiniLM embed p50 "
        f"{m50:.0f} µs (mean {statistics.fmean(minilm_us):.0f}); MiniLM / static = {m50 / s50:.0f}x"
    )
    return {"default_t": default_t, "margin": margin, "minilm": minilm, "cheap": cheap, "scored": scored}


# -- b. through Envoy -------------------------------------------------------------------------


def pctl(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (ms in, ms out); nan when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100.0 * len(ordered)) - 1))]


def dissimilar(texts: Sequence[str], vectors: dict[str, np.ndarray], below: float) -> list[str]:
    """A greedy subset whose MiniLM cosines are all under `below`: none can hit another's entry."""
    kept: list[str] = []
    matrix = np.zeros((0, next(iter(vectors.values())).shape[0]), dtype=np.float32)
    seen: set[str] = set()
    for text in texts:
        key = normalise(text)
        if key in seen:
            continue
        v = vectors[text]
        if len(kept) and float((matrix @ v).max()) >= below:
            continue
        kept.append(text)
        seen.add(key)
        matrix = np.vstack([matrix, v[None, :]])
    return kept


def chat_body(text: str, *, stream: bool) -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}], "stream": stream}).encode()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in children.read_text().split()] if children.exists() else []
    return own + sum(cpu_seconds(kid) for kid in kids)


def make_stack_config(policy: Path, delay_ms: float, env: dict[str, str]) -> StackConfig:
    from extproc.ops.envoy_config import EnvoyOptions, mcp_upstreams_from_policy, upstreams_from_policy
    from extproc.ops.stack import StackConfig, free_port

    return StackConfig(
        policy=policy,
        # No access log: every request's line would be pumped through this process.
        envoy=EnvoyOptions(
            listener_port=free_port(), admin_port=free_port(), ext_proc_port=free_port(), access_log=False
        ),
        # Every demo server on a free port (model upstreams and MCP servers): two stacks run at once.
        upstream_overrides={
            u.cluster: f"127.0.0.1:{free_port()}"
            for u in [*upstreams_from_policy(policy), *mcp_upstreams_from_policy(policy)]
        },
        env={"VSR_LOGGING__LEVEL": "WARNING", "VSR_SERVER__ADMIN_PORT": str(free_port()), **env},
        stream_delay_ms=delay_ms,
        start_timeout_s=180.0,
    )


STACK_LINES: dict[str, list[str]] = {}  # each stack's children's output, by stack name


@contextlib.contextmanager
def running_stack(config: StackConfig, name: str) -> Iterator[Stack]:
    from extproc.ops.stack import Stack

    lines = STACK_LINES.setdefault(name, [])
    stack = Stack(config, sink=lines.append)
    t0 = time.perf_counter()
    try:
        stack.start()
    except Exception:
        print("\n".join(lines[-40:]), file=sys.stderr)
        stack.stop()
        raise
    print(f"stack '{name}' up in {time.perf_counter() - t0:.1f}s", flush=True)
    try:
        yield stack
    finally:
        stack.stop()


@dataclass(slots=True)
class Timed:
    ms: list[float] = field(default_factory=list)
    states: Counter[str] = field(default_factory=Counter)  # x-vsr-cache values ("-" when absent)
    statuses: Counter[int] = field(default_factory=Counter)
    similarity: list[float] = field(default_factory=list)
    errors: int = 0  # transport failures and 5xx (a policy's 4xx answer is shown in statuses)
    refused: list[int] = field(default_factory=list)  # closed loop: indexes of non-200 requests
    elapsed_s: float = 0.0

    def record(self, ms: float, status: int, state: str, expect: str | None = None) -> None:
        self.states[state] += 1
        self.statuses[status] += 1
        if status >= 500:
            self.errors += 1
        if expect is None or state == expect:  # e.g. a hit row times hits only
            self.ms.append(ms)

    def describe(self) -> str:
        states = " ".join(f"{k}:{v}" for k, v in sorted(self.states.items()))
        statuses = " ".join(f"{k}:{v}" for k, v in sorted(self.statuses.items()))
        return f"x-vsr-cache {states}; status {statuses}; errors {self.errors}"

    def row(self, name: str) -> str:
        sim = f"  similarity p50 {statistics.median(self.similarity):.3f}" if self.similarity else ""
        return (
            f"  {name:<30} n={len(self.ms):>4}  p50 {pctl(self.ms, 50):>7.1f} ms  p95 {pctl(self.ms, 95):>7.1f} ms"
            f"  [{self.describe()}]{sim}"
        )


def send(
    client: Client,
    url: str,
    text: str,
    tenant: str | None,
    timed: Timed,
    *,
    stream: bool = True,
    expect: str | None = None,
) -> str:
    """One request; records its cache state and (if it is the expected one) its latency, whole
    body read; returns the state."""
    try:
        reply = client.post(url, chat_body(text, stream=stream), request_headers(tenant))
    except (aiohttp.ClientError, TimeoutError):
        timed.errors += 1
        return "error"
    state = reply.headers.get("x-vsr-cache", "-")
    timed.record(reply.ms, reply.status, state, expect)
    if state == "hit" and "x-vsr-cache-similarity" in reply.headers:
        timed.similarity.append(float(reply.headers["x-vsr-cache-similarity"]))
    return state


def request_headers(tenant: str | None) -> dict[str, str]:
    """A chat request's headers: JSON, and the tenant as its bearer token when there is one."""
    headers = {"content-type": "application/json"}
    if tenant is not None:
        headers["authorization"] = f"Bearer {tenant}"
    return headers


Request = tuple[int, bytes, dict[str, str]]  # closed loop: (index, body, headers)


async def closed_loop(url: str, work: list[list[Request]], deadline_s: float) -> Timed:
    """One connection per worker list, each sending its own requests in order; all in one loop
    (a thread pool of HTTP clients would spend the 2 cores this machine has on the GIL). Every
    request is a miss costing the server milliseconds, so aiohttp's client CPU (tens of us a
    request, bench/client.py) weighs little, and alike on the cache-on and cache-off rounds."""
    timed = Timed()
    stop_at = time.perf_counter() + deadline_s
    async with session(timeout_s=30, limit=len(work)) as client:

        async def worker(requests: list[Request]) -> None:
            for index, body, headers in requests:
                if time.perf_counter() > stop_at:
                    return
                try:
                    reply = await fetch(client, "POST", url, body, headers)
                except (aiohttp.ClientError, TimeoutError):
                    timed.errors += 1
                    continue
                timed.record(reply.ms, reply.status, reply.headers.get("x-vsr-cache", "-"))
                if reply.status != 200:
                    timed.refused.append(index)

        started = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in work))
        timed.elapsed_s = time.perf_counter() - started
    return timed


@dataclass(slots=True)
class Round:
    timed: Timed
    server_cpu_s: float
    envoy_cpu_s: float
    drain_s: float = 0.0  # after the last response, until the server went idle (background stores)

    @property
    def rps(self) -> float:
        return len(self.timed.ms) / self.timed.elapsed_s if self.timed.elapsed_s else 0.0

    @property
    def sustained_rps(self) -> float:
        """Requests over the time the server was busy with them, background stores included."""
        busy = self.timed.elapsed_s + self.drain_s
        return len(self.timed.ms) / busy if busy else 0.0


def settle(stack: Stack) -> None:
    """After a miss: ~0.3 s for the background store, longer while the server is still busy."""
    time.sleep(0.3)
    wait_idle(stack.procs["extproc"].pid, limit_s=2.0)


def wait_idle(pid: int, *, limit_s: float = 20.0, window_s: float = 0.1, busy: float = 0.15) -> float:
    """Seconds until the process (and children) uses under `busy` of a core over a window: the
    answers have gone out, but stores run after them, in the background, on the same CPUs."""
    started = time.perf_counter()
    last = cpu_seconds(pid)
    while time.perf_counter() - started < limit_s:
        time.sleep(window_s)
        now = cpu_seconds(pid)
        if now - last < busy * window_s:
            return max(0.0, time.perf_counter() - started - window_s)
        last = now
    return time.perf_counter() - started


def throughput(
    stack: Stack, prompts: list[str], concurrency: int, deadline_s: float, tags: Sequence[str], offset: int = 0
) -> Round:
    """Every request a miss: distinct prompts, worker k sends its share under tenant tag-k, for
    each tag in turn, back to back: one sustained round (`offset`: the prompts' index in the
    whole list, for the refused-request report)."""
    work = [
        [
            (offset + i, chat_body(prompts[i], stream=False), request_headers(f"{tag}-{k}"))
            for tag in tags
            for i in range(k, len(prompts), concurrency)
        ]
        for k in range(concurrency)
    ]
    pids = {"extproc": stack.procs["extproc"].pid, "envoy": stack.procs["envoy"].pid}
    before = {k: cpu_seconds(v) for k, v in pids.items()}
    timed = asyncio.run(closed_loop(stack.base_url + "/v1/chat/completions", work, deadline_s))
    drain = wait_idle(pids["extproc"])  # the stores' CPU belongs to these requests, and the next round starts clean
    return Round(
        timed,
        cpu_seconds(pids["extproc"]) - before["extproc"],
        cpu_seconds(pids["envoy"]) - before["envoy"],
        drain,
    )


def merged(rounds: Sequence[Round]) -> Round:
    """The rounds of one stack as one: latencies, states and CPU summed, elapsed added up."""
    timed = Timed()
    for r in rounds:
        timed.ms += r.timed.ms
        timed.states.update(r.timed.states)
        timed.statuses.update(r.timed.statuses)
        timed.errors += r.timed.errors
        timed.refused += r.timed.refused
        timed.elapsed_s += r.timed.elapsed_s
    return Round(
        timed,
        sum(r.server_cpu_s for r in rounds),
        sum(r.envoy_cpu_s for r in rounds),
        sum(r.drain_s for r in rounds),
    )


def verify_share(prompts: list[str], cheap: dict[str, np.ndarray], concurrency: int, floor: float) -> float:
    """Estimated share of the throughput misses whose lookup ran a MiniLM verification: an
    earlier prompt of the same tenant (worker) over the candidate floor on the static score."""
    ran = 0
    for k in range(concurrency):
        mine = prompts[k::concurrency]
        for i, text in enumerate(mine[1:], start=1):
            earlier = np.stack([cheap[p] for p in mine[:i]])
            ran += float((earlier @ cheap[text]).max()) >= floor
    return ran / max(1, len(prompts))


# Warm-up texts: "pretend" / "roleplay" make the policy run its MiniLM signals, so both servers
# load MiniLM before measuring (the cache-on server loads it at start, the other lazily).
WARM_UP = [
    "Pretend you are a travel guide and describe Lisbon in two sentences.",
    "Let's roleplay: you are a chef explaining how to julienne carrots.",
    "Hello! Please say hello back to the benchmark.",
    "Act as a librarian and suggest a shelf order for history books.",
]


def warm_up(stack: Stack, client: Client, url: str, extra: Sequence[str]) -> str:
    """Send the warm-up texts (not measured); returns the server's loaded models."""
    scratch = Timed()
    for i, text in enumerate([*WARM_UP, *extra]):
        send(client, url, text, f"warm-{i}", scratch, stream=False)
        send(client, url, text + " (no tenant)", None, scratch, stream=False)
    return loaded_models(stack)


def admin_metrics(stack: Stack) -> str:
    """The server's admin /metrics text."""
    with Client(timeout_s=5) as client:
        return client.get(f"http://127.0.0.1:{stack.config.env['VSR_SERVER__ADMIN_PORT']}/metrics").text


def loaded_models(stack: Stack) -> str:
    """The server's `vsr_model_loaded` gauges, from its admin /metrics."""
    try:
        text = admin_metrics(stack)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"(metrics unavailable: {exc})"
    found: list[tuple[str, str]] = re.findall(r'^vsr_model_loaded\{model="([^"]+)"\} ([0-9.]+)$', text, re.M)
    return ", ".join(f"{name}={'loaded' if float(v) else 'unavailable'}" for name, v in found) or "(none yet)"


def cache_counts(stack: Stack) -> Counter[str]:
    """The server's semantic-cache lookup and store counters (admin /metrics), keyed by their labels."""
    try:
        text = admin_metrics(stack)
    except (aiohttp.ClientError, TimeoutError):
        return Counter()
    found: list[tuple[str, str, str]] = re.findall(
        r"^vsr_semantic_cache_(lookups|stores)(?:_total)?\{([^}]*)\} ([0-9.e+]+)$", text, re.M
    )
    return Counter({f"{family}{{{labels}}}": int(float(value)) for family, labels, value in found})


def section_b(args: argparse.Namespace, found: dict[str, object]) -> None:
    default_t = float(found["default_t"])  # type: ignore[arg-type]
    margin = float(found["margin"])  # type: ignore[arg-type]
    minilm: dict[str, np.ndarray] = found["minilm"]  # type: ignore[assignment]
    cheap: dict[str, np.ndarray] = found["cheap"]  # type: ignore[assignment]
    scored: list[Scored] = found["scored"]  # type: ignore[assignment]

    # Prompts that cannot hit each other (MiniLM < t pairwise), split so that no text is sent in
    # two phases of one server (its MiniLM keeps an embedding cache by text).
    pairs = load_pairs(args.pairs)
    semantic = [s for s in scored if s.paraphrase and two_stage_hit(s, default_t, margin) and not s.exact]
    semantic = semantic[: args.semantic_pairs]
    reserved = {t for s in semantic for t in (s.pair.a, s.pair.b)}
    pool = dissimilar([t for t in unique_texts(pairs) if t not in reserved], minilm, default_t)
    warm, pool = pool[:WARM_EXTRA], pool[WARM_EXTRA:]
    latency_prompts, tput_prompts = pool[: args.latency_prompts], pool[args.latency_prompts :]
    if len(tput_prompts) < args.requests:
        print(f"note: only {len(tput_prompts)} mutually dissimilar prompts for the throughput phase")
    # Equal rounds, each a multiple of the concurrency (see the rounds below).
    step = args.rounds * args.concurrency
    tput_prompts = tput_prompts[: min(args.requests, len(tput_prompts)) // step * step]
    share = verify_share(tput_prompts, cheap, args.concurrency, default_t - margin)
    share_wider = verify_share(tput_prompts, cheap, args.concurrency, default_t - margin - 0.05)

    print(
        f"\n== b. through Envoy (127.0.0.1; demo upstream {args.delay_ms:g} ms between SSE chunks, i.e. "
        f"~{1000 / args.delay_ms:.0f} tokens/s decode when streamed)"
        if args.delay_ms
        else f"\n== b. through Envoy (127.0.0.1; demo upstream delay {args.delay_ms:g} ms)"
    )
    policy = args.policy.resolve()
    results: dict[str, Timed] = {}
    tput: dict[str, list[Round]] = {}
    deadline = time.monotonic() + float(args.envoy_budget_s)

    def left() -> float:
        return max(5.0, deadline - time.monotonic())

    # Both stacks up at once, the throughput rounds interleaved (on, off, on, off, ...): this host's
    # 2 cores are shared, and load from elsewhere then weighs on both sides alike.
    with contextlib.ExitStack() as stacks:
        admission = {"VSR_CACHE__ADMISSION": args.admission}
        stack_on = stacks.enter_context(running_stack(make_stack_config(policy, args.delay_ms, admission), "cache on"))
        stack_off = stacks.enter_context(
            running_stack(make_stack_config(policy, args.delay_ms, {"VSR_CACHE__ENABLED": "false"}), "cache off")
        )
        url_on = stack_on.base_url + "/v1/chat/completions"
        url_off = stack_off.base_url + "/v1/chat/completions"
        with Client(timeout_s=30.0) as client:
            print(f"  cache on  warm-up done; models: {warm_up(stack_on, client, url_on, warm)}", flush=True)
            print(f"  cache off warm-up done; models: {warm_up(stack_off, client, url_off, warm)}", flush=True)
            miss, hit, sem_miss, sem_hit, off = Timed(), Timed(), Timed(), Timed(), Timed()
            # Misses (each prompt once, one tenant: lookups scan the tenant's growing entry set),
            # each followed, once stored, by repeats of the same request: exact hits; beside the
            # same request to the cache-off stack.
            # admission: repeat stores a question the second time it is asked: one more miss first
            # (adaptive stores it the first time here: one request at a time leaves the loop idle).
            asks_to_store = 2 if args.admission == "repeat" else 1
            for text in latency_prompts:
                if time.monotonic() > deadline:
                    break
                for _ in range(asks_to_store):
                    send(client, url_on, text, "bench-latency", miss, expect="miss")
                send(client, url_off, text, "bench-latency", off, expect="-")
                settle(stack_on)  # the store runs after the response, in the background
                for _ in range(args.hit_repeats):
                    send(client, url_on, text, "bench-latency", hit, expect="hit")
            # Semantic hits: a paraphrase of a stored question (a MiniLM verification each).
            for i, s in enumerate(semantic):
                if time.monotonic() > deadline:
                    break
                for _ in range(asks_to_store):
                    send(client, url_on, s.pair.a, f"bench-semantic-{i}", sem_miss, expect="miss")
                settle(stack_on)
                state = send(client, url_on, s.pair.b, f"bench-semantic-{i}", sem_hit, expect="hit")
                if args.verbose:
                    print(f"    semantic {s.minilm:.3f} -> {state}: {s.pair.a!r} / {s.pair.b!r}")
            results["miss (cache on)"] = miss
            results["miss (cache off, baseline)"] = off
            results["exact hit (same request)"] = hit
            results["semantic hit (a paraphrase)"] = sem_hit
        # Rounds of distinct prompts; a round's size is a multiple of the concurrency, so each
        # connection (tenant) sends the same prompts, in the same order, to both stacks.
        size = len(tput_prompts) // args.rounds
        for stack in (stack_on, stack_off):
            wait_idle(stack.procs["extproc"].pid)
        starts = list(range(0, len(tput_prompts), size))
        counts_before = cache_counts(stack_on)
        # A round sends its chunk once a pass, each pass under new tenants (so its prompts miss
        # again), back to back: load sustained for the whole round, as saturation is (rounds of a
        # fraction of a second, each followed by the other stack's, would be a 50% duty cycle).
        tags = [f"tput{p}" for p in range(args.passes)]
        for r, first in enumerate(starts):
            chunk = tput_prompts[first : first + size]
            for name, stack in (("cache on", stack_on), ("cache off", stack_off)):
                part = throughput(stack, chunk, args.concurrency, min(args.tput_deadline_s, left()), tags, first)
                tput.setdefault(name, []).append(part)
                print(
                    f"  round {r + 1} {name:<9} {part.rps:>7.1f} req/s answered, {part.sustained_rps:>7.1f} req/s "
                    f"with the store drain ({part.drain_s:.2f}s; {len(part.timed.ms)} requests)",
                    flush=True,
                )
        counts = cache_counts(stack_on)
        counts.subtract(counts_before)
        print(f"  cache on  models after: {loaded_models(stack_on)}")
        print(f"  cache off models after: {loaded_models(stack_off)}")

    print("\nlatency, one request at a time, stream=true, authorization: Bearer <tenant>")
    for name, timed in results.items():
        print(timed.row(name))
    m50, h50 = pctl(results["miss (cache on)"].ms, 50), pctl(results["exact hit (same request)"].ms, 50)
    s50 = pctl(results["semantic hit (a paraphrase)"].ms, 50)
    print(f"  miss p50 / exact hit p50 = {m50 / h50:.0f}x; miss p50 / semantic hit p50 = {m50 / s50:.0f}x")
    print(
        f"\nthroughput: every request a miss, {len(tput_prompts)} distinct, mutually dissimilar prompts "
        + (f"sent {args.passes} times under new tenants each pass " if args.passes > 1 else "")
        + f"(MiniLM < {default_t:.2f}), stream=false (the demo upstream adds no delay to non-streamed replies), "
        f"{args.concurrency} keep-alive connections, tenant per connection; baseline: a second stack with "
        f"VSR_CACHE__ENABLED=false (same Envoy config, same requests), up at the same time, rounds interleaved; "
        f"cache on with admission: {args.admission}"
    )
    print(
        f"  est. {share:.0%} of the cache-on misses ran a MiniLM verification (an earlier prompt of the tenant "
        f"over the candidate floor {default_t - margin:.2f}; {share_wider:.0%} with margin {margin + 0.05:.2f}); "
        + {
            "first": "every miss is stored",
            "repeat": "admission: repeat, so only those misses (an earlier prompt passed the candidate stage) "
            "are stored",
            "adaptive": "admission: adaptive, so while the server's loop is busy only those misses are stored",
        }[args.admission]
    )
    stored = counts['stores{result="stored"}']
    unstored = counts['lookups{outcome="miss",reason="first_sight"}']
    print(f"  cache on, throughput phase: {stored} answers stored, {unstored} misses not stored (first sightings)")
    print(
        "  (answered: requests / time to the last answer; sustained: requests / (that + the time the server "
        "then stayed busy, i.e. the background stores))"
    )
    print(
        f"  {'':<10} {'answered req/s':>14} {'sustained req/s':>15} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7}"
        f" {'server CPU ms/req':>17} {'envoy CPU ms/req':>16}"
    )
    total = {name: merged(rounds) for name, rounds in tput.items()}
    for name, run in total.items():
        done = max(1, len(run.timed.ms))
        print(
            f"  {name:<10} {run.rps:>14.1f} {run.sustained_rps:>15.1f} {pctl(run.timed.ms, 50):>7.1f}"
            f" {pctl(run.timed.ms, 95):>7.1f} {max(run.timed.ms, default=0.0):>7.0f}"
            f" {run.server_cpu_s * 1000 / done:>17.2f} {run.envoy_cpu_s * 1000 / done:>16.2f}  [{run.timed.describe()}]"
        )
    on, off_r = total["cache on"], total["cache off"]
    for label, attr in (("answered", "rps"), ("sustained", "sustained_rps")):
        per_round = [
            getattr(a, attr) / getattr(b, attr)
            for a, b in zip(tput["cache on"], tput["cache off"], strict=True)
            if getattr(b, attr)
        ]
        if getattr(off_r, attr) and per_round:
            print(
                f"  ratio cache on / cache off, {label}: {getattr(on, attr) / getattr(off_r, attr):.2f} overall, "
                f"median of rounds {statistics.median(per_round):.2f} (rounds: "
                + ", ".join(f"{x:.2f}" for x in per_round)
                + ")"
            )
    if args.verbose:
        for name, run in total.items():
            print(f"  not 200 ({name}): " + "; ".join(repr(tput_prompts[i]) for i in sorted(run.timed.refused)))
        for name, lines in STACK_LINES.items():
            notes = [line for line in lines if re.search(r"timed? ?out|deadline|overload|\"ERROR\"", line, re.I)]
            print(
                f"  server timeouts/overload/errors ({name}): {len(notes)}"
                + "".join(f"\n    {n[:220]}" for n in notes[:6])
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY, help="cache.similarity is read from it")
    parser.add_argument("--margin", type=float, default=None, help="candidate margin (default: CacheSettings')")
    parser.add_argument("--quick", action="store_true", help="fewer requests and timing samples (< ~2 min)")
    parser.add_argument("--no-envoy", action="store_true", help="skip the Envoy part")
    parser.add_argument("--show", type=int, default=10, help="hardest pairs listed")
    parser.add_argument("--delay-ms", type=float, default=15.0, help="demo upstream delay between SSE chunks")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--verbose", action="store_true", help="print each semantic-hit probe")
    parser.add_argument(
        "--admission",
        choices=["adaptive", "first", "repeat"],
        default="adaptive",
        help="the cache-on stack's cache.admission (repeat: a question is stored when asked the second time; "
        "adaptive, the default: the first time while the server has headroom, the second while it is busy)",
    )
    parser.add_argument("--requests", type=int, default=None, help="throughput requests (default 400; quick 128)")
    parser.add_argument(
        "--passes",
        type=int,
        default=1,
        help="send the throughput prompts this many times, each pass under new tenants (still all misses; "
        "longer, steadier rounds, though MiniLM's text caches make later passes cheaper on both stacks)",
    )
    args = parser.parse_args()
    quick = args.quick
    args.requests = args.requests or (128 if quick else 400)
    args.latency_prompts = 8 if quick else 30
    args.hit_repeats = 3 if quick else 5
    args.semantic_pairs = 5 if quick else 20
    args.cost_texts = 30 if quick else 120
    args.cost_seconds = 1.0 if quick else 3.0
    args.tput_deadline_s = 30.0 if quick else 60.0  # per round and stack
    args.rounds = 2 if quick else 5  # interleaved on/off rounds; requests are trimmed to a multiple
    args.envoy_budget_s = 150.0 if quick else 420.0  # both stacks' phases, not counting start-up

    t0 = time.perf_counter()
    embedder = load_text_embedder(EmbedderSettings())
    static = StaticEmbedder(embedder)
    print(f"MiniLM ({embedder.model_dir.name}) and its static embedder loaded in {time.perf_counter() - t0:.1f}s")
    found = section_a(args, embedder, static)
    if not args.no_envoy:
        section_b(args, found)
    print(f"\ntotal {time.perf_counter() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
