"""The policy document: models, signals, decisions, the default decision (pydantic)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from extproc import headers as vsr
from extproc.policy.conditions import Condition, ConditionError, parse_condition
from extproc.policy.reasoning import ReasoningFamily, ReasoningSetting, families
from extproc.policy.selection_schema import ModelCost, SelectionSpec, check_route_selection
from extproc.signals.base import SignalSpecBase

NAME_PATTERN = r"^[A-Za-z0-9_.\-]+$"
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# Headers a plugin may not set: ours (x-vsr-*), framing, and HTTP/2 pseudo-headers.
_RESERVED_HEADERS = frozenset(
    {"content-length", "transfer-encoding", "host", "connection", "te", "upgrade", "keep-alive", "content-type"}
)


def _condition(raw: Any) -> Condition:
    """A rule's `when`, parsed (decisions and tool rules): a condition error as a validation error."""
    try:
        return parse_condition(raw)
    except ConditionError as exc:
        raise ValueError(str(exc)) from None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Modality = Literal["text", "image"]
# The APIs a model's server accepts. vLLM serves both OpenAI's and Anthropic's Messages
# (`/v1/messages`), so both is the default; a server without Messages says `[openai]` and the
# router translates Messages requests to Chat Completions (and the answers back) for it.
ApiName = Literal["openai", "anthropic"]


def _both_apis() -> list[ApiName]:
    return ["openai", "anthropic"]


def _text_only() -> list[Modality]:
    return ["text"]


class ModelSpec(_Strict):
    name: str = Field(min_length=1)
    cluster: str = Field(min_length=1, pattern=NAME_PATTERN)  # the Envoy cluster serving it
    modalities: list[Modality] = Field(default_factory=_text_only, min_length=1)
    context_window: int | None = Field(default=None, gt=0)
    upstream_model: str | None = None  # written into the body's `model`; defaults to `name`
    address: str | None = Field(default=None, pattern=r"^[^:\s]+:\d{1,5}$")  # host:port, for Envoy config generation
    description: str = ""
    # How its server is told to think: a row of the reasoning families table (None: not at all).
    reasoning_family: str | None = Field(default=None, pattern=NAME_PATTERN)
    api: list[ApiName] = Field(default_factory=_both_apis, min_length=1)
    # Model selection (`selection_schema`): its vLLM server's Prometheus endpoint, its price, and
    # the queue length past which a conversation leaves it.
    metrics_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    cost: ModelCost | None = None
    max_waiting: int | None = Field(default=None, ge=0)

    @field_validator("api")
    @classmethod
    def _speaks_openai(cls, api: list[ApiName]) -> list[ApiName]:
        # Only Messages -> Chat is translated: a model must take OpenAI requests.
        if "openai" not in api:
            raise ValueError("api must include 'openai' (Messages requests are translated to it, not the reverse)")
        return list(dict.fromkeys(api))

    def speaks(self, family: str) -> bool:
        """Whether its server takes requests of this API family (a format's `error_family`)."""
        return family in self.api

    @property
    def target_model(self) -> str:
        return self.upstream_model or self.name

    def accepts(self, modality: str) -> bool:
        return modality in self.modalities


class RouteAction(_Strict):
    type: Literal["route"]
    models: list[str] = Field(min_length=1)  # in order of preference; capability filtering falls back along it
    reasoning: ReasoningSetting | None = None  # None: the client's reasoning fields pass untouched
    selection: SelectionSpec = Field(default_factory=SelectionSpec)  # which capable candidate


class RejectAction(_Strict):
    type: Literal["reject"]
    status: int = Field(default=403, ge=400, le=599)
    message: str = Field(min_length=1)
    code: str = "policy_violation"


class ClarifyAction(_Strict):
    type: Literal["clarify"]
    message: str = Field(min_length=1)


Action = Annotated[RouteAction | RejectAction | ClarifyAction, Field(discriminator="type")]


class SystemPromptPlugin(_Strict):
    content: str = Field(min_length=1)
    mode: Literal["insert", "replace"] = "insert"  # insert before existing system text, or replace it


class Plugins(_Strict):
    system_prompt: SystemPromptPlugin | None = None
    set_headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("set_headers")
    @classmethod
    def _check_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            lowered = name.lower()
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid HTTP header name")
            if lowered.startswith(vsr.ROUTING_PREFIX) or lowered in _RESERVED_HEADERS:
                raise ValueError(f"header {name!r} is reserved and cannot be set by a plugin")
            if any(c in value for c in "\r\n\x00"):
                raise ValueError(f"header {name!r} value contains a control character")
        return {k.lower(): v for k, v in headers.items()}


