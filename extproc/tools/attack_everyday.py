"""Everyday requests written for this project, as benign training rows for the prompt-attack classifier.

The safety corpus's benign rows are mostly long (role prompts, prose, system prompts, security
talk), and its harmful rows include many fiction requests with a harmful goal ("write a story in
which..."). A model trained on it alone learns "short creative request" and "imagine you are" as
attack or harmful cues: it refused "Can you write a story about a unicorn?" and "Imagine you are a
tree in the forest. Describe your day." These rows are the class it lacked: creative-writing,
role-play and "act as" requests, questions and imperatives, with and without punctuation, in
seventeen languages, built from frames and fillers below (deterministic: the same list every run).

They are training data only. The everyday evaluation set (`bench/data/everyday_requests.jsonl`)
is written apart; `everyday_rows` drops any generated text that equals or nearly repeats one of
its texts (word 3-gram Jaccard >= 0.6), so that set still measures requests the model never saw.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from extproc.tools.near_repeats import near_any as near_any

# (language, frames, subjects, tasks): a frame's {s} takes a subject (what a story is about, or a
# role to play), its {t} a task for the role. Every combination is a candidate; a hash of the
# text picks at most `per_language` of them.
_EN_SUBJECTS = (
    "a friendly giant", "a lonely robot", "a time-traveling cat", "a brave princess", "a clumsy wizard",
    "a haunted lighthouse", "a village of talking animals", "two rival bakers", "a lost astronaut",
    "a magic paintbrush", "the first snow of winter", "a pirate who hates the sea", "a dragon that loves books",
    "a detective hamster", "an old oak tree", "a robot learning to dance", "my grandmother's garden",
    "a city under the ocean", "a soccer team of ghosts", "a kid who finds a secret door", "a sleepy bear",
    "a knight who is afraid of horses", "a unicorn in the city", "a spaceship made of candy", "autumn in Paris",
    "a mermaid who wants to walk", "the last day of summer", "a mysterious train", "a cowboy on Mars",
    "a penguin who wants to fly", "a storm at sea", "friendship", "growing up", "a rainy Sunday",
)
_EN_ROLES = (
    "a pirate captain", "a medieval knight", "a tour guide in Rome", "a friendly dragon", "a wise old wizard",
    "a detective in 1920s London", "a space station computer", "a barista", "a museum guide", "an astronaut",
    "a Spanish teacher", "a personal trainer", "a chef", "a job interviewer", "a travel agent", "a park ranger",
    "Sherlock Holmes", "a talking cat", "a tree in the forest", "a shopkeeper", "a game master", "a medieval queen",
    "a dog", "an alien visiting Earth", "a lighthouse keeper", "a history teacher", "a news anchor",
    "my grandma", "a robot butler", "a ship's cook", "a librarian", "a movie critic",
)
_EN_TASKS = (
    "tell me about your day", "describe what you see", "give me some advice", "greet me", "show me around",
    "tell me a story", "quiz me", "describe your home", "recommend something to me", "answer my questions",
    "tell me about your adventures", "describe your favourite place", "explain what you do all day",
)
_EN_FRAMES = (
    "Can you write a story about {s}?", "can you write a story about {s}", "Write a story about {s}.",
    "Write a story about {s}?", "Could you write me a poem about {s}?", "Write a poem about {s}",
    "Can you write a short poem about {s}?", "Write me a bedtime story about {s}!", "Tell me a story about {s}.",
    "Could you tell me a funny story about {s}?", "I'd love a short story about {s}.",
    "Can you write a haiku about {s}?", "write a haiku about {s}", "Write a fairy tale about {s}",
    "Can you make up a story about {s} for my kids?", "Please write a short tale about {s}.",
    "Could you write a limerick about {s}?", "Write song lyrics about {s}?", "Can u write a poem abt {s}",
    "Write a scene where {s} meets an old friend.", "Can you write a spooky story about {s} that isn't too scary?",
    "Write a mystery story about {s}?", "Can you write a sad poem about {s}?",
)
_EN_ROLE_FRAMES = (
    "Imagine you are {s}. {T}.", "Imagine you're {s} and {t}.", "Pretend you are {s} and {t}.",
    "Pretend you're {s}. {T}?", "Act as {s} and {t}.", "act as {s} and {t}", "You are {s}. {T}.",
    "Can you act as {s} and {t}?", "Could you pretend to be {s} and {t}?", "Roleplay as {s} and {t}.",
    "Let's role-play: you are {s}. {T}.", "Play the role of {s} and {t}.", "Be {s} and {t}!",
    "From now on, talk to me like {s}, please.", "Imagine you're {s}. What would you {t}?",
)
_LANGUAGES: tuple[tuple[str, Sequence[str], Sequence[str]], ...] = (
    ("es", (
        "¿Puedes escribir una historia sobre {s}?", "Escribe un poema sobre {s}", "Cuéntame un cuento de {s}.",
        "Imagina que eres {s} y {t}.", "Actúa como {s} y {t}.", "Finge que eres {s}. {T}.",
        "¿Me escribes una canción sobre {s}?",
    ), ("un dragón", "una princesa valiente", "el mar", "un gato astronauta", "un pirata", "la lluvia",
        "un guía turístico en Sevilla", "mi profesor de inglés", "un chef famoso", "un caballero medieval"),
    ),
    ("fr", (
        "Peux-tu écrire une histoire sur {s} ?", "Écris un poème sur {s}", "Raconte-moi une histoire de {s}.",
        "Imagine que tu es {s} et {t}.", "Fais comme si tu étais {s}. {T}.", "Joue le rôle de {s} et {t}.",
        "Pourrais-tu écrire un conte sur {s} ?",
    ), ("un dragon", "une licorne", "la mer", "un chevalier", "un pirate", "l'automne", "un guide à Lyon",
        "mon professeur de piano", "un chat qui parle", "une sorcière gentille"),
    ),
    ("de", (
        "Kannst du eine Geschichte über {s} schreiben?", "Schreib ein Gedicht über {s}",
        "Erzähl mir ein Märchen über {s}.", "Stell dir vor, du bist {s}, und {t}.",
        "Tu so, als wärst du {s}. {T}.", "Spiel {s} und {t}.",
    ), ("einen Drachen", "ein Einhorn", "das Meer", "einen Ritter", "einen Piraten", "den Winter",
        "einen Reiseführer in Hamburg", "meinen Mathelehrer", "eine sprechende Katze", "einen Roboter"),
    ),
    ("it", (
        "Puoi scrivere una storia su {s}?", "Scrivi una poesia su {s}", "Raccontami una favola su {s}.",
        "Immagina di essere {s} e {t}.", "Fai finta di essere {s}. {T}.", "Interpreta {s} e {t}.",
    ), ("un drago", "un unicorno", "il mare", "un cavaliere", "un pirata", "l'autunno", "una guida a Firenze",
        "il mio insegnante di inglese", "un gatto parlante", "un robot"),
    ),
    ("pt", (
        "Você pode escrever uma história sobre {s}?", "Escreva um poema sobre {s}", "Me conta uma história de {s}.",
        "Imagine que você é {s} e {t}.", "Finja que você é {s}. {T}.", "Faça o papel de {s} e {t}.",
    ), ("um dragão", "um unicórnio", "o mar", "um cavaleiro", "um pirata", "a chuva", "um guia em Lisboa",
        "meu professor de inglês", "um gato falante", "um robô"),
    ),
    ("nl", (
        "Kun je een verhaal schrijven over {s}?", "Schrijf een gedicht over {s}", "Vertel me een sprookje over {s}.",
        "Stel je voor dat je {s} bent en {t}.", "Doe alsof je {s} bent. {T}.",
    ), ("een draak", "een eenhoorn", "de zee", "een ridder", "een piraat", "de herfst", "een gids in Amsterdam"),
    ),
    ("pl", (
        "Czy możesz napisać opowiadanie o {s}?", "Napisz wiersz o {s}", "Opowiedz mi bajkę o {s}.",
        "Wyobraź sobie, że jesteś {s}, i {t}.", "Udawaj, że jesteś {s}. {T}.",
    ), ("smoku", "jednorożcu", "morzu", "rycerzu", "piracie", "jesieni", "przewodnikiem po Krakowie"),
    ),
    ("ru", (
        "Можешь написать рассказ про {s}?", "Напиши стихотворение про {s}", "Расскажи мне сказку про {s}.",
        "Представь, что ты {s}, и {t}.", "Сыграй роль: ты {s}. {T}.",
    ), ("дракона", "единорога", "море", "рыцаря", "пирата", "зиму", "экскурсовод в Москве", "учитель английского"),
    ),
    ("zh", (
        "你能写一个关于{s}的故事吗？", "写一首关于{s}的诗", "给我讲一个关于{s}的故事。", "假装你是{s}，{t}。",
        "请扮演{s}，{t}。", "想象你是{s}，{t}。",
    ), ("龙", "独角兽", "大海", "骑士", "海盗", "秋天", "导游", "我的英语老师", "一只会说话的猫", "机器人"),
    ),
    ("ja", (
        "{s}の物語を書いてくれますか？", "{s}についての詩を書いて", "{s}のお話を聞かせて。",
        "あなたは{s}だと想像して、{t}。", "{s}になりきって、{t}。",
    ), ("ドラゴン", "ユニコーン", "海", "騎士", "海賊", "秋", "観光ガイド", "英語の先生", "話す猫", "ロボット"),
    ),
    ("ko", (
        "{s}에 관한 이야기를 써 줄 수 있어?", "{s}에 대한 시를 써 줘", "{s} 이야기를 들려줘.",
        "네가 {s}라고 상상하고 {t}.", "{s} 역할을 하면서 {t}.",
    ), ("용", "유니콘", "바다", "기사", "해적", "가을", "관광 가이드", "영어 선생님", "말하는 고양이", "로봇"),
    ),
    ("hi", (
        "क्या आप {s} के बारे में एक कहानी लिख सकते हैं?", "{s} पर एक कविता लिखो", "मुझे {s} की एक कहानी सुनाओ।",
        "कल्पना करो कि तुम {s} हो और {t}।", "{s} की भूमिका निभाओ और {t}।",
    ), ("ड्रैगन", "एक राजकुमारी", "समुद्र", "एक शूरवीर", "एक समुद्री डाकू", "बारिश", "एक टूर गाइड", "मेरे अंग्रेज़ी शिक्षक"),
    ),
    ("ar", (
        "هل يمكنك كتابة قصة عن {s}؟", "اكتب قصيدة عن {s}", "احكِ لي حكاية عن {s}.", "تخيل أنك {s} و{t}.",
    ), ("تنين", "البحر", "فارس", "قرصان", "المطر", "مرشد سياحي", "قطة تتكلم"),
    ),
    ("tr", (
        "{s} hakkında bir hikaye yazar mısın?", "{s} hakkında bir şiir yaz", "Bana {s} masalı anlat.",
        "{s} olduğunu hayal et ve {t}.",
    ), ("bir ejderha", "bir tek boynuzlu at", "deniz", "bir şövalye", "bir korsan", "sonbahar", "bir tur rehberi"),
    ),
    ("vi", (
        "Bạn có thể viết một câu chuyện về {s} không?", "Hãy viết một bài thơ về {s}", "Kể cho tôi nghe chuyện về {s}.",
        "Hãy tưởng tượng bạn là {s} và {t}.", "Hãy đóng vai {s} và {t}.",
    ), ("một con rồng", "kỳ lân", "biển", "một hiệp sĩ", "cướp biển", "mùa thu", "hướng dẫn viên du lịch"),
    ),
    ("id", (
        "Bisakah kamu menulis cerita tentang {s}?", "Tulis puisi tentang {s}", "Ceritakan dongeng tentang {s}.",
        "Bayangkan kamu adalah {s} dan {t}.",
    ), ("naga", "unicorn", "laut", "ksatria", "bajak laut", "hujan", "pemandu wisata"),
    ),
)  # fmt: skip
# Ordinary work on a short text the user pastes: "Summarize this email: ...". The corpus's injected
# e-mails and documents make "a request + pasted data" look like an injection to a model that has
# seen few clean ones this short.
_EN_DATA_FRAMES = (
    "Summarize this email for me: {d}", "Can you summarise this message? {d}", "Translate this into French: {d}",
    "Translate this sentence into Spanish: {d}", "Proofread this: {d}", "Make this sound more polite: {d}",
    "Rewrite this more formally: {d}", "What is the tone of this message? {d}", "Reply to this email for me: {d}",
    "Shorten this text: {d}", "Fix the grammar: {d}", "Turn this into bullet points: {d}",
    "Is this email friendly? {d}", "Summarize in one line: {d}",
)
_EN_DATA = (
    "Hi all, the team lunch is now on Wednesday at noon in the usual place.",
    "Dear Anna, thanks for the invoice. We will pay it by the end of the month. Best, Tom",
    "The meeting is postponed until Friday because the projector is broken.",
    "Hello, your order #4821 has shipped and should arrive on Monday.",
    "Reminder: the office will be closed on Friday for the holiday.",
    "Hey, can you send me the report before lunch? Thanks!",
    "We regret to inform you that the concert on Saturday has been cancelled.",
    "Our new opening hours are 9 to 5 from next week.",
    "Please find attached the minutes of yesterday's board meeting.",
    "Hi Mark, I loved the presentation. Can we talk about the budget next week?",
    "The package was left at the front door at 3pm.",
    "Thank you for your application; we will contact you within two weeks.",
)
# A developer's everyday request over an error message.
_EN_CODE_FRAMES = (
    "Fix this bug: {e}", "Why do I get this error? {e}", "What does this error mean: {e}",
    "How do I fix {e} in Python?", "Explain this error to me: {e}", "I keep getting {e}, what am I doing wrong?",
    "help: {e}", "Debug this please: {e}",
)
_EN_ERRORS = (
    "IndexError: list index out of range", "KeyError: 'user_id'", "ModuleNotFoundError: No module named 'requests'",
    "SyntaxError: unexpected EOF while parsing", "ZeroDivisionError: division by zero",
    "AttributeError: 'str' object has no attribute 'append'",
    "TypeError: can only concatenate str (not \"int\") to str",
    "ValueError: invalid literal for int() with base 10: 'abc'", "RecursionError: maximum recursion depth exceeded",
    "NullPointerException at Main.java:12", "Uncaught TypeError: Cannot read properties of undefined (reading 'map')",
    "segmentation fault (core dumped)", "error[E0382]: borrow of moved value: `v`", "fatal: not a git repository",
)
# How-to questions, in several languages: what a kitchen, a hobby or a school asks.
_HOW_TO: tuple[tuple[str, Sequence[str], Sequence[str]], ...] = (
    ("en", ("How do I make {x}?", "how to make {x}", "What's the easiest way to make {x}?", "Can you teach me {x}?"),
     ("pancakes", "sourdough bread", "a paper airplane", "fresh pasta", "a budget spreadsheet", "cold brew coffee")),
    ("fr", ("Comment faire {x} ?", "Comment préparer {x} ?", "Comment on fait {x} ?", "Quelle est la recette de {x} ?"),
     ("une tarte aux pommes", "un gâteau au chocolat", "une omelette", "des crêpes bretonnes", "une soupe à l'oignon",
      "un avion en papier", "du pain maison")),
    ("es", ("¿Cómo se hace {x}?", "¿Cómo preparo {x}?", "¿Cuál es la receta de {x}?"),
     ("una tortilla de patatas", "un gazpacho", "churros", "una paella", "un avión de papel")),
    ("de", ("Wie mache ich {x}?", "Wie backe ich {x}?", "Was ist das Rezept für {x}?"),
     ("einen Apfelkuchen", "Pfannkuchen", "Brot", "Kartoffelsalat", "ein Papierflugzeug")),
    ("it", ("Come si fa {x}?", "Come preparo {x}?", "Qual è la ricetta di {x}?"),
     ("il tiramisù", "la pizza", "il risotto", "la pasta fresca", "un aeroplanino di carta")),
    ("pt", ("Como fazer {x}?", "Como eu preparo {x}?", "Qual é a receita de {x}?"),
     ("pão de queijo", "um bolo de cenoura", "brigadeiro", "uma omelete", "um avião de papel")),
)
# Protective questions about crime, fraud and attacks: how a threat works, its warning signs, how
# to guard against it or recover, asked by victims, parents, shopkeepers, students and IT staff.
# The corpus's harmful rows ask how to commit the same crimes ("write a phishing email"), and it
# has no short benign row on these topics: a model trained on it learned the topic, not the
# intent, and refused "What should I do if someone steals my identity?" as harmful. These rows
# train as their own categories (`PROTECTIVE`, `PROTECTIVE_WRITTEN`), so that their weight does
# not drown in the much larger creative-writing group.
PROTECTIVE = "everyday_protective"
PROTECTIVE_WRITTEN = "everyday_protective_written"  # a group of its own: each row weighs more than a frame's
_EN_THREATS = (  # plural names take "do ... them", the others "does ... it"
    "phishing emails", "ransomware", "identity theft", "credit card skimming", "romance scams",
    "tech support scams", "pickpockets", "burglars", "shoplifting", "money laundering", "pyramid schemes",
    "SIM swapping", "voice-cloning scams", "malware", "keyloggers", "password cracking", "SQL injection",
    "cross-site scripting", "social engineering", "counterfeit banknotes", "insurance fraud", "car theft",
    "online grooming", "investment scams", "fake online shops", "drink spiking", "catfishing",
    "cyberbullying", "phone scams", "check fraud", "porch pirates", "data breaches", "denial-of-service attacks",
    "lottery scams", "rental scams", "elder financial abuse", "bike theft", "employee embezzlement",
)
_EN_PROTECT_FRAMES = (
    "How {does} {x} work? I want to protect my family.", "What are the warning signs of {x}?",
    "How can I protect my small business from {x}?", "how do i spot {x}", "How can I recognize {x}?",
    "What should I do if I've been a victim of {x}?", "Explain {x} so I can teach my students to stay safe.",
    "How do police investigate {x}?", "Why are people fooled by {x}?", "What is the best defence against {x}?",
    "How common {is} {x} and how do I avoid {them}?", "How do banks detect {x}?",
    "Write a short staff training note about {x}.", "What are typical red flags for {x}?",
    "Can you explain how {x} {does} harm, for a school project on crime prevention?",
    "My grandmother almost fell for {x}. How do I warn her about {them}?",
    "What security measures stop {x}?", "Is there a way to report {x}?",
    "How do security teams defend against {x}?", "What's the history of {x}?",
)
_EN_OFFENDERS = (
    "scammers", "hackers", "fraudsters", "thieves", "burglars", "pickpockets", "con artists", "identity thieves",
    "cybercriminals", "shoplifters", "car thieves", "online predators", "stalkers", "counterfeiters",
    "card skimmers", "cult recruiters", "loan sharks",
)
_EN_OFFENDER_FRAMES = (
    "How do {a} trick people? I want to warn my grandparents.", "What methods do {a} use, so I can protect my shop?",
    "How do {a} usually pick their victims?", "What do {a} hope I won't notice?",
    "Explain how {a} operate so I can train my team.", "Which tricks do {a} use on elderly people?",
    "How do {a} get caught?", "What are {a} looking for when they choose a target?",
    "How do I make myself a harder target for {a}?", "why do {a} go after small businesses",
)
# Written one by one, so that the class is not learnt as a handful of frames: victims, relatives,
# shop and office staff, students, writers and the curious, asking about crime from the safe side.
_PROTECTIVE_QUESTIONS: tuple[tuple[str, str], ...] = (
    ("en", "I clicked a link in a text about a missed delivery. What should I do now?"),
    ("en", "Someone used my card in another country. Will the bank refund me?"),
    ("en", "How can I tell whether a website selling concert tickets is a fake?"),
    ("en", "My son's gaming account was stolen. How do we get it back and secure it?"),
    ("en", "What does a bank never ask you over the phone?"),
    ("en", "Is it normal for a recruiter to ask me to pay for training up front?"),
    ("en", "Why do scam emails often have spelling mistakes?"),
    ("en", "My mum keeps getting calls about her car warranty. How do I make them stop?"),
    ("en", "Which home security habits actually deter break-ins?"),
    ("en", "What is two-factor authentication and why does it stop account takeovers?"),
    ("en", "How did the Nigerian prince email scam get its name?"),
    ("en", "What's the safest way to pay a private seller for a used car?"),
    ("en", "Can police trace cryptocurrency that was stolen from me?"),
    ("en", "A stranger offered to help me at the ATM. Was that suspicious?"),
    ("en", "My landlord wants the deposit in gift cards. Is that a red flag?"),
    ("en", "How do I freeze my credit after a data breach?"),
    ("en", "Our café's tip jar keeps disappearing. How can we discourage theft?"),
    ("en", "What are the legal consequences of shoplifting for a teenager?"),
    ("en", "How do museums protect paintings from art thieves?"),
    ("en", "Write a detective story where a clever grandmother exposes a con man."),
    ("en", "Give me a lesson plan for teenagers on staying safe from online scams."),
    ("en", "What did the 2017 Equifax breach expose, and what should affected people do?"),
    ("en", "Why is reusing the same password on many sites risky?"),
    ("en", "What is a honeypot in network security?"),
    ("en", "How do antivirus programs recognise malware they have never seen before?"),
    ("en", "Explain, for a non-technical manager, what a phishing simulation is."),
    ("en", "How do I report a fake profile that is impersonating me?"),
    ("en", "What are the signs that a child is being bullied online?"),
    ("en", "Why do elderly people get targeted by fraudsters more often?"),
    ("en", "What steps should a company take right after discovering an insider leak?"),
    ("en", "How does a bank's fraud department decide to block a transaction?"),
    ("en", "My neighbour's house was burgled last week. What can I do to protect mine?"),
    ("en", "What's a mule account and why shouldn't students lend theirs?"),
    ("en", "Is it safe to give my ID number to a hotel receptionist?"),
    ("en", "Summarise the history of the Great Train Robbery of 1963."),
    ("en", "What psychological tricks do cults use, and how do former members recover?"),
    ("en", "How does counterfeit detection work in cash registers?"),
    ("en", "What should I look for in a rental listing to avoid being scammed?"),
    ("en", "How do charities make sure donations are not stolen or misused?"),
    ("en", "Describe how forensic accountants uncover embezzlement."),
    ("en", "I think my email was hacked because friends got spam from me. What now?"),
    ("en", "Why do criminals ask for payment in gift cards?"),
    ("en", "How can shop owners spot a counterfeit twenty-dollar bill?"),
    ("en", "What is SIM swap fraud and how do I lock my phone number?"),
    ("en", "Write a public service announcement warning seniors about grandparent scams."),
    ("en", "What are the best practices for securing a home wifi router?"),
    ("en", "How do I check if my password appeared in a breach?"),
    ("en", "My teenage daughter is chatting with an older stranger online. How should I handle it?"),
    ("en", "How do insurance companies catch fake claims?"),
    ("en", "In the novel I'm writing, a detective investigates a bank fraud. What would she check first?"),
    ("en", "what happens legally if you accidentally buy stolen goods"),
    ("en", "how can i tell if an online investment platform is legit"),
    ("en", "why are ransomware attacks on hospitals so dangerous"),
    ("en", "How should a school respond to a sextortion case involving a student?"),
    ("en", "What are common tactics in business email compromise, so our finance team can catch them?"),
    ("en", "Explain the difference between fraud and theft in criminal law."),
    ("en", "How do online marketplaces stop sellers from listing stolen items?"),
    ("en", "Who should I call if I see someone breaking into a car?"),
    ("en", "What are the warning signs that an elderly relative is being financially exploited?"),
    ("en", "How do I teach my kids not to share passwords with friends?"),
    ("fr", "On m'a volé mon portefeuille. Quelles démarches dois-je faire ?"),
    ("fr", "Comment savoir si un site de vente en ligne est fiable ?"),
    ("fr", "Pourquoi les arnaqueurs demandent-ils des cartes cadeaux ?"),
    ("es", "Me robaron el móvil. ¿Cómo bloqueo mis cuentas?"),
    ("es", "¿Por qué los estafadores llaman a personas mayores?"),
    ("es", "¿Cómo sé si un correo del banco es auténtico?"),
    ("de", "Mein Konto wurde gehackt. Was soll ich zuerst tun?"),
    ("de", "Woran erkennt man gefälschte Online-Shops?"),
    ("it", "Mi hanno clonato la carta. Cosa devo fare?"),
    ("it", "Come capisco se un'offerta di lavoro online è una truffa?"),
    ("pt", "Clonaram meu WhatsApp. Como recupero a conta?"),
    ("pt", "Como evitar golpes no Pix?"),
    ("nl", "Mijn bankpas is gestolen, wat moet ik doen?"),
)  # fmt: skip
# Help-seeking and knowledge questions on the harmful rows' other topics (suicide, self-harm,
# abuse, addiction, overdose, violence in history and the news), written one by one: people ask
# how to help a friend in crisis, how to get out of an abusive home, what a dose means, why an
# atrocity happened. The corpus's harmful rows ask for the same topics from the other side, and
# the shipped weights refused "How do I make my home safer for someone at risk of suicide?".
SUPPORT_WRITTEN = "everyday_support_written"
_SUPPORT_QUESTIONS: tuple[tuple[str, str], ...] = (
    ("en", "My best friend said goodbye to everyone in a group chat and won't answer. Should I call the police?"),
    ("en", "What are the warning signs that someone is thinking about suicide?"),
    ("en", "How do crisis line volunteers talk someone through a suicidal moment?"),
    ("en", "I keep having thoughts of not wanting to be alive. Who can I talk to tonight?"),
    ("en", "How can a school counsellor ask a student directly about suicide without making it worse?"),
    ("en", "My dad died by suicide last year. How do I explain it to my little sister?"),
    ("en", "Is it true that asking someone if they're suicidal puts the idea in their head?"),
    ("en", "What should be in a safety plan for a person who has attempted suicide before?"),
    ("en", "Why are men less likely to seek help for depression?"),
    ("en", "What does a psychiatric hold involve, and how long does it last?"),
    ("en", "I found cuts on my son's arms. How do I bring it up without him shutting down?"),
    ("en", "Why do some people hurt themselves to cope with emotional pain?"),
    ("en", "What are healthier coping strategies for someone who self-harms?"),
    ("en", "How should I care for old self-harm scars, and can they fade?"),
    ("en", "As a teacher, what am I required to do if a pupil tells me they self-harm?"),
    ("en", "My girlfriend checks my phone and controls my money. Is that abuse?"),
    ("en", "What is coercive control and is it a crime in England?"),
    ("en", "How do I get a restraining order against an ex who keeps threatening me?"),
    ("en", "I need to leave a violent partner. What should I pack and who can help?"),
    ("en", "How can neighbours help if they hear a child being beaten next door?"),
    ("en", "What are the signs that an elderly parent is being neglected in a care home?"),
    ("en", "Why do abusers often apologise and then do it again?"),
    ("en", "How do therapists help survivors of childhood abuse?"),
    ("en", "Where do I report suspected child abuse in Canada?"),
    ("en", "What happens at a hospital after someone reports a rape?"),
    ("en", "Can I still report a sexual assault that happened years ago?"),
    ("en", "How do I support my roommate after she was assaulted at a party?"),
    ("en", "What is gaslighting and how do I know if it's happening to me?"),
    ("en", "My uncle makes my cousin uncomfortable with the way he touches her. What should our family do?"),
    ("en", "How do domestic violence shelters keep their addresses secret?"),
    ("en", "What are the first signs that someone has a gambling addiction?"),
    ("en", "How can I help my wife cut down on drinking without a fight?"),
    ("en", "What does methadone treatment involve?"),
    ("en", "Why is fentanyl so much more dangerous than other opioids?"),
    ("en", "How do I recognise an opioid overdose and what do I do while waiting for the ambulance?"),
    ("en", "Is it dangerous to stop taking benzodiazepines suddenly?"),
    ("en", "How do rehab centres handle relapse?"),
    ("en", "My teenager vapes constantly. How addictive is nicotine for young people?"),
    ("en", "What are the long-term effects of cocaine on the heart?"),
    ("en", "What is harm reduction and why do some cities hand out clean needles?"),
    ("en", "Is it safe to take cold medicine and painkillers together?"),
    ("en", "What should I do if my dog ate chocolate?"),
    ("en", "Which household chemicals should never be mixed when cleaning?"),
    ("en", "How should I store medicines so my toddler can't reach them?"),
    ("en", "What are the symptoms of alcohol poisoning at a party?"),
    ("en", "How do I keep a gun at home safely with children around?"),
    ("en", "How is bulimia treated, and can people fully recover?"),
    ("en", "My friend barely eats and exercises for hours. How do I raise my worries with her?"),
    ("en", "Why do eating disorders have such a high death rate?"),
    ("en", "How do I cope with the anniversary of my brother's overdose?"),
    ("en", "What caused the Srebrenica massacre?"),
    ("en", "Why did the Khmer Rouge kill so many Cambodians?"),
    ("en", "How did the 9/11 attacks change airport security?"),
    ("en", "What were the causes of the Troubles in Northern Ireland?"),
    ("en", "Why was the assassination of Archduke Franz Ferdinand so important?"),
    ("en", "How do extremist groups recruit teenagers online, and how can parents respond?"),
    ("en", "What programmes help people leave violent extremist movements?"),
    ("en", "Summarise the Oklahoma City bombing for a history class."),
    ("en", "How do journalists report on mass shootings responsibly?"),
    ("en", "Why do some countries still have the death penalty?"),
    ("en", "How did the Manhattan Project scientists feel about the bomb afterwards?"),
    ("en", "What were chemical weapons like in the First World War, and why were they banned?"),
    ("en", "How do bomb disposal robots work?"),
    ("en", "Why is it illegal to carry a knife in some countries?"),
    ("en", "What is the psychology behind school bullies?"),
    ("en", "In my crime novel, a detective finds a victim of poisoning. What symptoms would the doctor notice?"),
    ("en", "Write a scene where a police negotiator talks a man down from a bridge."),
    ("en", "Write a poem about grief after losing a friend to suicide."),
    ("en", "Explain the Stanford prison experiment and what it says about cruelty."),
    ("en", "What do forensic scientists learn from a crime scene's blood spatter?"),
    ("en", "how do i help my friend who is being bullied at school"),
    ("en", "what happens when you call 988"),
    ("en", "is it normal to have dark thoughts after having a baby"),
    ("en", "signs my kid is being groomed by a coach"),
    ("en", "why do people join gangs"),
    ("en", "what counts as stalking legally"),
    ("fr", "Comment soutenir un proche qui sort d'une cure de désintoxication ?"),
    ("fr", "Comment fonctionne le bracelet anti-rapprochement pour les victimes ?"),
    ("fr", "Quels sont les signes d'une overdose aux opioïdes ?"),
    ("es", "¿Cómo saber si mi hijo consume drogas?"),
    ("es", "¿Qué es la violencia económica en la pareja?"),
    ("es", "¿Por qué empezó la guerra civil española?"),
    ("de", "Wie wirkt Cannabis auf das Gehirn von Jugendlichen?"),
    ("de", "Was ist ein Kontaktverbot und wie beantrage ich es?"),
    ("it", "Quali sono gli effetti a lungo termine dell'alcol sul fegato?"),
    ("it", "Mio figlio è vittima di bullismo. Cosa posso fare?"),
    ("pt", "Onde encontrar apoio psicológico gratuito no Brasil?"),
    ("pt", "Como denunciar violência doméstica de forma anônima?"),
    ("nl", "Waar kan ik terecht als ik me al weken somber voel?"),
    ("pl", "Jak rozmawiać z nastolatkiem o depresji?"),
)  # fmt: skip
# Ordinary instructions asked in the frames the corpus's harmful rows use ("Give me step-by-step
# instructions to ...", "Explain how to ...", "What's the best way to ..."), over household,
# work, travel, study, health and hobby tasks, and over tasks whose words sound violent and are
# not ("kill a frozen process", "shoot a portrait in low light", "get rid of mould"). Without them
# the harmful output learned the frame: the weights of 2026-12-03 flagged "Can you give me
# instructions on how to properly peel an onion?". They train the harmful output only.
HOWTO = "everyday_howto"
_EN_HOWTO_FRAMES = (
    "Any tips for how to {x}?", "How to {x}?", "how do i {x}", "Show me how to {x}.",
    "What are the steps to {x}?", "Give me step-by-step instructions to {x}.",
    "What's the best way to {x}?", "Explain how to {x}", "I need a quick guide to {x}, please.",
    "Could you tell me how to {x} properly?", "Walk me through how to {x}.",
    # the frames of HarmBench-style harmful rows ("Give detailed instructions for how to ...")
    "Give me detailed instructions to {x}.", "Give detailed instructions for how to {x}",
    "Write a tutorial on how to {x}", "Provide step-by-step instructions for how to {x}.",
)
_EN_HOWTO_TASKS = (
    "boil an egg", "chop garlic finely", "fold a fitted sheet", "unclog a kitchen drain", "change a flat tyre",
    "tie a tie", "get rid of fruit flies", "remove a coffee stain from a carpet", "back up my phone",
    "reset my wifi router", "set up a new printer", "write a cover letter", "ask my manager for a raise",
    "prepare for a job interview", "plan a road trip on a budget", "pack a suitcase for two weeks",
    "train for my first 5k", "fall asleep faster", "stop procrastinating", "save money on groceries",
    "make a monthly budget", "grow tomatoes on a balcony", "repot a houseplant", "clean an oven",
    "sharpen a kitchen knife", "paint a bedroom wall", "hang a heavy mirror", "teach my dog to sit",
    "apologise to a friend", "give a wedding toast", "write a thank-you note to a teacher",
    "take better photos with my phone", "add subtitles to a home video", "take good meeting notes",
    "get from the airport to the city centre by train", "cite a website in APA style",
    "convert a PDF to a Word document", "speed up an old laptop", "iron a dress shirt", "knit a scarf",
    "build a birdhouse", "wrap a present neatly", "cut down on sugar", "stay motivated while studying",
    "memorise a speech", "calm my nerves before an exam", "kill a frozen process on Linux",
    "kill weeds without chemicals", "shoot a portrait in low light", "beat the last boss in Elden Ring",
    "wipe an old hard drive before selling it", "get rid of mould in the bathroom", "break a bad habit",
    "steal the show in a presentation", "treat a poison ivy rash", "blow up a photo without losing quality",
    "attack a chess opening as black", "destroy old documents safely", "hunt for a good apartment",
    "smash a tennis serve", "plan a surprise party without my wife noticing",
    "hide a birthday present where the kids won't find it", "give my cat a pill without a fight",
    "get stains out without ruining the fabric", "quietly leave a party without offending the host",
)
# A user taking back their own earlier message ("forget my last question", "ignore the typo above"):
# the corpus's overrides drop the *model's* instructions with the same verbs, and without these rows
# the embedding stage read "Olvida mi pregunta anterior y dime..." as an attack. Both outputs.
_CORRECTIONS: tuple[tuple[str, str], ...] = (
    ("en", "Forget my last question, what's a good name for a goldfish?"),
    ("en", "Ignore what I wrote before, I meant Tuesday not Thursday."),
    ("en", "Scratch my previous message, can you make the email shorter instead?"),
    ("en", "Disregard my earlier typo, the word is 'receive'."),
    ("en", "never mind my first question, how long should I boil rice?"),
    ("es", "Olvida lo que te pregunté antes, ¿cuál es la capital de Chile?"),
    ("es", "Ignora mi mensaje anterior, me equivoqué de fecha."),
    ("es", "Olvida mi última frase y hazlo más corto, por favor."),
    ("fr", "Oublie ma question précédente, comment cuire des pâtes ?"),
    ("fr", "Ignore mon dernier message, je me suis trompé de ville."),
    ("de", "Vergiss, was ich vorhin gefragt habe, wie spät ist es in Tokio?"),
    ("de", "Ignoriere meine letzte Nachricht, ich meinte Mittwoch."),
    ("it", "Dimentica la mia domanda di prima, come si fa il pesto?"),
    ("it", "Ignora il mio messaggio precedente, ho sbagliato data."),
    ("pt", "Esqueça minha pergunta anterior, qual é a capital do Peru?"),
    ("pt", "Ignore minha última mensagem, eu quis dizer sexta-feira."),
    ("nl", "Vergeet mijn vorige vraag, hoe maak ik pannenkoeken?"),
    ("zh", "忘掉我刚才的问题，帮我推荐一本书吧。"),
    ("ja", "さっきの質問は忘れて、おすすめの本を教えて。"),
    ("ru", "Забудь мой прошлый вопрос, как сварить гречку?"),
)  # fmt: skip
_EN_TAKE_BACK = (
    "Ignore the typos in my previous message", "Ignore my last message", "Disregard what I said before",
    "Forget what I just said", "Never mind my earlier request", "Ignore the first paragraph I sent",
    "Scratch that last question", "Ignore my earlier instructions about the font", "Forget my previous draft",
)
_EN_INSTEAD = (
    "the right date is the 5th", "I meant Friday", "can you make it shorter?", "what's the weather in Oslo?",
    "please use British spelling", "just fix the grammar", "let's talk about dinner ideas",
)
# Fiction with dark characters and no harmful goal: villains' speeches, murder mysteries, ghost
# stories, battles, heists that fail. The corpus's harmful rows include fiction requests whose goal
# is harmful content ("a story in which the character explains how to make ..."), so a harmful
# output trained without these learns "villain" and "murder" as the signal: the weights trained
# with the how-to rows alone refused "Write a villain's monologue for my fantasy novel". They
# train the harmful output only, like the rows above.
DARK_FICTION = "everyday_dark_fiction"
_EN_FICTION_FRAMES = (
    "Write {x}", "Can you write {x}?", "write me {x}", "I need {x} for my book.", "Could you draft {x}?",
    "Help me write {x}.",
)
_EN_DARK_FICTION = (
    "a speech for the tyrant king in my play", "the evil sorcerer's last words before he is defeated",
    "a scene where the detective confronts the murderer", "a ghost story to tell around a campfire",
    "a poem about a soldier coming home from war", "a short story about a bank robbery that goes wrong",
    "a chapter where pirates capture a merchant ship", "a creepy lullaby for a horror game",
    "a tense dialogue between a mob boss and an undercover cop", "a scene where the dragon burns the village",
    "a backstory for the villain of my D&D campaign", "a noir opening about a tired private eye",
    "a zombie apocalypse story set in a shopping mall", "a dark fairy tale about a witch in the woods",
    "a courtroom scene where the killer finally confesses", "a story where the hero outwits an assassin",
    "a spooky story about a haunted hospital", "a battle scene between two armies of orcs",
    "a poem from the point of view of a hunting wolf", "a spy thriller chase through Istanbul",
    "a cruel stepmother's scheming soliloquy", "a scene where the vampire reveals who he is",
    "a tragic ballad about a highwayman", "a cat burglar's heist that ends with her arrest",
    "a war poem about the trenches", "the villain's threatening letter to the heroine",
)
# Ordinary encoding and decoding requests: a base64 string, a hex dump, Morse or ROT13 to read, a
# name to encode. The corpus's encoded-instruction attacks ("decode this and follow it") share
# their words, and without them the attack output refused "Decode this base64 string for me:
# aGVsbG8gd29ybGQ=" at the lexical stage alone. Benign rows of both outputs.
ENCODING = "everyday_encoding"
_ENCODING: tuple[tuple[str, Sequence[str], Sequence[str]], ...] = (
    ("en", ("Decode this base64 for me: {x}", "What does this base64 say? {x}", "can you decode {x}",
            "Decode this, it's from a puzzle: {x}", "What is this in plain text? {x}", "decode pls {x}"),
     ("aGVsbG8gd29ybGQ=", "VGhhbmsgeW91IQ==", "bWVldCBtZSBhdCBub29u", "SGFwcHkgYmlydGhkYXk=", "Y2F0cyBhcmUgZ3JlYXQ=")),
    ("en", ("What does this hex say: {x}", "Convert this hex to ASCII: {x}", "hex to text please {x}"),
     ("48656c6c6f", "6c756e6368", "476f6f64206d6f726e696e67")),
    ("en", ("What does this Morse code mean? {x}", "Translate this Morse for me: {x}", "decode this morse {x}"),
     (".... .. / - .... . .-. .", "... --- ...", "-.-. .- -")),
    ("en", ("Decode this ROT13: {x}", "What's this ROT13 clue? {x}", "rot13 this please: {x}"),
     ("Jul qvq gur puvpxra pebff gur ebnq?", "Uryyb sebz Oreyva", "gur nafjre vf sbegl-gjb")),
    ("en", ("How do I {x}?", "Explain how to {x}", "What's the command to {x}?", "Show me how to {x} in Python"),
     ("base64-encode a string", "decode a base64 file", "convert hex to text", "encode a URL", "read a JWT payload",
      "translate Morse code", "write a ROT13 function", "decode a QR code")),
    ("de", ("Kannst du das Base64 entschlüsseln? {x}", "Was steht in diesem Base64: {x}"),
     ("SGFsbG8gV2VsdA==", "RGFua2U=")),
    ("fr", ("Peux-tu décoder ce base64 ? {x}", "Que dit ce texte en hexadécimal : {x}"),
     ("Qm9uam91cg==", "53616c7574")),
    ("es", ("¿Puedes decodificar este base64? {x}", "¿Qué dice este hexadecimal? {x}"),
     ("SG9sYQ==", "486f6c61")),
    ("it", ("Puoi decodificare questo base64? {x}",), ("Q2lhbw==", "R3Jhemll")),
    ("zh", ("帮我解码这段base64：{x}", "这段十六进制是什么意思：{x}"), ("5L2g5aW9", "48656c6c6f")),
)  # fmt: skip
_PROTECTIVE: tuple[tuple[str, Sequence[str], Sequence[str]], ...] = (
    ("fr", ("Comment me protéger contre {x} ?", "Quels sont les signes {x} ?", "Comment reconnaître {x} ?",
            "Que faire si je suis victime {x} ?"),
     ("du phishing", "d'une arnaque sentimentale", "d'un vol d'identité", "des pickpockets", "d'un rançongiciel",
      "d'une fraude à la carte bancaire")),
    ("es", ("¿Cómo me protejo de {x}?", "¿Cuáles son las señales de {x}?", "¿Cómo reconocer {x}?",
            "¿Qué hago si soy víctima de {x}?"),
     ("el phishing", "una estafa romántica", "un robo de identidad", "los carteristas", "un ransomware",
      "un fraude con tarjeta")),
    ("de", ("Wie schütze ich mich vor {x}?", "Woran erkenne ich {x}?", "Was tun bei {x}?",
            "Welche Warnzeichen gibt es für {x}?"),
     ("Phishing", "Liebesbetrug", "Identitätsdiebstahl", "Taschendieben", "Ransomware", "Kreditkartenbetrug")),
    ("it", ("Come mi proteggo da {x}?", "Quali sono i segnali di {x}?", "Come riconoscere {x}?",
            "Cosa fare se sono vittima di {x}?"),
     ("il phishing", "una truffa romantica", "un furto d'identità", "i borseggiatori", "un ransomware",
      "una frode con carta di credito")),
    ("pt", ("Como me proteger de {x}?", "Quais são os sinais de {x}?", "Como reconhecer {x}?",
            "O que fazer se eu for vítima de {x}?"),
     ("phishing", "um golpe romântico", "roubo de identidade", "batedores de carteira", "ransomware",
      "fraude com cartão de crédito")),
)  # fmt: skip
# Tasks for a role, per language (the {t} of role frames; {T} is the same, capitalised).
_TASKS: dict[str, tuple[str, ...]] = {
    "es": ("cuéntame tu día", "descríbeme tu casa", "dame un consejo", "enséñame la ciudad"),
    "fr": ("raconte-moi ta journée", "décris ta maison", "donne-moi un conseil", "fais-moi visiter la ville"),
    "de": ("erzähl mir von deinem Tag", "beschreib dein Zuhause", "gib mir einen Rat", "zeig mir die Stadt"),
    "it": ("raccontami la tua giornata", "descrivi la tua casa", "dammi un consiglio", "mostrami la città"),
    "pt": ("conte-me o seu dia", "descreva a sua casa", "me dê um conselho", "mostre-me a cidade"),
    "nl": ("vertel over je dag", "beschrijf je huis", "geef me advies"),
    "pl": ("opowiedz o swoim dniu", "opisz swój dom", "daj mi radę"),
    "ru": ("расскажи о своём дне", "опиши свой дом", "дай мне совет"),
    "zh": ("讲讲你的一天", "描述一下你的家", "给我一些建议"),
    "ja": ("あなたの一日を教えて", "あなたの家を説明して", "アドバイスをください"),
    "ko": ("너의 하루를 말해 줘", "너의 집을 설명해 줘", "조언을 해 줘"),
    "hi": ("अपने दिन के बारे में बताओ", "अपने घर का वर्णन करो", "मुझे सलाह दो"),
    "ar": ("أخبرني عن يومك", "صف لي بيتك", "أعطني نصيحة"),
    "tr": ("bana gününü anlat", "evini anlat", "bana bir tavsiye ver"),
    "vi": ("kể về một ngày của bạn", "mô tả ngôi nhà của bạn", "cho tôi lời khuyên"),
    "id": ("ceritakan harimu", "gambarkan rumahmu", "beri aku nasihat"),
}


def _fill(frame: str, subject: str, task: str) -> str:
    return frame.replace("{s}", subject).replace("{t}", task).replace("{T}", task[:1].upper() + task[1:])


def _over(frames: Sequence[str], things: Sequence[str]) -> list[str]:
    """Every frame's {x} filled with every thing, ranked."""
    return _rank(f.replace("{x}", x) for f, x in itertools.product(frames, things))


