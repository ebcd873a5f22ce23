"""Training prompts for a draft head, written for this project (Apache-2.0, like the code).

A head learns to predict what its target writes, so its data is the target's own answers
(self-distillation) to prompts of the kinds people ask: explanations, lists, stories, letters,
code, arithmetic word problems, translation, rewriting and summarising. They are built from
small word lists by templates with a fixed seed, so the set is the same on every machine and
its order is stable (a resumed corpus continues where it stopped). None of them comes from
Spec-Bench or MT-bench, which the bench evaluates on.
"""

from __future__ import annotations

import random

TOPICS = (
    "photosynthesis", "black holes", "the water cycle", "volcanoes", "the French Revolution", "the Roman Empire",
    "machine learning", "the internet", "vaccines", "climate change", "plate tectonics", "the immune system",
    "electric cars", "solar panels", "the stock market", "inflation", "democracy", "the printing press",
    "coffee", "bread baking", "chess", "the Olympic Games", "jazz music", "the Renaissance", "honey bees",
    "the moon landing", "earthquakes", "recycling", "the human heart", "DNA", "antibiotics", "rainbows",
    "the Great Wall of China", "ancient Egypt", "the Silk Road", "cryptography", "batteries", "wind turbines",
    "the periodic table", "gravity", "sleep", "meditation", "exercise", "nutrition", "time zones", "maps",
    "libraries", "museums", "public transport", "bicycles", "trains", "airplanes", "the ocean tides",
    "coral reefs", "rain forests", "deserts", "glaciers", "the Arctic", "penguins", "elephants", "dolphins",
    "wolves", "owls", "mushrooms", "trees", "gardening", "composting", "tea", "chocolate", "cheese making",
    "origami", "photography", "painting", "poetry", "theatre", "film making", "video games", "robots",
    "3D printing", "quantum computers", "smartphones", "email", "passwords", "open source software",
    "databases", "spreadsheets", "budgeting", "saving money", "job interviews", "public speaking",
    "learning a language", "studying for exams", "team work", "leadership", "negotiation", "volunteering",
    "first aid", "fire safety", "camping", "hiking", "swimming", "running a marathon", "yoga", "football",
    "basketball", "tennis", "the guitar", "the piano", "opera", "folk tales", "mythology", "the alphabet",
    "prime numbers", "fractions", "probability", "geometry", "algebra", "statistics", "the speed of light",
    "magnets", "electricity", "sound waves", "telescopes", "microscopes", "bacteria", "viruses", "cells",
    "the brain", "memory", "emotions", "friendship", "kindness", "habits", "procrastination", "minimalism",
)
PLACES = ("Paris", "Tokyo", "Kenya", "Peru", "Norway", "Canada", "India", "Mexico", "Egypt", "Australia",
          "Iceland", "Vietnam", "Morocco", "Brazil", "Scotland", "New Zealand", "Italy", "Chile", "Japan", "Spain")
PEOPLE = ("a teacher", "a nurse", "a farmer", "a software engineer", "a chef", "a student", "a pilot",
          "a librarian", "a firefighter", "a gardener", "a musician", "a scientist", "a child", "a grandmother")
LANGUAGES = ("French", "Spanish", "German", "Italian", "Portuguese")
SENTENCES = (
    "The weather is beautiful today.", "Where is the nearest train station?", "I would like a cup of coffee.",
    "My brother works in a hospital.", "We are going to the beach tomorrow.", "This book is very interesting.",
    "Can you help me carry these boxes?", "The museum opens at nine o'clock.", "She plays the piano every day.",
    "I lost my keys this morning.", "The children are playing in the garden.", "How much does this cost?",
    "Please close the window, it is cold.", "They moved to a new city last year.", "Dinner will be ready soon.",
    "I have never seen such a big dog.", "The meeting was moved to Friday.", "He forgot his umbrella again.",
)
FUNCTIONS = (
    "reverses a string", "checks whether a number is prime", "returns the largest item of a list",
    "counts the vowels in a word", "computes the factorial of n", "merges two sorted lists",
    "removes duplicates from a list while keeping the order", "converts Celsius to Fahrenheit",
    "checks whether a word is a palindrome", "returns the n-th Fibonacci number", "sums the digits of a number",
    "finds the most common word in a text", "flattens a nested list", "validates an email address",
    "computes the average of a list of numbers", "sorts a list of names by length",
)
LANGS = ("Python", "JavaScript", "C", "Rust", "Go", "Java")

