"""Text-only routing through Envoy + ext_proc, beside Envoy without ext_proc, in one run.

    .venv/bin/python bench/bench_envoy.py [--policy policies/default.yaml] [--duration 10]

One Envoy process gets two listeners: `vsr` (the ext_proc filter, routes by x-vsr-cluster,
exactly the generated config) and `plain` (no ext_proc, straight to the default cluster).
Both forward to the same upstream: a third listener on that Envoy answering with a fixed
chat completion (`--upstream demo` uses the Python demo upstreams instead), so the figures
are Envoy + ext_proc cost, not a model server's. The ext_proc server is the real one
(`extproc serve`) with the policy's cheap text signals.

Reported per path: p50 / p99 latency with one request at a time, then req/s at
`--concurrency` connections, with errors (any non-200 or transport failure). Targets on
2 CPU cores: <= 1.5 ms p50 added, >= 1,500 req/s, 0 errors.

`--distinct N` sends N distinct texts instead (variants of the four), so that no per-text cache
(the prompt-attack classifier keeps its scores by text) answers for a signal.

`--mix realistic` sends the realistic cold mix (`bench/text_mix.py`: 8,000 distinct texts from the
safety corpus's benign test rows, the domain corpus's test split and bench/data's everyday, routing
and cache sets), the mix the text-path figures in README's performance section are measured on.

`--floor` also measures the floor of Python gRPC: a second stack whose ext_proc server is
`bench/floor_servicer.py` (a bare grpc.aio servicer that routes every body to the default cluster
without reading it, with the real server's response message), in the same run: its share of
Envoy alone is the most any Python grpcio ext_proc server can reach on this machine.

`--without-classifier` (or `--baseline-policy P`) also compares the policy with a baseline: a
second stack (its own Envoy and server) on the baseline, both up at once, then `--rounds`
throughput rounds of each in alternation, so the host's other load weighs on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_safety import read_jsonl  # noqa: E402
from envoy_data_plane.envoy.config.core.v3 import DataSource  # noqa: E402
from envoy_data_plane.envoy.config.route.v3 import DirectResponseAction, Route, RouteAction, RouteMatch  # noqa: E402
from loadgen import LoadResult, build_request, run_load  # noqa: E402

from extproc.ops.envoy_config import (  # noqa: E402
    EnvoyOptions,
    bootstrap,
    default_cluster_of,
    http_connection_manager,
    listener,
    routes,
    to_plain,
    to_yaml,
    upstreams_from_policy,
)
from extproc.ops.stack import Stack, StackConfig, free_port, loopback_overrides  # noqa: E402

UPSTREAM_REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
)

TEXT_REQUESTS = [
    {"model": "auto", "messages": [{"role": "user", "content": "What is the capital of Australia, and why?"}]},
    {
        "model": "auto",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Write a haiku about the sea in autumn."},
        ],
    },
    {
        "model": "auto",
        "messages": [
            {"role": "user", "content": "Find the bug in this code:\n```python\ndef f(x):\n    return x / 0\n```"}
        ],
    },
    {"model": "auto", "messages": [{"role": "user", "content": "Summarize the plot of Hamlet in three sentences."}]},
]


def request_bodies(distinct: int, texts: list[str] | None = None) -> list[bytes]:
    """The text-only bodies in rotation: TEXT_REQUESTS (or one user message per text of `texts`),
    or `distinct` variants of them (a number appended to the last message), so that no text
    repeats and no per-text cache (the prompt-attack classifier's scores, for one) answers for a
    signal."""
    requests = (
        TEXT_REQUESTS if not texts else [{"model": "auto", "messages": [{"role": "user", "content": t}]} for t in texts]
    )
    if distinct <= 0:
        return [json.dumps(r).encode() for r in requests]
    bodies = []
    for i in range(distinct):
        request = json.loads(json.dumps(requests[i % len(requests)]))
        request["messages"][-1]["content"] += f" (question {i})"
        bodies.append(json.dumps(request).encode())
    return bodies


def read_texts(paths: list[Path]) -> list[str]:
    """The `text` of every row of these JSONL files (the everyday request sets, for one)."""
    return [row["text"] for path in paths for row in read_jsonl(path)]


def chat_payloads(port: int, bodies: list[bytes]) -> list[bytes]:
    """The raw HTTP requests posting `bodies` to the chat completions path on `port`."""
    return [build_request("127.0.0.1", port, "/v1/chat/completions", body) for body in bodies]


def bench_config(
    policy: Path, options: EnvoyOptions, plain_port: int, three_port: int, upstream_port: int, demo: dict[str, str]
) -> str:
    """The generated config (one ext_proc message a request) plus a listener with the earlier
    three-message flow, a no-ext_proc listener and (unless demo) a direct-response upstream."""
    if demo:
        upstreams = upstreams_from_policy(policy, demo)
    else:
        upstreams = [
            u.__class__(cluster=u.cluster, host="127.0.0.1", port=upstream_port, models=u.models)
            for u in upstreams_from_policy(policy, None)
        ]
    default = default_cluster_of(policy, upstreams)
    boot = bootstrap(upstreams, default, options)
    plain = http_connection_manager(
        [Route(match=RouteMatch(prefix="/"), route=RouteAction(cluster=default))],
        options,
        with_ext_proc=False,
        stat_prefix="plain",
    )
    assert boot.static_resources is not None
    boot.static_resources.listeners.append(listener("plain", "127.0.0.1", plain_port, plain, options))
    three_options = replace(options, flow="three_messages")
    three = http_connection_manager(routes(upstreams, default, three_options), three_options, stat_prefix="three")
    boot.static_resources.listeners.append(listener("three", "127.0.0.1", three_port, three, three_options))
    if not demo:
        reply = http_connection_manager(
            [
                Route(
                    match=RouteMatch(prefix="/"),
                    direct_response=DirectResponseAction(status=200, body=DataSource(inline_string=UPSTREAM_REPLY)),
                )
            ],
            options,
            with_ext_proc=False,
            stat_prefix="upstream",
        )
        boot.static_resources.listeners.append(listener("upstream", "127.0.0.1", upstream_port, reply, options))
    return to_yaml(to_plain(boot))


def row(name: str, lat: LoadResult, thr: LoadResult) -> str:
    return (
        f"{name:<22} {lat.percentile_ms(50):>8.3f} {lat.percentile_ms(99):>8.3f} {thr.rps:>10.0f} "
        f"{thr.percentile_ms(50):>9.2f} {thr.percentile_ms(99):>9.2f} {lat.errors + thr.errors:>7d}"
    )


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU of a process and its children (server workers); this process when None."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in children.read_text().split()] if children.exists() else []
    return own + sum(cpu_seconds(kid) for kid in kids)


def counters(admin_port: int | None) -> dict[str, float]:
    """The server's encoder counters (texts encoded, texts and jobs refused by admission) from /metrics."""
    if admin_port is None:
        return {}
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    wanted = ("vsr_encoder_texts_total", "vsr_heavy_refused_total")
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            found[name] = float(value)
    return found


async def measure(
    port: int, payloads: list[bytes], args: argparse.Namespace, pids: dict[str, int | None], start: int = 0
) -> tuple[LoadResult, LoadResult, dict[str, float], int]:
    """Latency at concurrency 1, then throughput; CPU ms per request of each process in the latter;
    and where in the payloads the next phase should start. Each phase starts where the one before
    stopped (from `start`), so with distinct texts no phase resends a text the server has just seen
    (no per-text cache answers for it) until the payloads wrap around."""
    warm = await run_load("127.0.0.1", port, payloads, concurrency=args.concurrency, total=args.warmup, start=start)
    sent = start + warm.count + warm.errors
    latency = await run_load("127.0.0.1", port, payloads, concurrency=1, total=args.latency_requests, start=sent)
    sent += latency.count + latency.errors
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    throughput = await run_load(
        "127.0.0.1", port, payloads, concurrency=args.concurrency, duration_s=args.duration, start=sent
    )
    cpu = {name: (cpu_seconds(pid) - before[name]) * 1000.0 / max(1, throughput.count) for name, pid in pids.items()}
    return latency, throughput, cpu, sent + throughput.count + throughput.errors + args.concurrency


class FloorStack(Stack):
    """A bench stack whose ext_proc server is bench/floor_servicer.py, routing every body to the
    policy's default cluster."""

    # The server's spawn, which both a stack start (servers started together) and `start_server`
    # call: overriding `start_server` alone left a stack start running the real server as the floor.
    def _spawn_server(self) -> None:
        cfg = self.config
        cluster = default_cluster_of(cfg.policy, upstreams_from_policy(cfg.policy, None))
        cmd = [sys.executable, str(Path(__file__).resolve().parent / "floor_servicer.py")]
        cmd += ["--host", cfg.envoy.ext_proc_host, "--port", str(cfg.envoy.ext_proc_port), "--cluster", cluster]
        self._spawn("extproc", cmd)


def bench_stack(
    policy: Path,
    args: argparse.Namespace,
    workdir: Path,
    logs: list[str],
    kind: type[Stack] = Stack,
    env: dict[str, str] | None = None,
) -> tuple[Stack, EnvoyOptions, int, int]:
    """A started stack for `policy`: Envoy with the bench listeners, the server (with `env`'s
    settings on top), the upstream."""
    options = EnvoyOptions(
        listener_port=free_port(), admin_port=free_port(), ext_proc_port=free_port(), access_log=False
    )
    plain_port, three_port, upstream_port = free_port(), free_port(), free_port()
    demo: dict[str, str] = loopback_overrides(policy) if args.upstream == "demo" else {}
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "envoy.yaml"
    config_path.write_text(bench_config(policy, options, plain_port, three_port, upstream_port, demo), encoding="utf-8")
    stack = kind(
        StackConfig(
            policy=policy.resolve(),
            envoy=options,
            upstream_overrides=demo,
            envoy_config=config_path,
            demo_upstreams=bool(demo),
            stream_delay_ms=0,
            env={
                "VSR_LOGGING__LEVEL": args.log_level,
                "VSR_SERVER__WORKERS": str(args.workers),
                "VSR_SERVER__EVENT_LOOP": args.event_loop,
                **(env or {}),
            },
            envoy_args=["--concurrency", str(args.envoy_concurrency)] if args.envoy_concurrency else [],
        ),
        sink=logs.append,
    )
    stack.start()
    return stack, options, plain_port, three_port


@dataclass
class Comparison:
    """Interleaved throughput rounds of two stacks (policy, baseline) up at the same time."""

    policy: list[LoadResult] = field(default_factory=list)
    baseline: list[LoadResult] = field(default_factory=list)
    policy_cpu_s: float = 0.0
    baseline_cpu_s: float = 0.0
    policy_envoy_cpu_s: float = 0.0
    baseline_envoy_cpu_s: float = 0.0

    def report(self, name: str, baseline_name: str) -> None:
        def total(results: list[LoadResult]) -> tuple[int, float]:
            return sum(r.count for r in results), sum(r.elapsed_s for r in results)

        (n_p, t_p), (n_b, t_b) = total(self.policy), total(self.baseline)
        ratios = [p.rps / b.rps for p, b in zip(self.policy, self.baseline, strict=True) if b.rps]
        overall = (n_p / t_p) / (n_b / t_b) if t_p and t_b and n_b else 0.0
        print(
            f"policy {name} vs the same {baseline_name}, {len(ratios)} interleaved rounds each (two stacks up at "
            f"once): {n_p / t_p if t_p else 0:.0f} vs {n_b / t_b if t_b else 0:.0f} req/s, {overall:.0%} of the "
            f"baseline's throughput (median of rounds {statistics.median(ratios) if ratios else 0:.0%}; rounds: "
            + ", ".join(f"{x:.0%}" for x in ratios)
            + f"); CPU ms per request, server {self.policy_cpu_s * 1000 / max(1, n_p):.3f} vs "
            f"{self.baseline_cpu_s * 1000 / max(1, n_b):.3f}, Envoy {self.policy_envoy_cpu_s * 1000 / max(1, n_p):.3f} "
            f"vs {self.baseline_envoy_cpu_s * 1000 / max(1, n_b):.3f}; errors "
            f"{sum(r.errors for r in self.policy + self.baseline)}"
        )
        for side, results in ((name, self.policy), (baseline_name, self.baseline)):
            bad: Counter[int] = Counter()
            for r in results:
                bad.update({k: v for k, v in r.statuses.items() if k != 200})
            if bad:
                print(f"non-200 statuses, {side}: {dict(sorted(bad.items()))}")


def compare(stack: Stack, baseline: Stack, args: argparse.Namespace, bodies: list[bytes]) -> Comparison:
    """Throughput of the one-message path on both stacks in alternating rounds (which goes first
    alternates too), so load from elsewhere on this host weighs on both alike."""
    result = Comparison()
    port = {id(s): s.config.envoy.listener_port for s in (stack, baseline)}
    payloads = {id(s): chat_payloads(port[id(s)], bodies) for s in (stack, baseline)}
    for s in (stack, baseline):
        asyncio.run(
            run_load("127.0.0.1", port[id(s)], payloads[id(s)], concurrency=args.concurrency, total=args.warmup)
        )
    round_s = max(1.0, args.duration / 2)
    for r in range(args.rounds):
        order = (stack, baseline) if r % 2 == 0 else (baseline, stack)
        for s in order:
            pid, envoy = s.procs["extproc"].pid, s.procs["envoy"].pid
            before, envoy_before = cpu_seconds(pid), cpu_seconds(envoy)
            load = asyncio.run(
                run_load("127.0.0.1", port[id(s)], payloads[id(s)], concurrency=args.concurrency, duration_s=round_s)
            )
            spent, envoy_spent = cpu_seconds(pid) - before, cpu_seconds(envoy) - envoy_before
            if s is stack:
                result.policy.append(load)
                result.policy_cpu_s += spent
                result.policy_envoy_cpu_s += envoy_spent
            else:
                result.baseline.append(load)
                result.baseline_cpu_s += spent
                result.baseline_envoy_cpu_s += envoy_spent
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", type=Path, default=REPO / "policies" / "default.yaml")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of the throughput phase, per path")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-requests", type=int, default=2000, help="sequential requests for p50/p99")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--envoy-concurrency", type=int, default=None, help="Envoy worker threads (default: cores)")
    parser.add_argument("--upstream", choices=["direct", "demo"], default="direct")
    parser.add_argument("--log-level", default="INFO", help="server log level (DEBUG logs every route)")
    parser.add_argument("--workers", type=int, default=1, help="ext_proc server processes (serve --workers)")
    parser.add_argument(
        "--event-loop", choices=["auto", "asyncio", "uvloop"], default="asyncio", help="server.event_loop"
    )
    parser.add_argument(
        "--baseline-policy",
        type=Path,
        help="also compare the one-message path with this policy: a second stack (its own Envoy and server) "
        "up at the same time, throughput rounds interleaved",
    )
    parser.add_argument(
        "--without-classifier",
        action="store_true",
        help="the baseline is --policy with its classifier signals and the rule leaves reading them removed",
    )
    parser.add_argument("--rounds", type=int, default=6, help="interleaved throughput rounds per policy")
    parser.add_argument(
        "--distinct",
        type=int,
        default=0,
        help="send this many distinct texts (variants of the 4 bodies) instead of the 4 in rotation, so no "
        "per-text cache answers; 40000 outlasts a throughput phase here",
    )
    parser.add_argument(
        "--texts",
        type=Path,
        nargs="+",
        help="JSONL files whose `text` fields are sent instead of the 4 bodies (e.g. bench/data/everyday_*.jsonl: "
        "the signals a real mix of requests wakes, not four prompts); with --distinct, numbered variants of them",
    )
    parser.add_argument(
        "--mix",
        choices=["realistic"],
        help="a named text mix instead of the 4 bodies (bench/text_mix.py); realistic: 8,000 distinct texts",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also measure a bare Python grpc.aio ext_proc servicer (bench/floor_servicer.py) on a second stack",
    )
    args = parser.parse_args()
    if args.baseline_policy is not None and args.without_classifier:
        parser.error("--baseline-policy or --without-classifier, not both")

    tmp = tempfile.TemporaryDirectory(prefix="vsr-bench-")
    baseline_path: Path | None = args.baseline_policy
    if args.without_classifier:
        from bench_safety import without_classifier

        document = without_classifier(yaml.safe_load(args.policy.read_text(encoding="utf-8")))
        baseline_path = Path(tmp.name) / f"{args.policy.stem}-without-classifier.yaml"
        baseline_path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")

    logs: list[str] = []
    print(f"starting Envoy + ext_proc server + upstream ({args.upstream}) ...", flush=True)
    started = time.perf_counter()
    started_stacks: list[Stack] = []
    try:
        admin_port = free_port()
        main_stack = bench_stack(
            args.policy, args, Path(tmp.name) / "main", logs, env={"VSR_SERVER__ADMIN_PORT": str(admin_port)}
        )
        started_stacks.append(main_stack[0])
        other = bench_stack(baseline_path, args, Path(tmp.name) / "baseline", logs) if baseline_path else None
        if other is not None:
            started_stacks.append(other[0])
        floor = bench_stack(args.policy, args, Path(tmp.name) / "floor", logs, FloorStack) if args.floor else None
    except Exception as exc:
        for running in started_stacks:
            running.stop()
        print("\n".join(logs[-40:]), file=sys.stderr)
        print(f"bench: could not start the stack: {exc}", file=sys.stderr)
        tmp.cleanup()
        return 1
    stack, options, plain_port, three_port = main_stack
    print(f"stack up in {time.perf_counter() - started:.1f}s on {os.cpu_count()} CPU cores", flush=True)
    if args.mix:
        from text_mix import MIXES

        mix_texts: list[str] | None = MIXES[args.mix]()
    else:
        mix_texts = read_texts(args.texts) if args.texts else None
    bodies = request_bodies(args.distinct, mix_texts)
    payloads_vsr = chat_payloads(options.listener_port, bodies)
    payloads_plain = chat_payloads(plain_port, bodies)
    payloads_three = chat_payloads(three_port, bodies)
    pids: dict[str, int | None] = {
        "envoy": stack.procs["envoy"].pid,
        "ext_proc": stack.procs["extproc"].pid,
        "loadgen": None,
    }
    comparison: Comparison | None = None
    try:
        *plain, plain_cpu, _ = asyncio.run(measure(plain_port, payloads_plain, args, pids))
        # The 3-message and 1-message listeners share one server: the latter goes on where the former stopped.
        *three, three_cpu, sent = asyncio.run(measure(three_port, payloads_three, args, pids))
        encoder_before = counters(admin_port)
        *vsr, vsr_cpu, _ = asyncio.run(measure(options.listener_port, payloads_vsr, args, pids, start=sent))
        encoder_after = counters(admin_port)
        floor_result: tuple[LoadResult, LoadResult, dict[str, float], int] | None = None
        if floor is not None:
            floor_stack, floor_options = floor[0], floor[1]
            payloads_floor = chat_payloads(floor_options.listener_port, bodies)
            floor_pids: dict[str, int | None] = {
                "envoy": floor_stack.procs["envoy"].pid,
                "ext_proc": floor_stack.procs["extproc"].pid,
                "loadgen": None,
            }
            floor_result = asyncio.run(measure(floor_options.listener_port, payloads_floor, args, floor_pids))
        if other is not None:
            comparison = compare(stack, other[0], args, bodies)
    finally:
        stack.stop()
        if other is not None:
            other[0].stop()
        if floor is not None:
            floor[0].stop()
        tmp.cleanup()

    print()
    print(
        f"latency: {args.latency_requests} sequential requests; throughput: {args.concurrency} connections "
        f"for {args.duration:.0f}s; {len(bodies)} text-only bodies in rotation"
        + (" (numbered variants: no text repeats)" if args.distinct else "")
    )
    print(f"{'path':<22} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>10} {'p50@c ms':>9} {'p99@c ms':>9} {'errors':>7}")
    print(row("envoy (no ext_proc)", *plain))
    print(row("ext_proc, 3 messages", *three))
    print(row("ext_proc, 1 message", *vsr))
    floor_paths: list[tuple[str, list[LoadResult]]] = []
    if floor_result is not None:
        print(row("bare servicer (floor)", floor_result[0], floor_result[1]))
        floor_paths.append(("floor", [floor_result[0], floor_result[1]]))
    base50 = plain[0].percentile_ms(50)
    errors = sum(r.errors for r in (*plain, *three, *vsr))
    print()
    for name, result in (("3 messages", three), ("1 message", vsr), *floor_paths):
        added = result[0].percentile_ms(50) - base50
        added99 = result[0].percentile_ms(99) - plain[0].percentile_ms(99)
        share = result[1].rps / plain[1].rps if plain[1].rps else 0.0
        print(
            f"{name:<11} added p50 {added:.3f} ms ({added / base50 if base50 else 0:.2f}x Envoy alone's p50; "
            f"target <= 2x), added p99 {added99:.3f} ms; throughput {share:.0%} of Envoy alone (target >= 35%)"
        )
    cpus = [("no ext_proc", plain_cpu), ("3 messages", three_cpu), ("1 message", vsr_cpu)]
    if floor_result is not None:
        cpus.append(("bare servicer, the floor", floor_result[2]))
    for name, cpu in cpus:
        parts = ", ".join(f"{k} {v:.3f}" for k, v in cpu.items())
        print(f"CPU ms per request ({name}): {parts}; total {sum(cpu.values()):.3f}")
    print(f"server CPU per request, 1 message: {vsr_cpu['ext_proc']:.3f} ms (target <= 0.45); errors: {errors}")
    # Warm-up, sequential and throughput phases: the warm-up's requests are counted as args.warmup.
    sent_1 = args.warmup + sum(r.count for r in vsr)
    delta = {k: (encoder_after[k] - encoder_before[k]) / max(1, sent_1) for k in encoder_after}
    print(
        f"1 message, all its phases: texts encoded a request {delta['vsr_encoder_texts_total']:.2f}, encoder "
        f"work refused by admission (would end after the deadline) a request {delta['vsr_heavy_refused_total']:.2f}"
    )
    if comparison is not None:
        comparison.report(
            args.policy.name, "without its classifier signals" if args.without_classifier else str(baseline_path)
        )
    load1 = os.getloadavg()[0]
    print(f"load average (1 min) at the end: {load1:.2f} on {os.cpu_count()} cores (others' work skews req/s)")
    bad = {k: v for r in (*plain, *three, *vsr) for k, v in r.statuses.items() if k != 200}
    if bad:
        print(f"non-200 statuses: {bad}")
    added = vsr[0].percentile_ms(50) - base50
    ok = added <= 2 * base50 and vsr[1].rps >= 0.35 * plain[1].rps and vsr_cpu["ext_proc"] <= 0.45 and errors == 0
    print("PASS" if ok else "MISS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