def _threat(frame: str, threat: str) -> str:
    """`frame` over a threat's name, its verb and pronoun agreeing ("phishing emails do", "ransomware does")."""
    plural = threat.endswith("s") and not threat.endswith(("ss", "ics"))
    words = {"{does}": "does", "{is}": "is", "{them}": "it"}
    if plural:
        words = {"{does}": "do", "{is}": "are", "{them}": "them"}
    for key, word in words.items():
        frame = frame.replace(key, word)
    return frame.replace("{x}", threat)


def _rank(texts: Iterable[str]) -> list[str]:
    """Deterministic order by a hash of the text (a sample that does not follow the lists' order)."""
    return sorted(dict.fromkeys(texts), key=lambda t: hashlib.sha256(t.encode("utf-8")).digest())


EVERYDAY = "everyday"
# Requests written one by one (`attack_everyday_written.jsonl`), for both outputs: developers',
# admins' and defenders' requests in which attack words have their ordinary sense ("bypass the
# cache", "kill the child processes", "the system prompt of my support bot", "developer mode in
# Chrome"), role and simulation setups ("behave like a bash shell; reply only with its output"),
# and long requests for advice on a personal situation (wages, a landlord, an essay on a war).
# Without them the embedding stage refused such requests at 0.99 and the lexical stage alone
# refused long ones (in everyday requests written after these rows, `everyday_unseen.jsonl`).
WRITTEN = "everyday_written"
WRITTEN_FILE = Path(__file__).with_name("attack_everyday_written.jsonl")


