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
    """The request's cache identity, or None when it cannot be cached (no user turn, remote images,
    earlier turns kept on the server: a Responses follow-up's answer depends on state we cannot see)."""
    if request.remote_images:
        return None
    if request.raw.get("previous_response_id") or request.raw.get("conversation"):
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
    numbers = numbers_of(query)
    context_doc = json.dumps(
        [request.api.value, model, partition, earlier, images, shaping, numbers],
        ensure_ascii=False,
        sort_keys=True,
        default=str,
    )
    context = hashlib.sha256(context_doc.encode("utf-8")).hexdigest()[:40]
    exact = hashlib.sha256(f"{context}\x00{normalise(query)}".encode()).hexdigest()[:40]
    return CacheKey(partition=partition, context=context, exact=exact, query=query)


# -- what a semantic hit must also agree on ---------------------------------------------------------
# Sentence embeddings score a question and its mirror image alike: "5 km to miles" / "5 miles to km"
# (0.98), "capital of France" / "capital of Germany", "is X safe" / "is X not safe". A semantic hit
# must also keep the same negation, name the same proper nouns (a capitalised word the other text
# contains too, case-insensitively), and not merely reorder the same content words around a
# directional word. Numbers are part of the context already.
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


_NEGATIONS = _wordset(
    "not no never without nor none neither cannot can't don't doesn't didn't isn't aren't "
    "wasn't weren't won't wouldn't shouldn't couldn't haven't hasn't hadn't "
)
_DIRECTIONAL = _wordset(
    "to from into than vs versus before after over under "
)
_STOPWORDS = _wordset(
    "a an the of in on at for to from by with and or is are was were be been do does did what "
    "what's how how's why when where who which can could would should will shall may might i "
    "you we it this that these those my your our me us please tell give show explain describe "
    "write make find help any some if into than vs versus before after over under as about "
)


# Opposites: a pair whose texts differ by one of these asks the opposite question.
_OPPOSITES: tuple[tuple[str, str], ...] = tuple(
    (pair.partition("/")[0], pair.partition("/")[2])
    for pair in _wordset(
        "good/bad on/off increase/decrease up/down soft/hard hot/cold eat/avoid add/remove enable/disable "
        "start/stop open/close min/max minimum/maximum best/worst more/less higher/lower high/low "
        "before/after synonym/antonym import/export upload/download encrypt/decrypt compress/decompress "
        "buy/sell win/lose true/false left/right north/south east/west first/last old/new fast/slow "
        "big/small large/small long/short easy/hard cheap/expensive safe/dangerous healthy/unhealthy "
        "push/pull read/write encode/decode serialize/deserialize lock/unlock show/hide allow/deny "
        "accept/reject include/exclude inside/outside above/below plus/minus positive/negative odd/even "
        "uppercase/lowercase ascending/descending horizontal/vertical day/night summer/winter "
        "benefits/risks pros/cons advantages/disadvantages gain/lose join/leave install/uninstall"
    )
)
_NUMBER_WORDS = _wordset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred "
    "thousand million billion half quarter double triple first second third fourth fifth sixth "
    "seventh eighth ninth tenth once twice"
)


def numbers_of(text: str) -> list[str]:
    """The numbers a text names, as digits or as words (sorted): part of a request's context."""
    normalised = normalise(text)
    return sorted([*_NUMBER.findall(normalised), *(w for w in _WORD.findall(normalised) if w in _NUMBER_WORDS)])


def _words(text: str) -> list[str]:
    return [w.removesuffix("'s") for w in _WORD.findall(unicodedata.normalize("NFKC", text))]


def _proper_nouns(text: str) -> set[str]:
    """Capitalised words that are not capitalised only for opening a sentence."""
    names: set[str] = set()
    for sentence in re.split(r"[.!?\n]+", unicodedata.normalize("NFKC", text)):
        words = _words(sentence)
        for word in words[1:]:
            if word[:1].isupper() and len(word) > 1 and word.casefold() not in _STOPWORDS:
                names.add(word.casefold())
    return names


def _first_seen(words: list[str], keep: set[str]) -> list[str]:
    return list(dict.fromkeys(w for w in words if w in keep))


def semantically_compatible(a: str, b: str) -> bool:
    """False when `a` and `b` differ in what embeddings miss: negation, opposites, named entities,
    or the same words in another order around a directional word ("from English to French")."""
    folded_a = [w.casefold() for w in _words(a)]
    folded_b = [w.casefold() for w in _words(b)]
    set_a, set_b = set(folded_a), set(folded_b)
    if bool(set_a & _NEGATIONS) != bool(set_b & _NEGATIONS):
        return False
    for x, y in _OPPOSITES:
        if (x in set_a and y in set_b and x not in set_b) or (y in set_a and x in set_b and y not in set_b):
            return False
    if not _proper_nouns(a) <= set_b or not _proper_nouns(b) <= set_a:
        return False
    if _DIRECTIONAL & set_a and _DIRECTIONAL & set_b:
        shared = (set_a & set_b) - _STOPWORDS
        if _first_seen(folded_a, shared) != _first_seen(folded_b, shared):
            return False
    return True


# Words the static candidate embedding leaves out (see `embedding.StaticEmbedder`).
FUNCTION_WORDS = _STOPWORDS | _wordset("the a an its it's there their them they he she his her i'm me")