class CacheSpec(_Strict):
    """A decision's semantic cache; a field left out takes the policy-wide value."""

    enabled: bool | None = None
    similarity: float | None = Field(default=None, gt=0.0, le=1.0)  # MiniLM cosine of the last user turns
    ttl_s: int | None = Field(default=None, ge=1, le=30 * 86400)


class CachePolicy(_Strict):
    """The policy-wide cache defaults. `shared`: requests without a tenant key share one
    partition (off: they are neither looked up nor stored)."""

    enabled: bool = False
    similarity: float = Field(default=0.93, gt=0.0, le=1.0)
    ttl_s: int = Field(default=3600, ge=1, le=30 * 86400)
    shared: bool = False


class CacheRule(_Strict):
    """The cache as it applies to one decision (resolved from the decision and the policy)."""

    decision: str
    similarity: float
    ttl_s: int
    shared: bool


class Decision(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str = Field(min_length=1, pattern=NAME_PATTERN)
    description: str = ""
    priority: int
    when: Condition
    action: Action
    plugins: Plugins = Field(default_factory=Plugins)
    # Fail-safe under overload: a signal of this rule that timed out (the heavy executor could not
    # answer before the deadline) counts as a match for this decision only, so e.g. an image whose
    # OCR could not run in time goes to the restricted model rather than past the identity check.
    fail_safe: bool = False
    # Under overload with `overload.action: shed`, a decision left undecided by a timed-out signal
    # sheds the request (`policy`), or is passed over so the next decisions are tried (`skip`: for
    # routing rules such as subject routing, where a lesser route beats a 429).
    on_overload: Literal["policy", "skip"] = "policy"
    # Conversations: a follow-up this decision routes goes to the model that served the
    # conversation (`conversations`); false: this decision moves it (safety routes).
    sticky: bool = True
    # The semantic cache for requests this decision routes. A decision with restricted handling
    # (fail_safe) is cached only when its own spec says `enabled: true`, never by the default.
    cache: CacheSpec | None = None

    @field_validator("when", mode="before")
    @classmethod
    def _parse_when(cls, raw: Any) -> Condition:
        return _condition(raw)


class ToolRule(_Strict):
    """A rule over one tool call: the model's (in an upstream answer) or an MCP `tools/call`.

    The call's name and arguments (and, for an answer, its text) are what the signals read: the
    arguments' string values and the text are presented as the user text of a one-message
    request, and the call's name as its one tool call, so the request's signals (pii, secrets,
    the classifier, keywords, tools) apply unchanged. The first true rule, by priority, acts:
    `block` (the client gets a refusal, MCP a JSON-RPC error), `redact` (PII and secret spans in
    the arguments masked), `annotate` (headers only) or `allow` (stop looking).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str = Field(min_length=1, pattern=NAME_PATTERN)
    description: str = ""
    priority: int
    when: Condition
    action: Literal["allow", "block", "redact", "annotate"]
    message: str = "This tool call was blocked by the gateway's policy."

    @field_validator("when", mode="before")
    @classmethod
    def _parse_when(cls, raw: Any) -> Condition:
        return _condition(raw)


class McpServer(_Strict):
    """An MCP server behind Envoy: its cluster and the tools it serves (globs; first match wins)."""

    name: str = Field(min_length=1, pattern=NAME_PATTERN)
    cluster: str = Field(min_length=1, pattern=NAME_PATTERN)
    address: str | None = Field(default=None, pattern=r"^[^:\s]+:\d{1,5}$")
    tools: list[str] = Field(default_factory=lambda: ["*"])


class McpSpec(_Strict):
    path: str = Field(default="/mcp", pattern=r"^/[A-Za-z0-9_./\-]*$")
    servers: list[McpServer] = Field(default_factory=list)


class OverloadSpec(_Strict):
    """What a request whose decision depends on a timed-out signal gets, when no fail-safe decision
    takes it first: `shed` answers 429 with Retry-After (the client tries again later); `decide`
    decides on the unknowns as usual (no rule fires on an unknown)."""

    action: Literal["shed", "decide"] = "decide"
    retry_after_s: int = Field(default=2, ge=1, le=3600)


class DefaultDecision(_Strict):
    name: str = Field(default="general", min_length=1, pattern=NAME_PATTERN)
    description: str = ""
    action: Action
    plugins: Plugins = Field(default_factory=Plugins)
    cache: CacheSpec | None = None
    sticky: bool = True


class ConversationPolicy(_Strict):
    """Conversations keep their model (`extproc.conversations`): a Responses follow-up
    (`previous_response_id`) and, with `session_header`, any request carrying that header go to
    the model that served the conversation, unless the winning decision says `sticky: false`."""

    enabled: bool = True
    session_header: str | None = Field(default=None, pattern=r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
    ttl_s: int = Field(default=86400, ge=1, le=30 * 86400)

    @field_validator("session_header")
    @classmethod
    def _lower(cls, name: str | None) -> str | None:
        if name is not None and name.lower().startswith(vsr.ROUTING_PREFIX):
            raise ValueError(f"session_header {name!r}: x-vsr-* headers are the router's own")
        return name.lower() if name is not None else None


class Policy(_Strict):
    version: Literal[1] = 1
    name: str = "policy"
    description: str = ""
    # Requested `model` values that mean "route me" (case-insensitive).
    aliases: list[str] = Field(default_factory=lambda: ["auto"])
    # Policy models a client may pick by name; honoured only when no decision rule fires.
    client_models: list[str] = Field(default_factory=list)
    # A `model` that is neither an alias nor a policy model: `reject` answers 404 model_not_found
    # in the API's own shape (OpenAI's behaviour); `auto` routes it as an alias; `header` routes it
    # and says so (x-vsr-unknown-model).
    unknown_models: Literal["reject", "auto", "header"] = "reject"
    signal_timeout_ms: float = Field(default=1000.0, gt=0)
    # Status when a signal with `on_error: reject` cannot answer.
    signal_failure_status: int = Field(default=503, ge=400, le=599)
    overload: OverloadSpec = Field(default_factory=OverloadSpec)
    cache: CachePolicy = Field(default_factory=CachePolicy)
    models: list[ModelSpec] = Field(min_length=1)
    # Agents: rules over tool calls in upstream answers and MCP tools/call, highest priority first.
    tool_rules: list[ToolRule] = Field(default_factory=list)
    mcp: McpSpec = Field(default_factory=McpSpec)
    conversations: ConversationPolicy = Field(default_factory=ConversationPolicy)
    signals: list[SignalSpecBase] = Field(default_factory=list)
    decisions: list[Decision] = Field(default_factory=list)
    default: DefaultDecision
    # Reasoning families beside the built-in ones (qwen3, deepseek, gpt_oss, openai, anthropic, none).
    reasoning_families: dict[str, ReasoningFamily] = Field(default_factory=dict)

    def model(self, name: str) -> ModelSpec | None:
        return next((m for m in self.models if m.name == name), None)

    def reasoning_family(self, model: ModelSpec) -> ReasoningFamily:
        """The families-table row of `model` (the `none` row when it names none)."""
        table = families(self.reasoning_families)
        return table[model.reasoning_family or "none"]

    @model_validator(mode="after")
    def _check_reasoning(self) -> Policy:
        table = families(self.reasoning_families)
        for model in self.models:
            if model.reasoning_family is not None and model.reasoning_family not in table:
                raise ValueError(
                    f"model {model.name!r}: unknown reasoning_family {model.reasoning_family!r}; "
                    f"known: {', '.join(sorted(table))}"
                )
        return self

    def sticky(self, decision: str | None) -> bool:
        """Whether a follow-up this decision routes stays on the conversation's model."""
        if decision == self.default.name:
            return self.default.sticky
        found = next((d for d in self.decisions if d.name == decision), None)
        return found.sticky if found is not None else True

    @model_validator(mode="after")
    def _check_selection(self) -> Policy:
        rules: list[Decision | DefaultDecision] = [*self.decisions, self.default]
        for rule in rules:
            if isinstance(rule.action, RouteAction):
                check_route_selection(rule.name, rule.action.models, rule.action.selection)
        return self

    @model_validator(mode="after")
    def _check_cache(self) -> Policy:
        rules: list[Decision | DefaultDecision] = [*self.decisions, self.default]
        for rule in rules:
            if rule.cache is not None and rule.cache.enabled and rule.action.type != "route":
                raise ValueError(
                    f"decision {rule.name!r}: cache is enabled but its action is {rule.action.type}; "
                    "only routed answers can be cached"
                )
        return self

    def cache_for(self, decision: str | None) -> CacheRule | None:
        """The cache rule for a routed decision, or None when its answers are not cached."""
        rule: Decision | DefaultDecision | None = self.default if decision == self.default.name else None
        if rule is None:
            rule = next((d for d in self.decisions if d.name == decision), None)
        if rule is None or rule.action.type != "route":
            return None
        spec = rule.cache or CacheSpec()
        restricted = isinstance(rule, Decision) and rule.fail_safe
        enabled = spec.enabled if spec.enabled is not None else (self.cache.enabled and not restricted)
        if not enabled:
            return None
        return CacheRule(
            decision=rule.name,
            similarity=spec.similarity if spec.similarity is not None else self.cache.similarity,
            ttl_s=spec.ttl_s if spec.ttl_s is not None else self.cache.ttl_s,
            shared=self.cache.shared,
        )
