"""Reasoning control: how a route's `reasoning: {mode, effort}` is written into the upstream body.

A model card's `reasoning_family` names a row of the families table (the built-in rows below,
plus the policy's own `reasoning_families`, which may add rows or replace built-in ones), so a
new model family is data, not code. A row says where its server reads the setting:

- `switch`: a dotted path to a boolean (`chat_template_kwargs.enable_thinking` for Qwen3,
  `chat_template_kwargs.thinking` for DeepSeek); `on` writes true, `off` writes the explicit
  false (these servers think by default);
- `effort`: a dotted path for the effort level in Chat bodies (`reasoning_effort`), and
  `responses_effort` in Responses bodies (`reasoning.effort`); `off_effort` is what `off`
  writes there when the family has no switch (None: the client's effort field is removed, so
  the server's default applies);
- `thinking`: how a Messages body (`/v1/messages` sent natively to a server that speaks it) is
  told: Anthropic's own field, `thinking: {type: enabled, budget_tokens: N}` for `on` (N from the
  row's budget per effort, 1024 / 4096 / 16384 by default) and `{type: disabled}` for `off`.
  Anthropic requires `max_tokens` > `budget_tokens`: a client's `max_tokens` at or under the
  budget becomes budget + `max_tokens` (the answer keeps the room the client asked for). Every
  built-in row but `none` has it (a Messages server maps the field to its model's template); a
  row with `thinking: null` writes its switch and effort paths into Messages bodies instead. A
  Messages request translated to Chat (an OpenAI-only upstream) is a Chat body: the Chat paths.

`keep` leaves the client's own fields alone. `on` / `off` replace them. The value of the
`x-vsr-reasoning` header says what was sent: `on:high`, `on`, `off`, `off:low`, `kept`, or
`none` (the family has no way to be told).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from extproc.protocol.formats import format_for
from extproc.protocol.request import ApiKind

Effort = Literal["low", "medium", "high"]
_PATH = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"


class ReasoningSetting(BaseModel):
    """A route action's reasoning: `on` (with an effort), `off`, or `keep` the client's fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["on", "off", "keep"]
    effort: Effort | None = None  # for `on`; families without an effort field ignore it

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: object) -> object:
        # YAML 1.1 reads a bare `on` / `off` as true / false: take them as the words they were.
        if value is True:
            return "on"
        if value is False:
            return "off"
        return value


class ThinkingBudgets(BaseModel):
    """Anthropic's `thinking.budget_tokens` for each effort (Anthropic's minimum is 1024)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low: int = Field(default=1024, ge=1024)
    medium: int = Field(default=4096, ge=1024)
    high: int = Field(default=16384, ge=1024)

    def budget(self, effort: Effort) -> int:
        return int(getattr(self, effort))


class ReasoningFamily(BaseModel):
    """One row of the families table: where a server reads the thinking switch and the effort."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    switch: str | None = Field(default=None, pattern=_PATH)
    effort: str | None = Field(default=None, pattern=_PATH)  # Chat (and Completions) bodies
    responses_effort: str | None = Field(default=None, pattern=_PATH)  # Responses bodies; None: `effort`
    default_effort: Effort = "medium"  # `on` without an effort, where the family has an effort field
    off_effort: Effort | None = None  # what `off` writes to the effort field when there is no switch
    # Messages bodies: Anthropic's `thinking` field with these budgets (None: the Chat paths instead).
    thinking: ThinkingBudgets | None = Field(default_factory=ThinkingBudgets)

    def effort_path(self, api: ApiKind) -> str | None:
        if format_for(api).reasoning_fields == "responses":
            return self.responses_effort or self.effort
        return self.effort


BUILTIN_FAMILIES: Mapping[str, ReasoningFamily] = {
    "qwen3": ReasoningFamily(switch="chat_template_kwargs.enable_thinking"),
    "deepseek": ReasoningFamily(switch="chat_template_kwargs.thinking"),
    "gpt_oss": ReasoningFamily(effort="reasoning_effort", responses_effort="reasoning.effort", off_effort="low"),
    "openai": ReasoningFamily(effort="reasoning_effort", responses_effort="reasoning.effort"),
    "anthropic": ReasoningFamily(),  # Messages-only servers: the `thinking` field, nothing in Chat bodies
    "none": ReasoningFamily(thinking=None),
}


def families(extra: Mapping[str, ReasoningFamily] | None = None) -> dict[str, ReasoningFamily]:
    """The built-in table with a policy's rows added (a policy row replaces a built-in one)."""
    return {**BUILTIN_FAMILIES, **(extra or {})}


def _set(body: dict[str, Any], path: str, value: object) -> None:
    """Set a dotted path, copying each nested object on the way (the parsed request stays as it was);
    a non-object in the way is replaced by an object."""
    parts = path.split(".")
    node = body
    for part in parts[:-1]:
        child = node.get(part)
        child = dict(child) if isinstance(child, dict) else {}
        node[part] = child
        node = child
    node[parts[-1]] = value


def _remove(body: dict[str, Any], path: str) -> None:
    parts = path.split(".")
    node = body
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            return
        child = dict(child)
        node[part] = child
        node = child
    node.pop(parts[-1], None)
    if len(parts) > 1 and not node:  # an object left empty goes too ("reasoning": {})
        _remove(body, ".".join(parts[:-1]))


def apply_reasoning(body: dict[str, Any], api: ApiKind, setting: ReasoningSetting, family: ReasoningFamily) -> str:
    """Write `setting` into `body` (in place; nested objects are copied) for a server of `family`.
    Returns the `x-vsr-reasoning` header value: what was sent."""
    if setting.mode == "keep":
        return "kept"
    if format_for(api).reasoning_fields == "thinking" and family.thinking is not None:
        return _write_thinking(body, setting, family, family.thinking)
    effort_path = family.effort_path(api)
    if family.switch is None and effort_path is None:
        return "none"
    if setting.mode == "on":
        sent = "on"
        if family.switch is not None:
            _set(body, family.switch, True)
        if effort_path is not None:
            effort = setting.effort or family.default_effort
            _set(body, effort_path, effort)
            sent = f"on:{effort}"
        return sent
    sent = "off"
    if family.switch is not None:
        _set(body, family.switch, False)
        if effort_path is not None:
            _remove(body, effort_path)
    elif effort_path is not None:
        if family.off_effort is not None:
            _set(body, effort_path, family.off_effort)
            sent = f"off:{family.off_effort}"
        else:
            _remove(body, effort_path)
    return sent


def _write_thinking(
    body: dict[str, Any], setting: ReasoningSetting, family: ReasoningFamily, budgets: ThinkingBudgets
) -> str:
    """Anthropic's `thinking` field for `on` / `off`, with `max_tokens` kept above the budget."""
    if setting.mode == "off":
        body["thinking"] = {"type": "disabled"}
        return "off"
    effort = setting.effort or family.default_effort
    budget = budgets.budget(effort)
    body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens <= budget:
        body["max_tokens"] = budget + max_tokens
    return f"on:{effort}"
