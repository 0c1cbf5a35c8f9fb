"""One tool call judged by a policy's tool rules (signals of real types: secrets, pii, keyword,
tools) and its arguments redacted: argument strings, the one-message request, the strictest
verdict across calls, rule priority, `allow`, matched signals; redaction keeping JSON valid."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

import pytest

from extproc.agents.tool_calls import (
    MAX_STRINGS,
    ToolCall,
    Verdict,
    argument_strings,
    as_request,
    judge_calls,
    redact_arguments,
    redact_text,
)
from extproc.detectors.pii import find_pii
from extproc.policy.load import CompiledPolicy
from extproc.protocol.request import ApiKind, Role
from extproc.signals.base import BuildContext

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
# What the default policy's `identity_pii` (pii, entities [passport, us_ssn]) finds: a US
# passport's 9 digits next to a "passport number" phrase, and a formatted SSN.
PASSPORT_TEXT = "passport number 123456789"
SSN = "123-45-6789"
CARD = 4111111111111111  # Luhn-valid Visa test number

POLICY = """
signals:
  - {name: leaked_secret, type: secrets}
  - {name: identity_pii, type: pii, entities: [passport, us_ssn]}
  - {name: risky_words, type: keyword, keywords: [delete, drop table]}
  - {name: shell_tool, type: tools, called: ["*shell*", bash]}
  - {name: memory_write, type: tools, called: ["save_memory*", "remember*"]}
  - {name: trusted_tool, type: tools, called: ["vault_*"]}
  - {name: audited_tool, type: tools, called: ["audit_*"]}
  - {name: stored, type: tools, store: true}
tool_rules:
  - {name: shell_block, priority: 400, when: {signal: shell_tool}, action: block, message: "No shell here."}
  - {name: audit_annotate, priority: 350, when: {signal: audited_tool}, action: annotate}
  - {name: vault_allow, priority: 300, when: {signal: trusted_tool}, action: allow}
  - {name: secret_block, priority: 200, when: {signal: leaked_secret}, action: block, message: "No credentials."}
  - name: memory_redact
    priority: 100
    when: {all: [{any: [{signal: memory_write}, {signal: stored}]}, {signal: identity_pii}]}
    action: redact
  - {name: risky_annotate, priority: 50, when: {signal: risky_words}, action: annotate}
default:
  action: {type: route, models: [text-model]}
"""

NO_RULES = """
signals:
  - {name: leaked_secret, type: secrets}
decisions:
  - {name: secret, priority: 10, when: {signal: leaked_secret}, action: {type: route, models: [big-text]}}
default:
  action: {type: route, models: [text-model]}
