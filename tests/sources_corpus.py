"""The data-source tests' corpus: tests/corpus/ (a community garden's
documents: Markdown, text, reStructuredText, HTML) copied to a temporary
folder, plus `rules.pdf`, a three-page PDF written at test time."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.pdf_files import pdf_bytes

CORPUS = Path(__file__).resolve().parent / "corpus"
RULES_PAGES = (
    "Garden rules\n"
    "The gates open at 7 in the morning and close at 9 in the evening.\n"
    "Keep the paths clear of tools and hoses.\n"
    "A plot left untended for three months is offered to the next household\n"
    "on the waiting list.",
    "Fires and barbecues\n"
    "Bonfires are forbidden at all times: the smoke drifts into the houses.\n"
    "Diseased leaves are burnt in the brazier by the coordinator only.\n"
    "Small gas barbecues are allowed on the lawn at weekends.",
    "Animals and children\n"
    "Dogs are welcome if they are kept on a lead and away from the beds.\n"
    "Children must be supervised by an adult at all times, near the pond above all.",
)
DOCUMENTS = {
    "compost.html": 3,
    "events.md": 3,
    "history.txt": 2,
    "membership.rst": 1,
    "pests.md": 4,
    "rules.pdf": 3,
    "tools/shed.txt": 1,
    "watering.md": 4,
}
"""Each document of the corpus and its number of passages."""
PASSAGES = sum(DOCUMENTS.values())


def copy_corpus(target: Path) -> Path:
    """The corpus in `target` (a new folder), `rules.pdf` included."""
    shutil.copytree(CORPUS, target)
    (target / "rules.pdf").write_bytes(
        pdf_bytes(RULES_PAGES, title="Willow Lane garden rules")
    )
    return target
