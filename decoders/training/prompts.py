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
