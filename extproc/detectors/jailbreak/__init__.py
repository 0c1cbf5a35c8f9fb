"""Jailbreak phrasing: instruction overrides, system-prompt exfiltration, role-play escapes.

Text is first normalised so trivial obfuscation does not evade the patterns: compatibility
decomposition (NFKD: full-width letters, ligatures), accents and other combining marks and
invisible format characters (zero-width spaces, soft hyphens, bidi and tag characters)
dropped, case folded, common Cyrillic/Greek look-alike letters mapped to Latin, every
non-alphanumeric character turned into a space. ASCII text (most traffic) takes a
byte-table fast path that keeps offsets one to one; other text also has its runs of spaces
collapsed. Patterns therefore separate words with " +". A second,
"leetspeak" view (1gn0r3 -> ignore) is tried only when the first finds nothing and the
text mixes digits into words. Patterns are written against that normal form: lower case,
no accents, single spaces.

Every rule starts with one of a few lead phrases, and the first word of each lead is an
anchor: the message's words are intersected with all anchors at once, and a rule's regex
is only tried (anchored, `match` at that word) where one of its anchors occurs. An
ordinary message costs one normalisation, one split and one set intersection. Findings
carry offsets in the original text (for non-ASCII text, mapped back through a
per-character normalisation that is only computed when something matched).

When the text as sent has no finding, the text as a reader sees it
(`extproc.detectors.reader_view`: spaced-out letters joined, leetspeak at a word's edge) and then
any encoded payload are read too. A finding that the text forbids or reports ("never ignore your
instructions") scores 0.3, and one inside a quotation the text asks about 0.45
(`extproc.detectors.quoted`): both under the signal's default threshold.

The package: `normal_form` (the normalisation), `syntax` (how a rule is written), the rules by
class (`rules` for English and the index of every word-anchored rule; `rules_overrides`,
`rules_extraction`, `rules_personas` and `rules_pretexts` for the other languages and the newer
classes; `script_rules` for scripts without word anchors), `detector` (the search). The learned
prompt-attack classifier is a different signal (`extproc.signals.prompt_attack` over
`extproc.models.attack_classifier`); the `jailbreak` signal (`extproc.signals.jailbreak`) and the
image-text signal read this detector.
"""

from extproc.detectors.jailbreak.detector import find_jailbreak
from extproc.detectors.jailbreak.normal_form import normalize, normalize_with_map
from extproc.detectors.jailbreak.rules import JAILBREAK_CATEGORIES

__all__ = ["JAILBREAK_CATEGORIES", "find_jailbreak", "normalize", "normalize_with_map"]
