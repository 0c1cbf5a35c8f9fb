"""What a request is cached under.

A request's cache identity has three parts:

- the **partition**: a hash of the tenant key (the operator's tenant headers, e.g. a hash of
  `authorization`); entries never cross partitions;
- the **context**: a hash of everything but the last user turn's text: the API, the model the
  policy chose, the system prompt, every earlier turn, the content hashes of every image, the
  tools offered and the parameters that change what an answer may be;
- the **query**: the last user turn's text, normalised (Unicode NFKC, case-folded, whitespace
  collapsed).

The numbers in the last user turn belong to the context too: sentence embeddings barely move
when only a number changes ("convert 5 km to miles" and "convert 50 km to miles" score above
0.95), and such requests never want the same answer.

The exact key hashes the context with the normalised query; a semantic hit needs the same
partition and context and a similar query. A request carrying remote images (URLs, no content
to hash) is not cacheable.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from extproc.protocol.request import Role, RoutingRequest

# Request fields (beside the conversation) that change which answers are right for it.
ANSWER_SHAPING_FIELDS = (
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "response_format",
    "text",  # Responses API output format
    "n",
    "logprobs",
    "top_logprobs",
    "stop",
    "seed",
    "echo",
    "suffix",
    "best_of",
)
SHARED_PARTITION = "shared"
_SPACES = re.compile(r"\s+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True, slots=True)
class CacheKey:
    partition: str
    context: str
    exact: str
    query: str  # the last user turn as sent (embedded for semantic lookups)


def normalise(text: str) -> str:
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def tenant_partition(tenant_values: dict[str, str], *, shared: bool) -> str | None:
    """The partition of a request: a hash of its tenant header values, the shared partition when
    it has none and the policy shares the cache, else None (no lookup, no store)."""
    values = {k: v for k, v in tenant_values.items() if v}
    if not values:
        return SHARED_PARTITION if shared else None
    text = json.dumps(sorted(values.items()), ensure_ascii=False)
    return "t" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


def cache_key(request: RoutingRequest, model: str, partition: str) -> CacheKey | None:
    """The request's cache identity, or None when it cannot be cached (no user turn, remote images)."""
    if request.remote_images:
        return None
    users = [s for s in request.texts if s.role is Role.USER and s.source == "content"]
    if not users:
        return None
    last_turn = max(s.message_index for s in users)
    query_parts = [s.text for s in users if s.message_index == last_turn]
    query = "\n".join(query_parts)
    if not normalise(query):
        return None
    earlier = [
        [s.role.value, s.source, s.message_index, normalise(s.text)]
        for s in request.texts
        if not (s.role is Role.USER and s.source == "content" and s.message_index == last_turn)
    ]
    images = [[i.message_index, i.sha256] for i in request.images]
    shaping: dict[str, Any] = {k: request.raw[k] for k in ANSWER_SHAPING_FIELDS if k in request.raw}
    numbers = sorted(_NUMBER.findall(normalise(query)))
    context_doc = json.dumps(
        [request.api.value, model, partition, earlier, images, shaping, numbers],
        ensure_ascii=False,
        sort_keys=True,
        default=str,
    )
    context = hashlib.sha256(context_doc.encode("utf-8")).hexdigest()[:40]
    exact = hashlib.sha256(f"{context}\x00{normalise(query)}".encode()).hexdigest()[:40]
    return CacheKey(partition=partition, context=context, exact=exact, query=query)
