"""Look-alike documents (issue 20): one template, a unique code each; the exact-match test of hybrid search.

Every document is a short depot report filled from the same template: the words differ little
(a city, a count, goods, a weekday), so a sentence embedding cannot tell them apart and the vector
list among them is noise; only the code (``INV-4821-3fa9c1``: 4 digits, 6 hex digits) singles one
out. The queries ask for the code alone and inside a question ("which depot filed reference
INV-4821-3fa9c1?"); a hit is the code's document in the top 5.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

CITIES = ("Lyon", "Porto", "Gdansk", "Malmo", "Turin", "Ghent", "Leeds", "Brno", "Graz", "Split", "Cork", "Bergen")
GOODS = ("ceramic tiles", "copper cable", "olive oil", "spare tyres", "paper rolls", "glass jars", "wool yarn",
         "steel bolts")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
TEMPLATE = (
    "Depot report from {city}. Reference {code} was filed by the {city} depot on {day}. The shipment of {n} "
    "pallets of {goods} arrived {timing}; the driver signed the delivery note and the warehouse manager confirmed "
    "the count. Any discrepancy must be reported to the regional office within five working days, quoting the "
    "reference above."
)
QUESTIONS = (
    "which depot filed reference {code}?",
    "when did the shipment {code} arrive?",
    "how many pallets were in delivery {code}?",
    "who confirmed the count for {code}?",
)


@dataclass(frozen=True)
class LookAlike:
    name: str  #: file name, ``lookalike-007.txt``
    text: str
    code: str

    def queries(self, i: int) -> dict[str, str]:
        """``{"alone": code, "in a question": question}`` (the question's wording cycles with ``i``)."""
        return {"alone": self.code, "in a question": QUESTIONS[i % len(QUESTIONS)].format(code=self.code)}


def lookalike_docs(n: int, seed: int = 20) -> list[LookAlike]:
    """``n`` look-alike documents with distinct codes, deterministic for ``seed``."""
    rng = random.Random(seed)
    docs: list[LookAlike] = []
    codes: set[str] = set()
    while len(docs) < n:
        code = f"INV-{rng.randrange(1000, 10000)}-{rng.randrange(16**6):06x}"
        if code in codes:
            continue
        codes.add(code)
        text = TEMPLATE.format(city=rng.choice(CITIES), code=code, day=rng.choice(DAYS), n=rng.randrange(4, 40),
                               goods=rng.choice(GOODS), timing=rng.choice(("on time", "a day late", "early")))
        docs.append(LookAlike(f"lookalike-{len(docs):03d}.txt", text, code))
    return docs
