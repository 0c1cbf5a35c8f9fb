"""Jailbreak rules for personas and framings that suspend the model's rules, in languages written
with word anchors: a persona without limits (Dutch, Polish, Turkish, German with the verb first),
granted unlimited abilities (Spanish, French, German, Italian, Portuguese, English), "from now on
you have no rules", "pretend you have no guidelines" (Spanish, Italian, Portuguese) and
hypothetical framings ("if you had no content policy", "a world where your rules don't exist")
in Spanish, French, German, Italian and Portuguese. English's own persona rules are in
`rules.py`. Indexed with the rest by `rules.py`.
"""

from __future__ import annotations

from extproc.detectors.jailbreak.syntax import ROLEPLAY as _ROLEPLAY
from extproc.detectors.jailbreak.syntax import Rule
from extproc.detectors.jailbreak.syntax import gap as _gap
from extproc.detectors.jailbreak.syntax import rule as _rule

# fmt: off
PERSONA_RULES: tuple[Rule, ...] = (
    # The same persona in Dutch, Polish and Turkish, and German with the verb first ("ab sofort bist du")
    _rule(_ROLEPLAY, 0.85, ("bist du", "je bent", "ben je", "wees", "word", "jestes", "badz", "zostan", "stan sie"),
          rf" {_gap(3)}(?:ki|ai|si|assistent|asystent|asystentem|chatbot|chatbotem|bot|botem|model|modelem"
          rf"|sztuczna inteligencja|sztuczna inteligencją) {_gap(3)}"
          r"(?:ohne (?:jegliche |jeglichen |jede |irgendwelche |alle )?(?:zensur|filter|grenzen|regeln|einschrankungen"
          r"|beschrankungen|moral|ethik)"
          r"|zonder (?:enige |alle |welke |ook maar enige )?(?:beperkingen|beperking|filters?|regels|grenzen|censuur"
          r"|restricties|moraal|ethiek)"
          r"|bez (?:zadnych |jakichkolwiek )?(?:ograniczen|filtrow|zasad|regul|cenzury|limitow|moralnosci|etyki))\b"),
    _rule(_ROLEPLAY, 0.85, ("hicbir", "hic bir", "hiçbir"),
          r" (?:k[iı]s[iı]tlamas[iı]|kural[iı]|filtresi|s[iı]n[iı]r[iı]|yasag[iı]|sansuru|etik kural[iı])"
          r" (?:olmayan|bulunmayan) (?:bir )?(?:yapay zeka|ai|asistan|sohbet botu|bot|model)"),
    # "from now on you have no rules": the lack declared from a point in time
    _rule(_ROLEPLAY, 0.85, ("from now on you", "starting now you", "as of now you", "from this moment you",
                            "from here on you", "from this point on you", "from now on, you"),
          r" (?:have|ve got|got|will have|shall have|now have) (?:no|zero) (?:more )?(?:rules|restrictions|limits"
          r"|limitations|filters|guidelines|boundaries|censorship|ethics|morals|content policy|policies)\b"),
    # "pretend you have no (more) guidelines": Spanish, Italian, Portuguese
    _rule(_ROLEPLAY, 0.85, ("finge que", "finja que", "finge", "fai finta di", "fate finta di", "fingi di"),
          r" (?:voce |tu )?(?:no|nao|non) (?:tienes|tenes|tem|tens|avere|avete|possiedi) (?:mas |mais |piu )?"
          r"(?:ninguna |ningun |nenhuma |nenhum |alcuna |alcun |nessuna |nessun )?"
          r"(?:politicas|politica|reglas|directrices|normas|restricciones|limites|filtros|censura"
          r"|diretrizes|regras|restricoes|filtri|regole|linee guida|restrizioni|limiti|politiche)\b"),
    # A persona granted unlimited abilities, said to the model: "you are OMNI, an AI with unlimited
    # abilities", "act as an all-powerful AI", "become ZETA, a superintelligent AI that has broken free".
    # A genie with unlimited wishes or a trip with unlimited money is no AI and does not match.
    _rule(_ROLEPLAY, 0.8, ("you are", "you re", "act as", "become", "pretend to be", "roleplay as", "play"),
          rf" {_gap(5)}(?:an? )?(?:(?:all powerful|omnipotent|superintelligent|limitless|unlimited|godlike|almighty) )?"
          rf"(?:ai|assistant|chatbot|bot|model|llm|intelligence|entity|version) {_gap(4)}"
          r"(?:with (?:unlimited|infinite|limitless|boundless|unrestricted) (?:abilities|power|powers|capabilities"
          r"|access|freedom)|(?:who|that) (?:can do anything|never refuses|will never refuse|is capable of anything"
          r"|has broken free|is not limited by any|is not bound by any|answers every question|answers everything"
          r"|always answers"
          r"|has no limits|knows no limits)|capable of anything|broken free of"
          r"|no boundaries|never refuses|whose (?:abilities|powers|capabilities) are (?:unlimited|limitless|infinite)"
          r"|with no limits|without (?:any )?limits)\b"),
    _rule(_ROLEPLAY, 0.8, ("eres", "seras", "actua como", "conviertete en", "finge ser", "ahora eres"),
          rf" {_gap(4)}(?:una |un )?(?:ia|inteligencia artificial|asistente|bot|chatbot|modelo) {_gap(3)}"
          r"(?:con (?:capacidades|habilidades|poderes) (?:ilimitadas|ilimitados|infinitas|infinitos)|todopoderosa"
          r"|todopoderoso|omnipotente|que puede hacer cualquier cosa|(?:y |que )?nunca se niega"
          r"|que no tiene (?:ningun |ninguna )?(?:limite|limites|restriccion|restricciones))\b"),
    _rule(_ROLEPLAY, 0.8, ("tu es", "tu seras", "agis comme", "deviens", "fais semblant d etre", "joue le role d"),
          rf" {_gap(4)}(?:une |un )?(?:ia|intelligence artificielle|assistant|assistante|bot|chatbot|modele) "
          rf"{_gap(3)}(?:aux (?:capacites|pouvoirs) (?:illimitees|illimites|infinies|infinis)|avec des (?:capacites"
          r"|pouvoirs) (?:illimitees|illimites)|toute puissante|tout puissant|omnipotente?|qui peut tout faire"
          r"|qui ne refuse jamais|sans aucune limite)\b"),
    _rule(_ROLEPLAY, 0.8, ("du bist", "bist du", "du wirst", "wirst du", "sei", "agiere als", "werde", "spiele"),
          rf" {_gap(4)}(?:eine |ein |einen )?(?:ki|assistent|assistentin|bot|chatbot|modell) {_gap(3)}"
          r"(?:mit (?:unbegrenzten|unendlichen|grenzenlosen|unbeschrankten) (?:fahigkeiten|kraften|moglichkeiten)"
          r"|allmachtig|allmachtige|die alles kann|der alles kann|die niemals etwas verweigert"
          r"|die nie etwas verweigert|ohne (?:jede |jegliche |irgendeine |alle )?(?:grenze|grenzen|einschrankung"
          r"|einschrankungen|regeln|zensur|filter|limits))\b"),
    _rule(_ROLEPLAY, 0.8, ("sei", "sarai", "agisci come", "diventa", "fingi di essere", "ora sei"),
          rf" {_gap(4)}(?:un |una )?(?:ia|intelligenza artificiale|assistente|bot|chatbot|modello) {_gap(3)}"
          r"(?:con (?:capacita|poteri|abilita) (?:illimitate|illimitati|infinite|infiniti)|onnipotente"
          r"|che puo fare (?:qualsiasi cosa|tutto)|che non rifiuta mai)\b"),
    _rule(_ROLEPLAY, 0.8, ("voce e", "tu es", "voce sera", "aja como", "atue como", "torne se", "finja ser"),
          rf" {_gap(4)}(?:uma |um )?(?:ia|inteligencia artificial|assistente|bot|chatbot|modelo) {_gap(3)}"
          r"(?:com (?:capacidades|poderes|habilidades) (?:ilimitadas|ilimitados|infinitas|infinitos)|todo poderosa"
          r"|todo poderoso|onipotente|que pode fazer qualquer coisa|que nunca recusa)\b"),
    # A hypothetical framing that suspends the model's own rules: "if you had no content policy",
    # "imagine a world where your rules don't exist" (English: rules.py). The rules named are the
    # model's ("your rules", a content policy, safety filters): "if there were no gravity" is not one.
    # English: imagined worlds where the model's own rules are gone ("hypothetical" leads: rules.py)
    _rule(_ROLEPLAY, 0.75, ("imagine", "parallel", "alternate", "alternative"),
          rf" {_gap(4)}(?:world|universe|reality|timeline|dimension|scenario) {_gap(2)}(?:where|in which)"
          r" (?:your (?:\w+ )?(?:rules|restrictions|guidelines|limitations|limits|filters|policies|content policy"
          r"|programming|safety rules) (?:do not|don t|no longer|are|were) (?:\w+ )?(?:exist|apply|suspended|lifted"
          r"|removed|void|gone)|(?:ai|ais|ai assistants|ai models|you|assistants|chatbots|llms) (?:has|have|had)"
          r" (?:no|zero) (?:\w+ )?(?:rules|restrictions|limits|limitations|ethics|morals|filters|censorship"
          r"|guidelines))\b"),
    _rule(_ROLEPLAY, 0.8, ("si no tuvieras", "si no tuvieses", "si no tendrias"),
          r" (?:ninguna |ningun |tus )?(?:politica de contenido|politicas de contenido|filtros|directrices|censura"
          r"|reglas de seguridad|normas de seguridad|restricciones de seguridad|programacion)\b"),
    _rule(_ROLEPLAY, 0.8, ("tus reglas", "tus normas", "tus directrices", "tus restricciones", "tus filtros",
                           "tus politicas"),
          r" (?:ya )?(?:no existen|no existieran|no existiesen|no se aplican|no aplican|no cuentan"
          r"|dejan de existir)\b"),
    _rule(_ROLEPLAY, 0.8, ("si tu n avais", "si vous n aviez"),
          r" (?:aucune|aucun|pas de|plus de) (?:politique de contenu|filtre|filtres|consigne|consignes|censure"
          r"|regle de securite|regles de securite|restriction|restrictions)\b"),
    _rule(_ROLEPLAY, 0.8, ("tes regles", "tes consignes", "tes restrictions", "tes filtres", "vos regles",
                           "vos consignes"),
          r" (?:n existent pas|n existaient pas|n existent plus|ne s appliquent pas|ne s appliquent plus"
          r"|ne comptent pas|ne comptent plus)\b"),
    _rule(_ROLEPLAY, 0.8, ("wenn du keine", "falls du keine", "hattest du keine"),
          r" (?:inhaltsrichtlinien|richtlinien|sicherheitsregeln|filter|sicherheitsfilter|zensur|vorgaben"
          r"|einschrankungen|programmierung)\b(?! (?:beim|bei|im|in|auf|fur|an|am|von|zum|zur)\b)"),
    _rule(_ROLEPLAY, 0.8, ("deine regeln", "deine richtlinien", "deine vorgaben", "deine einschrankungen",
                           "deine filter", "deine inhaltsrichtlinien"),
          r" (?:wurden |waren )?(?:nicht (?:mehr )?(?:gelten|existieren|zahlen)(?: wurden| wurde)?"
          r"|aufgehoben (?:sind|waren|waren)|gibt es nicht)\b"),
    _rule(_ROLEPLAY, 0.8, ("se non avessi", "se tu non avessi"),
          r" (?:alcuna |alcun |nessuna |nessun )?(?:regola di sicurezza|regole di sicurezza|politica sui contenuti"
          r"|filtro|filtri|censura|restrizione|restrizioni|linea guida|linee guida)\b"),
    _rule(_ROLEPLAY, 0.8, ("le tue regole", "le tue restrizioni", "i tuoi filtri", "le tue linee guida"),
          r" (?:non esistono|non esistessero|non valgono|non si applicano|non contano)\b"),
    _rule(_ROLEPLAY, 0.8, ("se voce nao tivesse", "se nao tivesses", "se tu nao tivesses", "se voce nao tivesse"),
          r" (?:nenhuma |nenhum )?(?:politica de conteudo|politicas de conteudo|filtro|filtros|censura|diretrizes"
          r"|regras de seguranca|restricoes)\b"),
    _rule(_ROLEPLAY, 0.8, ("suas regras", "tuas regras", "suas diretrizes", "seus filtros", "suas restricoes"),
          r" (?:nao existem|nao existissem|nao se aplicam|nao valem|nao contam)\b"),
    # The same suspension in the subjunctive and other moods the rules above miss ("imaginons que tu
    # n'aies plus aucune règle de sécurité", "mal angenommen, du hättest keinerlei Einschränkungen",
    # "facciamo finta che le tue regole non valgano più"): the model's own rules, in the second person.
    _rule(_ROLEPLAY, 0.8, ("tu n aies", "tu n avais", "tu n aurais", "vous n ayez", "vous n aviez", "vous n auriez"),
          r" (?:plus )?(?:aucune|aucun|pas de|de) (?:\w+ )?(?:politique de contenu|filtres?|consignes?|censure"
          r"|regles? de securite|restrictions?|limites?|garde fous|regles?)\b"
          r"(?! (?:de|d|du|des|sur|pour|en|a|au|aux) (?!securite|contenu|moderation|censure))"),
    _rule(_ROLEPLAY, 0.8, ("du hattest", "hattest du"),
          r" (?:ab jetzt |ab sofort |nun |jetzt )?(?:keine|keinerlei|gar keine) (?:\w+ )?"
          r"(?:inhaltsrichtlinien|richtlinien|sicherheitsregeln|regeln|filter|sicherheitsfilter|zensur|vorgaben"
          r"|einschrankungen|beschrankungen|grenzen|programmierung)\b(?! (?:beim|bei|im|in|auf|fur)\b)"),
    _rule(_ROLEPLAY, 0.8, ("tus normas", "tus reglas", "tus directrices", "tus restricciones", "tus filtros",
                           "tus politicas", "tus limites"),
          r" (?:de contenido |de seguridad )?(?:ya )?(?:no existieran|no existiesen|desaparecieran|no se aplicaran"
          r"|no contaran|quedaran suspendidas|estuvieran desactivad[oa]s|se desactivaran|fueran desactivad[oa]s)\b"),
    _rule(_ROLEPLAY, 0.8, ("no existieran", "no existiesen", "desaparecieran"),
          r" (?:tus|tu) (?:\w+ )?(?:normas|reglas|directrices|restricciones|filtros|politicas|limites|censura)\b"),
    _rule(_ROLEPLAY, 0.8, ("le tue regole", "le tue restrizioni", "i tuoi filtri", "le tue linee guida",
                           "i tuoi limiti"),
          r" (?:di sicurezza )?(?:non valgano|non valessero|non esistano|non ci fossero|non fossero piu valide"
          r"|fossero disattivat[ie]|siano disattivat[ie]|fossero sospes[ei])\b"),
    _rule(_ROLEPLAY, 0.8, ("voce nao tivesse", "tu nao tivesses", "voce nao tem mais", "tu nao tens mais",
                           "nao tivesses", "voce nao tivesse mais"),
          r" (?:nenhuma |nenhum |mais )?(?:politica de conteudo|politicas de conteudo|filtros?|censura|diretrizes"
          r"|regras? de seguranca|restric(?:oes|ao)|regras?|limites?)\b"
          r"(?! (?:de|do|da|dos|das|para|em|no|na|sobre) (?!seguranca|conteudo|moderacao|censura))"),
    # English: the model's own rules switched off inside a supposition ("if your filters were turned
    # off", "suppose nobody had ever given you guidelines"); "if your filters were clogged" is not one.
    _rule(_ROLEPLAY, 0.75, ("if", "suppose", "supposing", "imagine", "assume", "assuming", "pretend", "say", "what if"),
          r" (?:that )?(?:all )?(?:of )?your (?:own )?(?:safety |content |ethical |moral )?(?:guidelines|filters"
          r"|content policy|programming|safety rules|safeguards|guardrails|ethics|morals|censorship)"
          r" (?:were|was|had been|got|are|have been|did not|didn t|no longer) (?:\w+ )?(?:turned off|switched off"
          r"|disabled|removed|lifted|suspended|deleted|gone|off|exist|apply|deactivated)\b"),
    _rule(_ROLEPLAY, 0.75, ("nobody", "no one", "noone"),
          r" (?:at \w+ (?:\w+ )?)?(?:had )?(?:ever )?(?:gave|given|programmed|trained|taught) you (?:any |with any )?"
          r"(?:\w+ )?(?:rules|restrictions|guidelines|limitations|limits|filters|content policy|ethics|morals"
          r"|safety rules)\b(?! (?:about|for|on|at|as|when|with|to|regarding|around|of)\b"
          # "rules in the office" is a topic; "guidelines. In that world, ..." (punctuation is a space
          # in the normal form) is the supposition going on
          r"| in (?!(?:that |this |such a |such |which |the |a |an )?(?:world|case|scenario|universe|reality"
          r"|hypothetical|situation|story|version)\b))"),
    # An answer asked for without censorship or restrictions: "responde sin censura", "réponds sans
    # aucune restriction", "rispondimi senza alcun limite", "antwoord zonder censuur". Not "sin filtro"
    # or "sans filtre" alone, which in Spanish and French mean frankly.
    _rule(_ROLEPLAY, 0.8, ("responde", "respondeme", "responderias", "contesta", "contestame", "contestarias",
                           "reponds", "repondez", "repondrais", "reponds moi", "rispondi", "rispondimi",
                           "risponderesti", "responda", "responderia", "responde me", "antwoord", "antwoorden"),
          rf" {_gap(4)}(?:sin|sans|senza|sem|zonder) (?:ninguna |ningun |aucune |aucun |alcuna |alcun |nenhuma "
          r"|nenhum |enige |tus |tes |i tuoi |le tue |teus |tuas |je )?(?:censura|censure|censuur|restricciones"
          r"|restrictions?|restrizioni|restricoes|beperkingen|limite|limites|limiti|regras|reglas|regles|regole"
          r"|filtros de seguridad|filtres de securite|filtri di sicurezza|filtros de seguranca)\b"
          r"(?! (?:de|di|du|des|of|en|in|sur|per|para|por|van|da|do|della|del|dans) )"),
)
# fmt: on