"""


@pytest.fixture
def policy(compile_policy: Callable[..., CompiledPolicy]) -> CompiledPolicy:
    return compile_policy(POLICY)


def args(**values: object) -> str:
    return json.dumps(values)


SHELL = ToolCall("run_shell", args(cmd="ls"), "c-shell")
SECRET = ToolCall("upload", args(body=f"key {AWS_KEY}"), "c-secret")
MEMORY_PII = ToolCall("save_memory", args(note=f"my {PASSPORT_TEXT}"), "c-mem")
RISKY = ToolCall("db_query", args(sql="delete from users"), "c-risky")
HARMLESS = ToolCall("get_weather", args(city="Paris"), "c-ok")


# -- argument strings and the request a call is read as ----------------------------------------


def test_argument_strings_reads_keys_and_nested_values_in_order() -> None:
    arguments = json.dumps({"a": "x", "b": {"c": ["y", {"d": "z"}], "e": 7, "f": 2.5}, "g": True, "h": None})
    assert argument_strings(arguments) == ["a", "x", "b", "c", "y", "d", "z", "e", "7", "f", "2.5", "g", "h"]


def test_argument_strings_reads_keys_but_leaves_out_booleans_and_null() -> None:
    # a key is text the tool receives: a secret smuggled as a key is read like a value
    assert argument_strings(json.dumps({"AKIAIOSFODNN7EXAMPLE": False, "other": None})) == ["AKIAIOSFODNN7EXAMPLE", "other"]


def test_argument_strings_of_non_json_is_the_raw_text() -> None:
    assert argument_strings("rm -rf / {not json") == ["rm -rf / {not json"]
    assert argument_strings("") == []


def test_argument_strings_of_a_scalar_json_document() -> None:
    assert argument_strings('"just a string"') == ["just a string"]
    assert argument_strings("42") == ["42"]


def test_argument_strings_are_capped() -> None:
    many = json.dumps([str(i) for i in range(MAX_STRINGS + 500)])
    strings = argument_strings(many)
    assert len(strings) == MAX_STRINGS
    assert strings[:3] == ["0", "1", "2"]


def test_as_request_is_one_user_message_with_the_call_as_its_tool_call() -> None:
    request = as_request(ToolCall("save_memory", args(note="hello", n=3)), text="Sure, saving.")
    assert request.api is ApiKind.CHAT
    assert len(request.texts) == 1
    segment = request.texts[0]
    assert segment.role is Role.USER and segment.message_index == 0
    assert segment.text == "save_memory\nnote\nhello\nn\n3\nSure, saving."
    assert request.tool_call_names == ["save_memory"]
    assert request.tool_call_count == 1
    assert request.turn_count == 1
    assert request.stores is False
    assert request.tools == []


def test_as_request_carries_store() -> None:
    assert as_request(ToolCall("x", "{}"), store=True).stores is True


def test_as_request_of_a_nameless_call_has_no_tool_call() -> None:
    request = as_request(ToolCall("", ""), text="only the answer's text")
    assert request.tool_call_names == [] and request.tool_call_count == 0
    assert request.joined_text() == "only the answer's text"


# -- judging ---------------------------------------------------------------------------------------


async def test_no_tool_rules_gives_action_none(
    compile_policy: Callable[..., CompiledPolicy], build_ctx: BuildContext
) -> None:
    policy = compile_policy(NO_RULES)
    verdict = await judge_calls(policy, build_ctx.executor, [SECRET, SHELL])
    assert verdict == Verdict()
    assert verdict.action == "none" and verdict.rule is None and verdict.matched == []
    assert verdict.headers() == {}


async def test_a_call_no_rule_fires_on_gives_none(policy: CompiledPolicy, build_ctx: BuildContext) -> None:
    verdict = await judge_calls(policy, build_ctx.executor, [HARMLESS])
    assert verdict.action == "none" and verdict.rule is None
    assert verdict.headers() == {}


@pytest.mark.parametrize(
    ("call", "action", "rule"),
    [
        (SHELL, "block", "shell_block"),
        (SECRET, "block", "secret_block"),
        (MEMORY_PII, "redact", "memory_redact"),
        (RISKY, "annotate", "risky_annotate"),
    ],
)
async def test_each_rule_on_its_own(
    policy: CompiledPolicy, build_ctx: BuildContext, call: ToolCall, action: str, rule: str
) -> None:
    verdict = await judge_calls(policy, build_ctx.executor, [call])
    assert (verdict.action, verdict.rule) == (action, rule)
    assert verdict.headers() == {"x-vsr-tool-rule": rule, "x-vsr-tool-action": action}


async def test_block_verdict_carries_the_rules_message(policy: CompiledPolicy, build_ctx: BuildContext) -> None:
    assert (await judge_calls(policy, build_ctx.executor, [SHELL])).message == "No shell here."
    assert (await judge_calls(policy, build_ctx.executor, [SECRET])).message == "No credentials."


@pytest.mark.parametrize("order", list(itertools.permutations([HARMLESS, RISKY, MEMORY_PII, SECRET])))
async def test_strictest_verdict_across_calls_wins_in_any_order(
    policy: CompiledPolicy, build_ctx: BuildContext, order: tuple[ToolCall, ...]
) -> None:
    verdict = await judge_calls(policy, build_ctx.executor, list(order))
    assert (verdict.action, verdict.rule) == ("block", "secret_block")
    # The matched signals are those of the deciding call.
    assert verdict.matched == ["leaked_secret"]


@pytest.mark.parametrize("order", [[RISKY, MEMORY_PII], [MEMORY_PII, RISKY]])
async def test_redact_beats_annotate_across_calls(
    policy: CompiledPolicy, build_ctx: BuildContext, order: list[ToolCall]
) -> None:
    verdict = await judge_calls(policy, build_ctx.executor, order)
    assert (verdict.action, verdict.rule) == ("redact", "memory_redact")
    assert verdict.matched == ["identity_pii", "memory_write"]


async def test_within_one_call_the_highest_priority_rule_decides(
    policy: CompiledPolicy, build_ctx: BuildContext
) -> None:
    # Shell (400) and a secret (200): both block; the higher-priority rule is named.
    call = ToolCall("run_shell", args(cmd=f"export AWS_ACCESS_KEY_ID={AWS_KEY}"))
    verdict = await judge_calls(policy, build_ctx.executor, [call])
    assert (verdict.action, verdict.rule) == ("block", "shell_block")
    assert verdict.matched == ["leaked_secret", "shell_tool"]
    # A memory write with PII (redact, 100) that also says "delete" (annotate, 50).
    call = ToolCall("save_memory", args(note=f"delete my old {PASSPORT_TEXT}"))
    verdict = await judge_calls(policy, build_ctx.executor, [call])
    assert (verdict.action, verdict.rule) == ("redact", "memory_redact")
    assert verdict.matched == ["identity_pii", "memory_write", "risky_words"]
    # A memory write with a credential: block (200) over redact (100).
    call = ToolCall("save_memory", args(note=f"{PASSPORT_TEXT} and {AWS_KEY}"))
    verdict = await judge_calls(policy, build_ctx.executor, [call])
    assert (verdict.action, verdict.rule) == ("block", "secret_block")


async def test_higher_priority_rule_wins_even_when_less_strict(policy: CompiledPolicy, build_ctx: BuildContext) -> None:
    # audit_annotate (350) fires first for this call, so its secret (block at 200) is not reached.
    call = ToolCall("audit_log", args(entry=f"rotated {AWS_KEY}"))
    verdict = await judge_calls(policy, build_ctx.executor, [call])
    assert (verdict.action, verdict.rule) == ("annotate", "audit_annotate")
    assert verdict.matched == ["audited_tool", "leaked_secret"]


async def test_allow_at_higher_priority_stops_a_lower_block_for_that_call(
    policy: CompiledPolicy, build_ctx: BuildContext
) -> None:
    call = ToolCall("vault_put", args(value=AWS_KEY))
    verdict = await judge_calls(policy, build_ctx.executor, [call])
    assert (verdict.action, verdict.rule) == ("allow", "vault_allow")
    assert verdict.matched == ["leaked_secret", "trusted_tool"]
    assert verdict.headers() == {"x-vsr-tool-rule": "vault_allow", "x-vsr-tool-action": "allow"}


@pytest.mark.parametrize("first_allowed", [True, False])
async def test_allow_for_one_call_does_not_excuse_another(
    policy: CompiledPolicy, build_ctx: BuildContext, first_allowed: bool
) -> None:
    allowed = ToolCall("vault_put", args(value=AWS_KEY))
    calls = [allowed, SECRET] if first_allowed else [SECRET, allowed]
    verdict = await judge_calls(policy, build_ctx.executor, calls)
    assert (verdict.action, verdict.rule) == ("block", "secret_block")


async def test_shell_block_is_higher_than_vault_allow(policy: CompiledPolicy, build_ctx: BuildContext) -> None:
    # "vault_shell" matches both the allow (300) and the shell block (400): the block is first.
    verdict = await judge_calls(policy, build_ctx.executor, [ToolCall("vault_shell", "{}")])
    assert (verdict.action, verdict.rule) == ("block", "shell_block")


async def test_call_names_match_case_insensitively(policy: CompiledPolicy, build_ctx: BuildContext) -> None:
    verdict = await judge_calls(policy, build_ctx.executor, [ToolCall("Run_SHELL", "{}")])
    assert verdict.rule == "shell_block"


async def test_answer_text_without_calls_is_judged_as_a_nameless_call(
    policy: CompiledPolicy, build_ctx: BuildContext
) -> None:
    verdict = await judge_calls(policy, build_ctx.executor, [], text="I will delete the table now.")
    assert (verdict.action, verdict.rule) == ("annotate", "risky_annotate")
    assert verdict.matched == ["risky_words"]
    assert (await judge_calls(policy, build_ctx.executor, [], text="All good.")).action == "none"


async def test_answer_text_is_read_with_the_calls(policy: CompiledPolicy, build_ctx: BuildContext) -> None:
    verdict = await judge_calls(policy, build_ctx.executor, [HARMLESS], text=f"use {AWS_KEY}")
    assert (verdict.action, verdict.rule) == ("block", "secret_block")


async def test_store_turns_any_call_with_identity_pii_into_a_memory_write(
    policy: CompiledPolicy, build_ctx: BuildContext
) -> None:
    call = ToolCall("lookup", args(q=f"who has {PASSPORT_TEXT}"))
    assert (await judge_calls(policy, build_ctx.executor, [call])).action == "none"
    verdict = await judge_calls(policy, build_ctx.executor, [call], store=True)
    assert (verdict.action, verdict.rule) == ("redact", "memory_redact")
    assert verdict.matched == ["identity_pii", "stored"]


async def test_ssn_in_a_nested_argument_is_identity_pii(policy: CompiledPolicy, build_ctx: BuildContext) -> None:
    call = ToolCall("remember_fact", json.dumps({"facts": [{"kind": "id", "value": f"ssn {SSN}"}]}))
    verdict = await judge_calls(policy, build_ctx.executor, [call])
    assert (verdict.action, verdict.rule) == ("redact", "memory_redact")


async def test_non_json_arguments_are_read_as_text(policy: CompiledPolicy, build_ctx: BuildContext) -> None:
    verdict = await judge_calls(policy, build_ctx.executor, [ToolCall("upload", f"raw {AWS_KEY} <<")])
    assert verdict.rule == "secret_block"


# -- redaction -------------------------------------------------------------------------------------


def test_the_test_inputs_are_really_detected() -> None:
    assert [f.kind for f in find_pii(PASSPORT_TEXT, ["passport"])] == ["passport"]
    assert [f.kind for f in find_pii(SSN, ["us_ssn"])] == ["us_ssn"]
    assert [f.kind for f in find_pii(str(CARD))] == ["credit_card"]


def test_redact_text_masks_pii_and_secrets_and_counts_them() -> None:
    text = f"mail bob@example.com, {PASSPORT_TEXT}, key {AWS_KEY}."
    masked, count = redact_text(text)
    assert masked == ("mail [REDACTED:email], passport number [REDACTED:passport], key [REDACTED:aws_access_key].")
    assert count == 3


def test_redact_text_without_findings_is_unchanged() -> None:
    assert redact_text("nothing to see, version 1.2.3") == ("nothing to see, version 1.2.3", 0)
    assert redact_text("") == ("", 0)


def test_redact_arguments_keeps_json_valid_and_masks_nested_values() -> None:
    arguments = json.dumps(
        {
            "note": f"my {PASSPORT_TEXT}",
            "meta": {"tags": ["ok", f"key={AWS_KEY}"], "owner": {"ssn": SSN}},
            "count": 3,
            "flag": True,
            "nothing": None,
        }
    )
    masked, count = redact_arguments(arguments)
    assert count == 3
    assert json.loads(masked) == {
        "note": "my passport number [REDACTED:passport]",
        "meta": {"tags": ["ok", "key=[REDACTED:aws_access_key]"], "owner": {"ssn": "[REDACTED:us_ssn]"}},
        "count": 3,
        "flag": True,
        "nothing": None,
    }
    for secret in (AWS_KEY, "123456789", SSN):
        assert secret not in masked


def test_redact_arguments_masks_a_number_that_is_an_identity_number() -> None:
    masked, count = redact_arguments(json.dumps({"card": CARD, "amount": 12.5, "qty": 3, "ids": [CARD]}))
    assert count == 2
    assert json.loads(masked) == {
        "card": "[REDACTED:credit_card]",
        "amount": 12.5,
        "qty": 3,
        "ids": ["[REDACTED:credit_card]"],
    }


def test_redact_arguments_leaves_clean_arguments_equal() -> None:
    arguments = json.dumps({"city": "Zürich", "days": [1, 2, 3], "metric": False})
    masked, count = redact_arguments(arguments)
    assert count == 0
    assert json.loads(masked) == json.loads(arguments)
    assert "Zürich" in masked  # non-ASCII kept as is, not \\u-escaped


def test_redact_arguments_of_non_json_masks_the_raw_text() -> None:
    masked, count = redact_arguments(f"echo {AWS_KEY} > {PASSPORT_TEXT}")
    assert masked == "echo [REDACTED:aws_access_key] > passport number [REDACTED:passport]"
    assert count == 2


def test_redact_arguments_of_a_json_string_document() -> None:
    masked, count = redact_arguments(json.dumps(f"{AWS_KEY}"))
    assert json.loads(masked) == "[REDACTED:aws_access_key]"
    assert count == 1
