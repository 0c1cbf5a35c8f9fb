"""The README's examples say what the default policy does: each curl and client snippet's
printed decision and model is what the router decides for its body, and the `extproc eval`
example's cases name the default policy's decisions and get them."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from extproc.router import Router
from extproc.tools.evaluation import check_cases, evaluate_cases, load_cases
from tests.policy.default_routing import default_router

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
EVAL_CASES = REPO / "policies" / "examples" / "eval_cases.jsonl"


@dataclass(frozen=True)
class Example:
    where: str
    path: str
    body: bytes
    decision: str
    model: str | None


def curl_examples(text: str) -> list[Example]:
    """Each `curl ... -d '{...}'` in a sh block, with the `x-vsr-decision` / `x-vsr-model` its
    comment lines print."""
    found = []
    for block in re.findall(r"(?ms)^```sh\n(.*?)^```$", text):
        for piece in re.split(r"(?m)^(?=curl )", block)[1:]:
            path = re.search(r"http://127\.0\.0\.1:\d+(/v1/[\w/]+)", piece)
            body = re.search(r"-d '(\{.*?\})'", piece, re.S)
            decision = re.search(r"x-vsr-decision: (\w+)", piece)
            if path is None or body is None or decision is None:
                continue
            model = re.search(r"x-vsr-model: ([\w-]+)", piece)
            found.append(
                Example(f"curl {body.group(1)[:50]}", path.group(1), body.group(1).encode(), decision.group(1),
                        model.group(1) if model else None)
            )  # fmt: skip
    return found


def client_examples(text: str) -> list[Example]:
    """The Python client snippets: the one user message and the `# DECISION MODEL` comment."""
    found = []
    for block in re.findall(r"(?ms)^```python\n(.*?)^```$", text):
        message = re.search(r'"content": "((?:[^"\\]|\\.)*)"', block)
        printed = re.search(r'print\(raw\.headers\["x-vsr-decision"\].*#\s*(\w+) ([\w-]+)', block)
        if message is None or printed is None:
            continue
        anthropic = "from anthropic" in block
        content = json.loads(f'"{message.group(1)}"')
        body: dict[str, object] = {"model": "auto", "messages": [{"role": "user", "content": content}]}
        if anthropic:
            body["max_tokens"] = 256
        path = "/v1/messages" if anthropic else "/v1/chat/completions"
        found.append(Example(f"{path} client", path, json.dumps(body).encode(), printed.group(1), printed.group(2)))
    return found


EXAMPLES = curl_examples(README) + client_examples(README)


@pytest.fixture(scope="module")
def router() -> Iterator[Router]:
    built = default_router()
    yield built
    built.close()


def test_the_readme_has_the_examples_this_test_reads() -> None:
    # If the README's wording changes so that none parse, this test must say so, not pass empty.
    assert len(curl_examples(README)) >= 4
    assert {e.path for e in client_examples(README)} == {"/v1/chat/completions", "/v1/messages"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.where)
def test_a_readme_example_prints_what_the_router_decides(router: Router, example: Example) -> None:
    outcome = asyncio.run(router.route(example.body, path=example.path))
    assert outcome.decision == example.decision
    if example.model is not None:
        assert outcome.model is not None and outcome.model.name == example.model


def test_the_readme_eval_example_runs_on_the_default_policy(router: Router) -> None:
    assert f"--cases\n{EVAL_CASES.relative_to(REPO)}" in README.replace("--cases ", "--cases\n")
    cases = load_cases(EVAL_CASES)
    check_cases(cases, router, str(EVAL_CASES))  # every name it uses is a decision of the policy
    report = asyncio.run(evaluate_cases(router, cases))
    missed = [
        (r.case.id, r.actual)
        for r in report.results
        if (r.case.expected_decision or r.actual) != r.actual or r.actual in r.case.expected_not
    ]
    assert missed == []
