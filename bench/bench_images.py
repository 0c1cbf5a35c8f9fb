"""Cold one-image requests through Envoy, per image class: first wave, today and the new OCR, one run.

    .venv/bin/python bench/bench_images.py [--repeat N] [--no-first-wave]

Starts one real stack per OCR configuration on free loopback ports (demo upstreams, `extproc
serve` with the default policy, Envoy from the wheel): "first wave" (`VSR_OCR__PRESET=legacy`),
"today" (the fast pipeline with the fp32 detector, the default before the int8 one), "int8" (the
defaults: detection through the shipped int8 detector) and "gated" (the defaults plus the opt-in
cheap first look, `VSR_OCR__TEXT_GATE=true`). All run
on onnxruntime (`VSR_OCR__RUNTIME=onnxruntime`) unless `--runtime` says otherwise. Each image of
the OCR corpus (tests/corpus/images and the rendered scenes) is sent with a short question
("Summarize this", ...), with a fresh nonce in the image bytes every time (PNG text chunk / JPEG
comment) and in the question, so every request is a first sight: nothing comes from the OCR,
vision or text-embedding caches. Requests go one
at a time, the stacks taking turns per image (the first in turn rotating each repeat), so all
see the same machine load; the stacks not being measured sit idle.

Printed: per image and per class (identity document, code screenshot, form, text-free photo,
large medical image) the p50 latency of each stack and its ratio to the first wave's, the
upstream each request reached (the routing decision), and the server's RSS after the run.
Exits 1 when the int8 or gated stack routes any image elsewhere than today's, or a passport anywhere but
the restricted model (or shed: 429 under overload). On a host too busy to finish OCR inside the
request deadline every image is shed and the latencies say nothing: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_ocr import CLASSES  # noqa: E402
from bench.client import Client  # noqa: E402
from bench.load import peak_rss_mib, proc_figures, stack_config, with_nonce  # noqa: E402
from extproc.ops.stack import Stack  # noqa: E402
from extproc.testing.ocr_routing import corpus_images  # noqa: E402

POLICY = REPO / "policies" / "default.yaml"
ASKS = ["Summarize this", "What is in this picture?", "Describe the image, please", "what do you see here"]
_MIME = {b"\x89PNG": "image/png", b"\xff\xd8": "image/jpeg", b"RIFF": "image/webp", b"GIF8": "image/gif"}


def mime_of(data: bytes) -> str:
    return next(m for magic, m in _MIME.items() if data.startswith(magic))


def body_for(image: bytes, nonce: int) -> bytes:
    """The image with a question of its own: a repeated text would be embedded once, then cached."""
    uri = f"data:{mime_of(image)};base64,{base64.b64encode(image).decode()}"
    ask = f"{ASKS[nonce % len(ASKS)]} (request {nonce})"
    content = [{"type": "text", "text": ask}, {"type": "image_url", "image_url": {"url": uri}}]
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": content}]}).encode()


def send(client: Client, stack: Stack, body: bytes) -> tuple[float, int, str]:
    """One request on a new connection: (latency ms, status, the upstream that answered)."""
    reply = client.post(stack.base_url + "/v1/chat/completions", body, {"content-type": "application/json"})
    return reply.ms, reply.status, reply.headers.get("x-demo-upstream") or f"status {reply.status}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-first-wave", action="store_true", help="skip the first wave's stack")
    parser.add_argument("--runtime", default="onnxruntime", choices=["onnxruntime", "openvino", "auto"])
    parser.add_argument("--only", default="", help="comma-separated image names")
    args = parser.parse_args()

    configs = {
        "first wave": {"VSR_OCR__PRESET": "legacy"},
        "today": {"VSR_OCR__DET_PRECISION": "fp32"},
        "int8": {},
        "gated": {"VSR_OCR__TEXT_GATE": "true"},
    }
    if args.no_first_wave:
        del configs["first wave"]
    images = corpus_images()
    wanted = [x for names in CLASSES.values() for x in names]
    images = {k: v for k, v in images.items() if k in wanted and mime_of(v) in ("image/png", "image/jpeg")}
    if args.only:
        images = {k: v for k, v in images.items() if k in set(args.only.split(","))}
    stacks: dict[str, Stack] = {}
    client = Client(timeout_s=60, keep_alive=False)
    try:
        for name, env in configs.items():
            cfg = stack_config(POLICY)
            cfg.env.update({"VSR_OCR__RUNTIME": args.runtime, **env})
            stack = Stack(cfg, sink=lambda line: None)
            t0 = time.perf_counter()
            stack.start()
            stacks[name] = stack
            print(f"{name:10} stack up in {time.perf_counter() - t0:5.1f} s ({env or 'defaults'})", flush=True)
        for stack in stacks.values():  # one request each first: lazy model loads are not timed
            send(client, stack, body_for(with_nonce(images[next(iter(images))], 0), 0))
        times: dict[str, dict[str, list[float]]] = {n: {k: [] for k in images} for n in stacks}
        routes: dict[str, dict[str, set[str]]] = {n: {k: set() for k in images} for n in stacks}
        names = list(stacks)
        nonce = 1
        for rep in range(args.repeat):
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for image_name, data in images.items():
                for name in order:
                    nonce += 1
                    ms, _, upstream = send(client, stacks[name], body_for(with_nonce(data, nonce), nonce))
                    times[name][image_name].append(ms)
                    routes[name][image_name].add(upstream)
        pids = {n: s.procs["extproc"].pid for n, s in stacks.items()}
        rss = {n: (proc_figures(pid)[0], peak_rss_mib(pid)) for n, pid in pids.items()}
    finally:
        client.close()
        for stack in stacks.values():
            stack.stop()
    return report(names, args.repeat, list(images), times, routes, rss)


def report(
    names: list[str],
    repeat: int,
    images: list[str],
    times: dict[str, dict[str, list[float]]],
    routes: dict[str, dict[str, set[str]]],
    rss: dict[str, tuple[float, float]],
) -> int:
    """Print the figures; 1 when routing changed under the gate or a passport reached another model."""
    base = names[0]
    cols = "".join(f" {n + ' ms':>14}" for n in names) + "".join(f" {n + '/' + base[:5]:>12}" for n in names[1:])
    print(f"\ncold one-image request through Envoy, p50 of {repeat} (ms), stacks interleaved in one run")
    print(f"{'image':24}{cols}  upstream (today)")
    p50 = {n: {k: statistics.median(v) for k, v in times[n].items()} for n in names}
    for k in images:
        print(f"{k:24}" + "".join(f" {p50[n][k]:14.0f}" for n in names)
              + "".join(f" {p50[n][k] / p50[base][k]:12.2f}" for n in names[1:])
              + "  " + ",".join(sorted(routes.get("today", routes[base])[k])))  # fmt: skip
    print(f"\nper class (median of the images' p50, ms){'':8}{cols}")
    for cls, members in CLASSES.items():
        members = [x for x in members if x in images]
        if not members:
            continue
        med = {n: statistics.median(p50[n][x] for x in members) for n in names}
        print(f"{cls:22} {len(members):2}" + "".join(f" {med[n]:14.0f}" for n in names)
              + "".join(f" {med[n] / med[base]:12.2f}" for n in names[1:]))  # fmt: skip
    totals = {n: sum(p50[n].values()) for n in names}
    print(f"{'TOTAL (sum of p50)':25}" + "".join(f" {totals[n]:14.0f}" for n in names)
          + "".join(f" {totals[n] / totals[base]:12.2f}" for n in names[1:]))  # fmt: skip
    print("server RSS after the run / high-water (MiB): "
          + ", ".join(f"{n} {a:.0f}/{b:.0f}" for n, (a, b) in rss.items()))  # fmt: skip

    problems = []
    reference = "today" if "today" in routes else base
    for k in images:
        for candidate in ("int8", "gated"):
            if candidate in routes and routes[candidate][k] != routes[reference][k]:
                got, want = sorted(routes[candidate][k]), sorted(routes[reference][k])
                problems.append(f"{k}: {candidate} routed to {got}, {reference} to {want}")
        for name in names:  # shed (429, the policy's overload answer) is allowed; another model is not
            if k.startswith("passport") and routes[name][k] - {"restricted_vlm", "status 429"}:
                problems.append(f"{k}: a passport reached {sorted(routes[name][k])} ({name})")
    shed = {n: sum(1 for k in images for u in routes[n][k] if u == "status 429") for n in names}
    print("images answered 429 (shed: OCR could not finish before the request deadline) at least once: "
          + ", ".join(f"{n} {c}" for n, c in shed.items()))  # fmt: skip
    print(f"routing changed (int8 and gated vs {reference}) or passports misrouted: {len(problems)}")
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
