"""The decision log: one JSON line per routed request, written by a background thread.

The request path only takes a snapshot (the outcome's decision row, `row.DecisionRow`, which
holds references to its frozen signal results and a few scalars, and the scalars the record keeps
of the request) and appends it to a bounded queue under a lock; serialisation, hashing
and file I/O happen on the writer thread, every `flush_interval_s`. When the queue is full
(by count, or by the bytes it holds) new records are dropped and counted, never waited for.

Privacy: a record holds the policy version, each signal's status / score / labels /
latency / error, the decision and model, latencies, and *hashes* of the request's text
and images (sha256), never the text or the images, unless `capture` is on, which adds the
request body (for full replay) and the signals' redacted evidence.

Files rotate at `max_bytes`: PATH -> PATH.1 -> ... -> PATH.N (`backups`). Each file
starts, and each policy change inside it is marked, with a `{"kind": "policy"}` record
naming the policy version and a hash of every signal's definition, so `extproc replay`
can tell which logged signal results the new policy can trust.

Record kinds (`"kind"`): `policy` (see above) and `request`:

    {"kind": "request", "ts": "...Z", "request_id": "...", "path": "/v1/chat/completions",
     "policy": "<version>", "decision": "...", "action": "route", "model": "...", "status": 200,
     "error": null, "request": {"api", "model", "stream", "text_segments", "messages", "tokens",
     "text_sha256", "images": [{"sha256", "format", "width", "height", "bytes"}], "remote_images",
     "tools", "turns"}, "signals": {"<name>": {"status", "latency_ms", "score"?, "labels"?, "error"?}},
     "timings_ms": {"parse", "signals", "decide", "total", "extproc"}}

A signal's `score` is left out when 0, `labels` keep only those above 0 and `error` is left
out when there is none (the engine reads absent and zero alike); its type is in the `policy`
record.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast

from extproc.observability.row import DecisionRow
from extproc.protocol.request import estimate_tokens
from extproc.settings import DecisionLogSettings

if TYPE_CHECKING:
    from extproc.outcome import RoutingOutcome
    from extproc.policy.load import CompiledPolicy
    from extproc.protocol.request import TextSegment
    from extproc.signals.base import SignalSpecBase

log = logging.getLogger(__name__)

RECORD_VERSION = 1


# -- the record types: what the writer emits and what replay reads ------------------------------
class SignalRecord(TypedDict):
    status: str
    latency_ms: float
    score: NotRequired[float]  # left out when 0
    labels: NotRequired[dict[str, float]]  # only labels above 0
    error: NotRequired[str | None]
    evidence: NotRequired[list[str]]  # capture only


class RequestSummary(TypedDict):
    api: str
    model: str | None
    stream: bool
    text_segments: int
    messages: int
    tokens: int
    text_sha256: str | None
    images: list[dict[str, Any]]
    remote_images: int
    tools: int  # how many tools the request declared
    turns: int


class RequestRecord(TypedDict):
    kind: Literal["request"]
    v: int
    ts: str
    request_id: str | None
    path: str
    policy: str
    decision: str | None
    action: str
    model: str | None
    status: int
    error: str | None
    request: RequestSummary | None
    signals: dict[str, SignalRecord]
    timings_ms: dict[str, float]
    body: NotRequired[str]  # capture only: the request body as text ...
    body_b64: NotRequired[str]  # ... or base64 when it is not UTF-8
    overload: NotRequired[str]  # "shed" (answered 429) or "fail_safe" (routed fail-safe)
    cache: NotRequired[str]  # the semantic cache: hit, miss or bypass (with why, e.g. "bypass:no-cache")
    reasoning: NotRequired[str]  # what the upstream was told about thinking (x-vsr-reasoning): on:high, off, kept
    selection: NotRequired[str]  # model selection's algorithm, choice and reason (x-vsr-selection)


class PolicySignalRecord(TypedDict):
    type: str
    spec_sha256: str
    on_error: str | None
    used: bool


class PolicyRecord(TypedDict):
    kind: Literal["policy"]
    v: int
    version: str
    path: str | None
    signals: dict[str, PolicySignalRecord]


LogRecord = RequestRecord | PolicyRecord
QUEUE_BYTES_BUDGET = 128 * 1024 * 1024  # text and captured bodies held by queued records
MAX_FIELD_CHARS = 200  # client-chosen strings kept in a record (the requested model) are cut here


@dataclass(slots=True)
class _Entry:
    """What the request path hands the writer: the decision row and what the log keeps of the
    request (references and scalars), nothing serialised."""

    row: DecisionRow
    body: bytes | None
    held: int
    # what the parsed request was; the defaults are a request that could not be parsed
    api: str | None = None
    requested_model: str | None = None
    stream: bool = False
    texts: list[TextSegment] | None = None
    images: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    remote_images: int = 0
    tools: int = 0
    turns: int = 0


class DecisionLog:
    def __init__(self, settings: DecisionLogSettings) -> None:
        if settings.path is None:
            raise ValueError("decision log needs a path")
        self.settings = settings
        self.path = Path(settings.path)
        self.capture = settings.capture
        self.written = 0
        self.dropped = 0
        self.rotations = 0
        self.write_errors = 0
        self._lock = threading.Lock()
        self._pending: list[_Entry] = []
        self._held = 0
        self._policies: dict[str, dict[str, Any]] = {}
        self._wake = threading.Event()
        self._closed = False
        self._file: IO[str] | None = None
        self._size = 0
        self._file_policy: str | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._open()
        self._thread = threading.Thread(target=self._run, name="decision-log", daemon=True)
        self._thread.start()
        log.info("decision log", extra={"path": str(self.path), "capture": self.capture})

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then close the file."""
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("decision log writer did not finish in %.1f s", timeout)
                return
        self._flush_pending()  # anything submitted after the writer's last pass
        if self._file is not None:
            self._file.close()
            self._file = None

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every record submitted so far is written (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                empty = not self._pending
            if empty and not self._writing:
                return True
            self._wake.set()
            time.sleep(0.01)
        return False

    # -- the request path -----------------------------------------------------------------------
    def register_policy(self, policy: CompiledPolicy) -> None:
        """Remember a policy's signal definitions, for the `policy` records (call on load and swap)."""
        signals: dict[str, PolicySignalRecord] = {}
        for spec in policy.spec.signals:
            signal = policy.signals.get(spec.name) or policy.derived.get(spec.name)  # derived: computed, not run
            signals[spec.name] = {
                "type": spec.type,
                "spec_sha256": signal_spec_hash(spec),
                "on_error": signal.on_error if signal is not None else spec.on_error,
                "used": signal is not None,
            }
        self._policies[policy.version] = {
            "kind": "policy",
            "v": RECORD_VERSION,
            "version": policy.version,
            "path": str(policy.path) if policy.path is not None else None,
            "signals": signals,
        }

    def submit(
        self,
        outcome: RoutingOutcome,
        *,
        request_id: str | None,
        path: str,
        body: bytes | None = None,
        extproc_ms: float | None = None,
        row: DecisionRow | None = None,
    ) -> bool:
        """Queue one record; False (and counted) when the queue is full. `row` is the outcome's
        decision row when the caller has built it already (the observer, for all its writers)."""
        if row is None:
            row = DecisionRow.of(outcome, request_id=request_id, path=path, extproc_ms=extproc_ms)
        request = outcome.request
        captured = body if self.capture and body is not None and len(body) <= self.settings.capture_max_bytes else None
        entry = _Entry(row=row, body=captured, held=len(captured) if captured is not None else 0)
        if request is not None:
            entry.api, entry.requested_model, entry.stream = request.api.value, request.model, request.stream
            entry.texts = request.texts
            entry.images = [(i.sha256, i.format, i.width, i.height, i.byte_size) for i in request.images]
            entry.remote_images, entry.tools = len(request.remote_images), len(request.tools)
            entry.turns = request.turn_count
            if not entry.images and body is not None:
                # the queued texts, estimated by the body's size (image bytes are not held)
                entry.held += len(body)
        held = entry.held
        with self._lock:
            if self._closed or len(self._pending) >= self.settings.queue_size or self._held + held > QUEUE_BYTES_BUDGET:
                self.dropped += 1
                return False
            self._pending.append(entry)
            self._held += held
        return True

    # -- the writer thread ----------------------------------------------------------------------
    _writing = False

    def _run(self) -> None:
        interval = self.settings.flush_interval_s
        while True:
            self._wake.wait(interval)
            self._wake.clear()
            self._flush_pending()
            if self._closed:
                self._flush_pending()
                return

    def _flush_pending(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
            self._held = 0
            self._writing = bool(batch)
        try:
            if batch:
                self._write(batch)
        finally:
            self._writing = False

    def _write(self, batch: list[_Entry]) -> None:
        lines: list[tuple[str, str]] = []  # (policy version, line)
        for entry in batch:
            try:
                policy = entry.row.policy or ""
                lines.append((policy, json.dumps(self._record(entry), ensure_ascii=False, separators=(",", ":"))))
            except Exception:  # a record must never take the writer down
                log.exception("decision log: could not serialise a record", extra={"request_id": entry.row.request_id})
                self.write_errors += 1
        try:
            for policy, line in lines:
                self._write_line(policy, line)
            if self._file is not None:
                self._file.flush()
        except OSError as exc:
            self.write_errors += 1
            log.error("decision log: write failed: %s", exc)

    def _write_line(self, policy: str, line: str) -> None:
        if self._file is None:
            self._open()
        if policy != self._file_policy:
            header = self._policies.get(policy, {"kind": "policy", "v": RECORD_VERSION, "version": policy})
            self._emit(json.dumps(header, separators=(",", ":")))
            self._file_policy = policy
        self._emit(line)
        self.written += 1

    def _emit(self, line: str) -> None:
        size = len(line.encode("utf-8")) + 1
        if self._size > 0 and self._size + size > self.settings.max_bytes:
            self._rotate()
            if self._file_policy is not None and not line.startswith('{"kind":"policy"'):
                header = self._policies.get(self._file_policy)
                if header is not None:
                    self._emit(json.dumps(header, separators=(",", ":")))
        assert self._file is not None
        self._file.write(line + "\n")
        self._size += size

    def _open(self) -> None:
        self._file = open(self.path, "a", encoding="utf-8", newline="\n")  # noqa: SIM115 - kept open
        self._size = self._file.tell()
        self._file_policy = None

    def _rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        backups = self.settings.backups
        if backups <= 0:
            os.unlink(self.path)
        else:
            for index in range(backups - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{index}")
                if older.exists():
                    os.replace(older, self.path.with_name(f"{self.path.name}.{index + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self.rotations += 1
        self._file = open(self.path, "a", encoding="utf-8", newline="\n")  # noqa: SIM115 - kept open
        self._size = 0

    def _record(self, e: _Entry) -> RequestRecord:
        request: RequestSummary | None = None
        if e.api is not None:
            texts = e.texts or []
            digest = hashlib.sha256()
            for segment in texts:
                digest.update(segment.role.value.encode())
                digest.update(b"\x00")
                digest.update(segment.text.encode("utf-8", "surrogatepass"))
                digest.update(b"\x00")
            request = {
                "api": e.api,
                "model": _cut(e.requested_model),
                "stream": e.stream,
                "text_segments": len(texts),
                "messages": len({s.message_index for s in texts}),
                "tokens": estimate_tokens(texts),
                "text_sha256": digest.hexdigest() if texts else None,
                "images": [
                    {"sha256": sha, "format": fmt, "width": w, "height": h, "bytes": n}
                    for sha, fmt, w, h, n in e.images
                ],
                "remote_images": e.remote_images,
                "tools": e.tools,
                "turns": e.turns,
            }
        row = e.row
        signals: dict[str, SignalRecord] = {}
        capture = self.capture
        for s in row.signals:
            # Defaults are left out (score 0, no labels above 0, no error): the engine reads them the same way.
            item: SignalRecord = {"status": s.status.value, "latency_ms": round(s.latency_ms, 3)}
            if s.score:
                item["score"] = round(s.score, 6)
            if s.labels:
                labels = {k: round(v, 6) for k, v in s.labels.items() if v > 0.0}
                if labels:
                    item["labels"] = labels
            if s.error is not None:
                item["error"] = _cut(s.error)
            if capture and s.evidence:
                item["evidence"] = list(s.evidence)
            signals[s.name] = item
        timings = {k: round(v, 3) for k, v in row.timings_ms.items()}
        if row.extproc_ms is not None:
            timings["extproc"] = round(row.extproc_ms, 3)
        record: RequestRecord = {
            "kind": "request",
            "v": RECORD_VERSION,
            "ts": _iso(row.ts),
            "request_id": row.request_id,
            "path": row.path,
            "policy": row.policy or "",
            "decision": row.decision,
            "action": row.action,
            "model": row.model,
            "status": row.status,
            "error": row.error,
            "request": request,
            "signals": signals,
            "timings_ms": timings,
        }
        if row.overload is not None:
            record["overload"] = row.overload
        if row.reasoning is not None:
            record["reasoning"] = row.reasoning
        if row.selection is not None:
            record["selection"] = row.selection
        if row.cache is not None:
            record["cache"] = row.cache
        if e.body is not None:
            try:
                record["body"] = e.body.decode("utf-8")
            except UnicodeDecodeError:
                record["body_b64"] = base64.b64encode(e.body).decode("ascii")
        return record


def signal_spec_hash(spec: SignalSpecBase) -> str:
    """A short hash of a signal's definition: replay compares it to tell changed signals."""
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]


def read_records(paths: Iterable[Path | str]) -> Iterator[LogRecord]:
    """Every record in the given decision-log files, in order; malformed lines and objects of an
    unknown kind are skipped (fields are read defensively by replay: the file may be edited)."""
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                line = line.strip()
                if not line:
                    continue
                with contextlib.suppress(ValueError):
                    data = json.loads(line)
                    if isinstance(data, dict) and data.get("kind") in ("request", "policy"):
                        yield cast(LogRecord, data)


def record_body(record: RequestRecord) -> bytes | None:
    """The captured request body of a `request` record, if capture was on."""
    body = record.get("body")
    if isinstance(body, str):
        return body.encode("utf-8", "surrogatepass")
    encoded = record.get("body_b64")
    if isinstance(encoded, str):
        return base64.b64decode(encoded)
    return None


def _cut(value: str | None) -> str | None:
    if value is None or len(value) <= MAX_FIELD_CHARS:
        return value
    return value[:MAX_FIELD_CHARS] + "..."


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"
