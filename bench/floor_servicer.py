"""The floor of a Python ext_proc server under Envoy: a bare grpc.aio servicer that routes every
buffered body to one cluster without reading it, answering with the same message the real
server builds (`extproc.server.mutations.route_request_body`: the body, its content-length, the
decision as `vsr` dynamic metadata), plus the gRPC health service Envoy's cluster checks.

    .venv/bin/python bench/floor_servicer.py --port 50061 --cluster general

What it costs per request under Envoy is what any Python grpcio ext_proc server pays before it
parses, classifies or decides anything: `bench/bench_envoy.py --floor` runs it beside the real
server and Envoy alone in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from extproc.server import mutations

MAX_MESSAGE = 64 * 1024 * 1024


class FloorServicer(ep_grpc.ExternalProcessorServicer):  # type: ignore[misc]
    def __init__(self, cluster: str, model: str) -> None:
        self.decision = {"cluster": cluster, "decision": "floor", "model": model, "signals": "none"}

    async def Process(self, request_iterator: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for request in request_iterator:
            if request.WhichOneof("request") == "request_body":
                yield mutations.route_request_body({}, request.request_body.body, self.decision)
            else:
                yield mutations.continue_phase(request.WhichOneof("request") or "")


async def serve(host: str, port: int, cluster: str, model: str) -> None:
    server = grpc.aio.server(
        options=[("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)]
    )
    ep_grpc.add_ExternalProcessorServicer_to_server(FloorServicer(cluster, model), server)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    for service in ("", "envoy.service.ext_proc.v3.ExternalProcessor"):
        await health.set(service, health_pb2.HealthCheckResponse.SERVING)
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"floor servicer on {host}:{port}, every body to {cluster}", flush=True)
    await stop.wait()
    await server.stop(1.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cluster", required=True, help="the Envoy cluster every request is routed to")
    parser.add_argument("--model", default="floor", help="the model name in the decision metadata")
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port, args.cluster, args.model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