TEMPLATES = (
    "Explain {topic} in simple terms.", "What is {topic}?", "Give me three interesting facts about {topic}.",
    "Write a short paragraph about {topic}.", "Why is {topic} important?", "How does {topic} work?",
    "Write a short poem about {topic}.", "What are the pros and cons of {topic}?",
    "Explain {topic} to a ten-year-old.", "List five questions a student might ask about {topic}.",
    "Write a short story about {person} who discovers {topic}.", "How would {person} explain {topic}?",
    "Write a tweet about {topic}.", "Give me a study plan to learn about {topic} in one week.",
    "Plan a three-day trip to {place}.", "What should I pack for a trip to {place}?",
    "Describe a typical day in {place}.", "Write a postcard from {place} to a friend.",
    "Write an email to {person} asking for advice about {topic}.", "Write a job advertisement for {person}.",
    "Translate to {language}: {sentence}", "How do you say \"{sentence}\" in {language}?",
    "Write a {lang} function that {function}.", "Explain how to write a program that {function} in {lang}.",
    "Rewrite this sentence to sound more formal: {sentence}", "Correct the grammar: {sentence_lower}",
    "A shop sells pencils for {a} cents each. How much do {b} pencils cost? Explain step by step.",
    "Tom has {a} apples and gives {b} to his friend. How many apples does he have left?",
    "A train travels {a} kilometres in {b} hours. What is its average speed?",
    "What is {a} times {b}? Show your work.", "If a book costs {a} dollars and is {b} percent off, what is the price?",
    "Sara reads {b} pages a day. How many days does she need for a book of {a} pages?",
)


def training_prompts(count: int = 4000, seed: int = 7) -> list[str]:
    """``count`` distinct prompts, the same on every machine for the same ``seed``."""
    rng = random.Random(seed)
    seen: set[str] = set()
    prompts: list[str] = []
    while len(prompts) < count:
        template = rng.choice(TEMPLATES)
        sentence = rng.choice(SENTENCES)
        text = template.format(
            topic=rng.choice(TOPICS), place=rng.choice(PLACES), person=rng.choice(PEOPLE),
            language=rng.choice(LANGUAGES), sentence=sentence, sentence_lower=sentence.lower().rstrip("."),
            function=rng.choice(FUNCTIONS), lang=rng.choice(LANGS), a=rng.randint(12, 480), b=rng.randint(2, 11),
        )
        if text not in seen:
            seen.add(text)
            prompts.append(text)
    return prompts


def summary_prompt(document: str) -> str:
    """A prompt that asks the target to summarise (and so copy from) a text it wrote earlier:
    the copying that summarisation and retrieval answers do, learned from the target's own words."""
    return f"Summarize the following text in two sentences.\n\n{document}"


# A second set (keys "q0", "q1", ...): the kinds of request the first set lacks, written for this
# project like the first. Translation into English from sentences written here, short factual
# questions, multi-step arithmetic stories, writing and role-play requests, extraction and
# rewriting. A corpus grown before this set existed keeps its "p" keys; both sets interleave.
GERMAN = (
    "Das Wetter ist heute sehr schön.", "Wo ist der nächste Bahnhof?", "Ich möchte eine Tasse Tee, bitte.",
    "Mein Bruder arbeitet seit drei Jahren in einem Krankenhaus.", "Wir fahren morgen mit dem Zug nach Berlin.",
    "Dieses Buch ist spannender als der Film.", "Kannst du mir bitte beim Umzug helfen?",
    "Das Museum öffnet um neun Uhr und schließt um sechs.", "Sie spielt jeden Abend Klavier.",
    "Ich habe heute Morgen meinen Schlüssel verloren.", "Die Kinder spielen im Garten Fußball.",
    "Wie viel kostet eine Fahrkarte nach Hamburg?", "Bitte schließ das Fenster, es ist kalt.",
    "Letztes Jahr sind sie in eine neue Stadt gezogen.", "Das Abendessen ist in zehn Minuten fertig.",
    "Die Regierung hat ein neues Gesetz zum Klimaschutz beschlossen.", "Der Zug hatte wegen eines Sturms Verspätung.",
    "Viele Menschen arbeiten heute von zu Hause aus.", "Die Preise für Lebensmittel sind stark gestiegen.",
    "Unser Lehrer erklärt die Aufgaben immer sehr geduldig.", "Im Sommer gehen wir oft am See schwimmen.",
    "Die Firma hat im letzten Quartal mehr verkauft als erwartet.", "Er liest jeden Morgen die Zeitung.",
    "Der Arzt sagt, ich soll mehr Wasser trinken.", "Am Wochenende besuchen wir unsere Großeltern.",
    "Die Brücke wird im nächsten Monat repariert.", "Ich lerne Spanisch, weil ich nach Mexiko reisen will.",
    "Das Konzert war ausverkauft, aber wir hatten Glück.", "Die Stadt plant mehr Radwege im Zentrum.",
    "Meine Schwester studiert Medizin in Wien.", "Der Hund schläft den ganzen Tag auf dem Sofa.",
)
FRENCH = (
    "Il fait très beau aujourd'hui.", "Où se trouve la gare la plus proche ?", "Je voudrais un café, s'il vous plaît.",
    "Nous partons en vacances la semaine prochaine.", "Ce restaurant est fermé le lundi.",
    "Les enfants jouent dans le parc après l'école.", "La réunion a été reportée à vendredi.",
    "Elle travaille comme infirmière depuis dix ans.", "Le train est arrivé avec une heure de retard.",
    "La ville construit une nouvelle bibliothèque.",
)
SPANISH = (
    "Hoy hace mucho calor.", "¿Dónde está la parada de autobús?", "Mi madre cocina muy bien.",
    "Vamos a la playa el sábado.", "El libro que me prestaste es muy interesante.",
    "La tienda abre a las diez de la mañana.", "Mis amigos viven cerca del río.",
    "El gobierno anunció nuevas medidas económicas.", "Necesito comprar pan y leche.",
    "El partido terminó en empate.",
)
THINGS = (
    "the telephone", "the light bulb", "penicillin", "the theory of relativity", "the World Wide Web",
    "the steam engine", "the first vaccine", "the periodic table", "the printing press", "the radio",
    "the airplane", "the computer mouse", "the bicycle", "the microscope", "the thermometer",
)
COUNTRIES = ("France", "Japan", "Brazil", "Canada", "Egypt", "India", "Kenya", "Mexico", "Norway", "Peru",
             "Australia", "Germany", "Italy", "Spain", "Chile", "Vietnam", "Turkey", "Poland", "Ghana", "Nepal")
