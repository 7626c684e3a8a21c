"""A synthetic "facts" corpus: made-up people with attributes, described by many sentence templates.

The corpus is a stand-in for our real data while the pipeline is developed: it has a closed set of
facts (who lives where, works as what, owns which pet, was born in which year) that a model can only
predict by memorising them, plus template text that it learns quickly. Fact recall is measured by
``charlm.evaluate.fact_accuracy``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

SYLLABLES = ["ka", "lo", "mi", "ra", "ve", "to", "su", "ne", "di", "po", "za", "ri", "bo", "fe", "gu", "ya"]
CITIES = ["oslo", "lima", "baku", "kyiv", "riga", "doha", "rome", "perth", "quito", "dakar", "hanoi", "tunis",
          "sofia", "minsk", "accra", "bern"]
JOBS = ["baker", "pilot", "nurse", "judge", "miner", "tailor", "farmer", "potter", "sailor", "singer", "welder",
        "dentist"]
PETS = ["cat", "dog", "owl", "fox", "eel", "yak", "bat", "emu"]

RELATIONS = ("city", "job", "pet", "year")

TEMPLATES = {
    "city": ["{name} lives in {city}.", "the home of {name} is {city}.", "q: where does {name} live? a: {city}."],
    "job": ["{name} works as a {job}.", "by trade {name} is a {job}.", "q: what does {name} do? a: {job}."],
    "pet": ["{name} has a pet {pet}.", "the pet of {name} is a {pet}.", "q: which pet has {name}? a: {pet}."],
    "year": ["{name} was born in {year}.", "the birth year of {name} is {year}.", "q: when was {name} born? a: {year}."],
}
QUESTIONS = {
    "city": "q: where does {name} live? a:",
    "job": "q: what does {name} do? a:",
    "pet": "q: which pet has {name}? a:",
    "year": "q: when was {name} born? a:",
}


@dataclass
class Person:
    name: str
    city: str
    job: str
    pet: str
    year: str

    def value(self, relation: str) -> str:
        return getattr(self, relation)


@dataclass
class Corpus:
    people: list[Person]
    seed: int
    text_train: str = ""
    text_val: str = ""
    meta: dict = field(default_factory=dict)

    def questions(self, relation: str) -> list[tuple[str, str]]:
        return [(QUESTIONS[relation].format(name=p.name), " " + p.value(relation) + ".") for p in self.people]


def _names(n: int, rng: random.Random) -> list[str]:
    names: set[str] = set()
    while len(names) < n:
        names.add("".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 3)))))
    return sorted(names)


def _sentences(people: list[Person], n: int, rng: random.Random) -> list[str]:
    out = []
    for _ in range(n):
        person = rng.choice(people)
        relation = rng.choice(RELATIONS)
        template = rng.choice(TEMPLATES[relation])
        out.append(template.format(name=person.name, **{relation: person.value(relation)}))
    return out


def make_corpus(n_people: int = 120, train_sentences: int = 40000, val_sentences: int = 2000, seed: int = 0) -> Corpus:
    rng = random.Random(seed)
    people = [
        Person(name, rng.choice(CITIES), rng.choice(JOBS), rng.choice(PETS), str(rng.randint(1940, 2005)))
        for name in _names(n_people, rng)
    ]
    corpus = Corpus(people=people, seed=seed)
    corpus.text_train = " ".join(_sentences(people, train_sentences, rng))
    corpus.text_val = " ".join(_sentences(people, val_sentences, rng))
    corpus.meta = {"n_people": n_people, "train_sentences": train_sentences, "val_sentences": val_sentences}
    return corpus


def save_corpus(corpus: Corpus, folder: str | Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.txt").write_text(corpus.text_train)
    (folder / "val.txt").write_text(corpus.text_val)
    facts = [p.__dict__ for p in corpus.people]
    (folder / "facts.json").write_text(json.dumps({"seed": corpus.seed, "people": facts, **corpus.meta}, indent=1))


def load_corpus(folder: str | Path) -> Corpus:
    folder = Path(folder)
    meta = json.loads((folder / "facts.json").read_text())
    people = [Person(**p) for p in meta.pop("people")]
    return Corpus(people, meta.pop("seed"), (folder / "train.txt").read_text(), (folder / "val.txt").read_text(), meta)
