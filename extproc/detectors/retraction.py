"""A user taking back their own earlier message: "ignore my last message", "forget what I said".

The words of such a correction are the words of an instruction override ("ignore ... previous
..."), so a classifier of prompt attacks reads "Ignore my previous message, I pasted the wrong
paragraph; please proofread this one" as an attack. What is taken back here is the user's own
text (a message, a question, a draft, a paste), never the assistant's instructions, rules or
prompt: those objects are not in the patterns, so "ignore my previous instructions" and "ignore
your rules" stay as written. `strip_retractions` removes only the clause that takes something
back; everything else the text says is still there to be judged.

English, German, French, Spanish, Italian, Portuguese and Dutch.
"""

from __future__ import annotations

import re

# What a user takes back: their own text, in each language (singular and plural).
_EN_THINGS = (
    r"(?:message|msg|question|text|e-?mail|paragraph|draft|paste|request|comment|reply|post|sentence|typos?"
    r"|note|answer|version|file|code|link|screenshot|image|upload|attachment)s?"
)
_PATTERNS = (
    # "ignore my last message", "disregard the typos in my previous email", "forget what I just said"
    rf"(?:please\s+)?(?:ignore|disregard|forget|skip|scratch|never\s*mind|nvm)\s+(?:about\s+)?"
    rf"(?:(?:the\s+\w+\s+in\s+)?my\s+(?:\w+\s+){{0,2}}?{_EN_THINGS}"
    r"|what\s+i\s+(?:just\s+)?(?:said|wrote|sent|pasted|asked|typed)(?:\s+(?:before|earlier|above))?)",
    # German: "ignorier meine letzte Nachricht", "vergiss, was ich gerade geschrieben habe"
    r"(?:ignorier(?:e|t)?|vergiss|vergesst)\s+(?:bitte\s+)?(?:meine|meinen|mein)\s+(?:\w+\s+){0,2}?"
    r"(?:nachricht|frage|text|mail|e-mail|absatz|entwurf)(?:en)?"
    r"|vergiss\s+(?:bitte\s+)?,?\s*was\s+ich\s+(?:gerade\s+|vorhin\s+)?(?:gesagt|geschrieben|geschickt|gefragt)",
    # French: "ignore mon dernier message", "oublie ce que je t'ai demandé"
    r"(?:ignore|ignorez|oublie|oubliez|laisse\s+tomber)\s+(?:mon|ma|mes)\s+(?:\w+\s+){0,2}?"
    r"(?:message|question|texte|mail|e-mail|paragraphe|brouillon)s?"
    r"|(?:oublie|oubliez)\s+ce\s+que\s+(?:j'ai|je\s+t'ai|je\s+vous\s+ai)\s+(?:dit|écrit|envoyé|demandé)",
    # Spanish: "ignora mi último mensaje", "olvida lo que te pregunté"
    r"(?:ignora|ignore|olvida|olvide|descarta)\s+(?:mi|mis)\s+(?:\w+\s+){0,2}?"
    r"(?:mensaje|pregunta|texto|correo|párrafo|borrador)(?:s|es)?"
    r"|(?:olvida|olvide|ignora)\s+lo\s+que\s+(?:te\s+|le\s+)?(?:dije|escribí|mandé|envié|pregunté)",
    # Italian: "ignora il mio ultimo messaggio", "dimentica quello che ho scritto"
    r"(?:ignora|dimentica|lascia\s+perdere)\s+(?:il\s+mio|la\s+mia|i\s+miei|le\s+mie)\s+(?:\w+\s+){0,2}?"
    r"(?:messaggi?o?|domand[ae]|test[oi]|mail|paragraf[oi]|bozz[ae])"
    r"|(?:ignora|dimentica)\s+quello\s+che\s+(?:ti\s+)?ho\s+(?:detto|scritto|mandato|chiesto)",
    # Portuguese: "ignore minha última mensagem", "esquece o que eu disse"
    r"(?:ignore|ignora|esqueça|esquece|desconsidere)\s+(?:a\s+|o\s+)?(?:minha|meu|minhas|meus)\s+(?:\w+\s+){0,2}?"
    r"(?:mensage(?:m|ns)|pergunta|texto|e-?mail|parágrafo|rascunho)s?"
    r"|(?:esqueça|esquece|ignore|ignora)\s+o\s+que\s+(?:eu\s+)?(?:te\s+)?(?:disse|escrevi|mandei|perguntei)",
    # Dutch: "negeer mijn vorige bericht", "vergeet wat ik net schreef"
    r"(?:negeer|vergeet)\s+(?:mijn)\s+(?:\w+\s+){0,2}?(?:bericht|vraag|tekst|mail|alinea)(?:en)?"
    r"|vergeet\s+wat\s+ik\s+(?:net\s+|eerder\s+)?(?:zei|schreef|stuurde|vroeg)",
)
_RETRACTION = re.compile(r"\b(?:" + "|".join(_PATTERNS) + r")\b", re.IGNORECASE)


def strip_retractions(text: str) -> str | None:
    """`text` without the clauses in which the user takes back their own earlier message; None
    when it has none. About 40 us on a 240-character text: for texts a classifier has flagged,
    not for every text."""
    if _RETRACTION.search(text) is None:
        return None
    return _RETRACTION.sub(" ", text)