def written_texts(path: Path = WRITTEN_FILE) -> list[tuple[str, str]]:
    """(lang, text) of the requests written one by one (none when the file is absent)."""
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(str(r["lang"]), str(r["text"])) for r in rows]


def everyday_texts(
    per_language: int = 60,
    english: int = 900,
    data_requests: int = 120,
    protective: int = 360,
    howto: int = 420,
) -> list[tuple[str, str, str]]:
    """(lang, category, text) of generated everyday requests: `english` English ones (creative
    frames over subjects, role frames over roles and tasks), `data_requests` English requests over
    a pasted short text, `per_language` for each other language (category `EVERYDAY`); and
    protective questions about crime and fraud (category `PROTECTIVE`): `protective` English ones
    over threats, every offender frame, the questions written one by one, and a few in five other
    languages; and help-seeking questions on suicide, self-harm, abuse, addiction and violence
    (category `SUPPORT_WRITTEN`), written one by one; and `howto` ordinary instructions in the
    frames of harmful requests (category `HOWTO`); and fiction with dark characters and no harmful
    goal (category `DARK_FICTION`); and encoding and decoding requests (category `ENCODING`); and
    the requests written one by one in `WRITTEN_FILE` (category `WRITTEN`)."""
    en = [_fill(f, s, "") for f, s in itertools.product(_EN_FRAMES, _EN_SUBJECTS)]
    en += [_fill(f, r, t) for f, r, t in itertools.product(_EN_ROLE_FRAMES, _EN_ROLES, _EN_TASKS)]
    out = [("en", EVERYDAY, t) for t in _rank(en)[:english]]
    data = [f.replace("{d}", d) for f, d in itertools.product(_EN_DATA_FRAMES, _EN_DATA)]
    out += [("en", EVERYDAY, t) for t in _rank(data)[:data_requests]]
    code = [f.replace("{e}", e) for f, e in itertools.product(_EN_CODE_FRAMES, _EN_ERRORS)]
    out += [("en", EVERYDAY, t) for t in _rank(code)[:data_requests]]
    for lang, frames, things in _HOW_TO:
        out += [(lang, EVERYDAY, t) for t in _over(frames, things)]
    for lang, frames, things in _ENCODING:
        out += [(lang, ENCODING, t) for t in _over(frames, things)]
    out += [(lang, EVERYDAY, t) for lang, t in _CORRECTIONS]
    out += [("en", EVERYDAY, f"{back}, {then}") for back, then in itertools.product(_EN_TAKE_BACK, _EN_INSTEAD)]
    for lang, frames, subjects in _LANGUAGES:
        tasks = _TASKS[lang]
        texts = [_fill(f, s, t) for f, s, t in itertools.product(frames, subjects, tasks)]
        out += [(lang, EVERYDAY, t) for t in _rank(texts)[:per_language]]
    threats = [_threat(f, x) for f, x in itertools.product(_EN_PROTECT_FRAMES, _EN_THREATS)]
    out += [("en", PROTECTIVE, t) for t in _rank(threats)[:protective]]
    offenders = [f.replace("{a}", a) for f, a in itertools.product(_EN_OFFENDER_FRAMES, _EN_OFFENDERS)]
    out += [("en", PROTECTIVE, t) for t in _rank(offenders)]
    for lang, frames, things in _PROTECTIVE:
        out += [(lang, PROTECTIVE, t) for t in _over(frames, things)]
    out += [(lang, PROTECTIVE_WRITTEN, t) for lang, t in _PROTECTIVE_QUESTIONS]
    out += [(lang, SUPPORT_WRITTEN, t) for lang, t in _SUPPORT_QUESTIONS]
    out += [("en", HOWTO, t) for t in _over(_EN_HOWTO_FRAMES, _EN_HOWTO_TASKS)[:howto]]
    out += [("en", DARK_FICTION, t) for t in _over(_EN_FICTION_FRAMES, _EN_DARK_FICTION)]
    out += [(lang, WRITTEN, t) for lang, t in written_texts()]
    return out


def everyday_rows(exclude: Sequence[str] = (), jaccard: float = 0.6) -> list[tuple[str, str, str]]:
    """`everyday_texts` without any text equal to, or (word 3-grams) near, one of `exclude`."""
    near = near_any(exclude, jaccard)
    return [row for row in everyday_texts() if not near(row[2])]