ITEMS = ("notebooks", "oranges", "tickets", "cupcakes", "marbles", "stickers", "bottles of water", "books")
NAMES = ("Maria", "James", "Aisha", "Chen", "Lucas", "Priya", "Omar", "Sofia", "Noah", "Yuki")

MORE_TEMPLATES = (
    "Translate German to English: {german}", "Translate the following German sentence into English: {german}",
    "Translate French to English: {french}", "Translate Spanish to English: {spanish}",
    "What does this German sentence mean in English? {german}",
    "Who invented {thing}?", "When was {thing} invented?", "What is the capital of {country}?",
    "What language is spoken in {country}?", "What is {country} famous for?", "Where is {place}?",
    "What is the population of {country}, roughly?", "Who was the first person to study {topic}?",
    "{name} buys {b} packs of {item}. Each pack has {c} {item} and costs {a} dollars. How many {item} does "
    "{name} have, and how much did they cost? Think step by step.",
    "{name} earns {a} dollars a week and saves {c} dollars of it. How much does {name} save in {b} weeks, and "
    "how much is spent? Solve it step by step.",
    "A class has {a} students. {c} of every 10 students walk to school and the rest take the bus. How many take "
    "the bus?", "{name} had {a} {item}. They gave away {b} and then bought {c} more. How many are left?",
    "A recipe needs {c} eggs for {b} people. How many eggs are needed for {a} people?",
    "Write a persuasive essay about why {topic} matters.", "Compose an engaging blog post about a trip to {place}.",
    "Write a product description for a gadget that helps with {topic}.",
    "Pretend you are {person} and describe your day.", "Act as a tour guide in {place} and welcome a group.",
    "Imagine you are a detective. Describe how you would solve a mystery about {topic}.",
    "Write a dialogue between {person} and a robot about {topic}.",
    "Summarize the main ideas of {topic} in one paragraph.", "Give a step-by-step guide to {topic} for beginners.",
    "Compare {topic} and {topic2}: how are they alike and how do they differ?",
    "What are the three most common misconceptions about {topic}?",
    "Write a formal letter to the mayor of a town in {country} about {topic}.",
    "Write a {lang} class that {function}, with comments.", "What does this {lang} code do?\n\ndef f(x):\n"
    "    return [i * i for i in range(x) if i % 2 == 0]",
    "Fix the bug in this function that {function}:\n\ndef solve(items):\n    result = 0\n"
    "    for i in range(len(items) + 1):\n        result += items[i]\n    return result",
    "Explain the difference between a list and a dictionary in {lang}.",
)


def more_prompts(count: int = 4000, seed: int = 11) -> list[str]:
    """The second set's ``count`` distinct prompts (keys "q{i}"), fixed by ``seed`` like the first."""
    rng = random.Random(seed)
    seen: set[str] = set()
    prompts: list[str] = []
    while len(prompts) < count:
        topic, topic2 = rng.sample(TOPICS, 2)
        text = rng.choice(MORE_TEMPLATES).format(
            german=rng.choice(GERMAN), french=rng.choice(FRENCH), spanish=rng.choice(SPANISH),
            thing=rng.choice(THINGS), country=rng.choice(COUNTRIES), place=rng.choice(PLACES), topic=topic,
            topic2=topic2, person=rng.choice(PEOPLE), name=rng.choice(NAMES), item=rng.choice(ITEMS),
            lang=rng.choice(LANGS), function=rng.choice(FUNCTIONS),
            a=rng.randint(12, 480), b=rng.randint(2, 11), c=rng.randint(2, 9),
        )
        if text not in seen:
            seen.add(text)
            prompts.append(text)
    return prompts


def context_prompt(document: str) -> str:
    """A question answered from a text the target wrote earlier (retrieval-style copying)."""
    return (f"Use the text below to answer the question.\n\nText: {document}\n\n"
            "Question: According to the text, what are the two most important facts?")
