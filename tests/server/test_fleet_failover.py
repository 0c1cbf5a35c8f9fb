"""The store phase tells the fleet which model answered a failover route's request: Envoy's
attributes (the upstream host's address, the attempt count) against the ticket the request phase
left (the chosen model and its fallback). An answer from the fallback is the chosen model's failure
and a failover, counted on both models; without a fallback in the ticket nothing changes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from google.protobuf import struct_pb2

from extproc import headers as vsr
from extproc.fleet.state import Fleet
from extproc.policy.schema import ModelSpec
from extproc.server.response_store import ResponseStore, StoreState
from extproc.server.wire import fleet_ticket


@dataclass
class _Policy:
    models: list[ModelSpec]


@dataclass
class _Compiled:
    spec: _Policy


@dataclass
class _Router:
    policy: _Compiled


@dataclass
class _Backends:
    fleet: Fleet
    router: Any = None
    cache: Any = None
    conversations: Any = None
    observer: Any = None
    inference_paths: frozenset[str] = field(default_factory=frozenset)
    debug_headers: bool = False
    shed_wait_s: float = 0.0


MODELS = [
    ModelSpec(name="model-a", cluster="ca", address="127.0.0.1:9001"),
    ModelSpec(name="model-b", cluster="cb", address="127.0.0.1:9002"),
]


def store_message(
    model: str, fallback: str = "", *, status: int = 200, address: str = "", attempts: int | None = None
) -> Any:
    """The store phase's one message: the body chunk with the status and upstream attributes, and
    the decision metadata the request phase left (the fleet ticket, the failover target)."""
    message = ep.ProcessingRequest(response_body=ep.HttpBody(body=b"{}", end_of_stream=True))
    metadata = {vsr.FLEET_KEY: fleet_ticket(model)} | ({vsr.FLEET_FALLBACK_KEY: fallback} if fallback else {})
    message.metadata_context.filter_metadata[vsr.DECISION_NAMESPACE].update(metadata)
    attributes = struct_pb2.Struct()
    attributes.update({vsr.RESPONSE_CODE: status})
    if address:
        attributes.update({vsr.UPSTREAM_ADDRESS: address})
    if attempts is not None:
        attributes.update({vsr.UPSTREAM_ATTEMPTS: attempts})
    message.attributes[vsr.ATTRIBUTES_NAMESPACE].CopyFrom(attributes)
    return message


def report(backends: _Backends, message: Any) -> None:
    ResponseStore(backends).observe(message, "response_body", StoreState())  # type: ignore[arg-type]


def test_an_answer_from_the_fallback_counts_a_failover_on_both_models() -> None:
    fleet = Fleet(cooldown_after=2)
    backends = _Backends(fleet, router=_Router(_Compiled(_Policy(MODELS))))
    report(backends, store_message("model-a", "model-b", address="127.0.0.1:9002", attempts=2))
    snap = fleet.snapshot(["model-a", "model-b"])
    assert snap["model-a"]["failovers"] == 1 and snap["model-a"]["failures"] == 1
    assert snap["model-b"]["took_over"] == 1 and snap["model-b"]["failures"] == 0
    assert snap["model-b"]["latency_ms"] is None  # its time includes the failed attempt: no sample
    # the primary answering on the first attempt: an ordinary answer, no failover
    report(backends, store_message("model-a", "model-b", address="127.0.0.1:9001", attempts=1))
    snap = fleet.snapshot(["model-a"])
    assert snap["model-a"]["failovers"] == 1 and snap["model-a"]["requests"] == 2
    assert snap["model-a"]["latency_ms"] is not None


def test_the_attempt_count_decides_when_the_address_is_not_the_policy_one() -> None:
    fleet = Fleet()
    backends = _Backends(fleet, router=_Router(_Compiled(_Policy(MODELS))))
    # a hostname in the policy, an IP from Envoy: the second attempt is the retry on the fallback
    report(backends, store_message("model-a", "model-b", address="10.0.0.7:8000", attempts=2))
    assert fleet.snapshot(["model-a"])["model-a"]["failovers"] == 1
    report(backends, store_message("model-a", "model-b", address="10.0.0.7:8000", attempts=1))
    assert fleet.snapshot(["model-a"])["model-a"]["failovers"] == 1  # one attempt: the chosen model


def test_envoy_spilling_to_the_fallback_without_a_retry_is_a_failover_too() -> None:
    """Health checks or outlier detection ejected the primary: the aggregate sends the request
    straight to the fallback (one attempt). Its address says so; the chosen model is not credited."""
    fleet = Fleet(cooldown_after=1)
    backends = _Backends(fleet, router=_Router(_Compiled(_Policy(MODELS))))
    report(backends, store_message("model-a", "model-b", address="127.0.0.1:9002", attempts=1))
    snap = fleet.snapshot(["model-a", "model-b"])
    assert snap["model-a"]["failovers"] == 1 and snap["model-a"]["cooling_s"] > 0
    assert snap["model-b"]["took_over"] == 1


def test_a_ticket_without_a_fallback_is_read_as_before() -> None:
    fleet = Fleet()
    backends = _Backends(fleet, router=_Router(_Compiled(_Policy(MODELS))))
    ticket = fleet_ticket("model-a")
    assert ticket.endswith(" model-a") and abs(float(ticket.split(" ")[0]) - time.time()) < 5
    report(backends, store_message("model-a", address="127.0.0.1:9002", attempts=2))  # nothing to fail over to
    snap = fleet.snapshot(["model-a", "model-b"])
    assert snap["model-a"]["requests"] == 1 and snap["model-a"]["failovers"] == 0
    assert snap["model-b"]["requests"] == 0
    report(backends, store_message("model-a", "model-b", status=503, attempts=2))
    snap = fleet.snapshot(["model-a", "model-b"])
    assert snap["model-a"]["failures"] == 1 and snap["model-b"]["failures"] == 1  # both attempts failed
