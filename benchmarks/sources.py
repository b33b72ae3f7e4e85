"""Data sources: indexing a folder of small documents, and answering queries.

In the bench's own process, no server: N small Markdown documents (about
1.5 KB each, three sections of made-up words) are written to a temporary
folder; a `SourceIndex` in a SQLite file beside it indexes them all (one
`refresh`, timed: walking, reading, parsing, splitting into passages and
writing FTS5), then refreshes again with nothing changed (timed: only
stats, nothing read); then Q queries of two to four words drawn from the
documents are each timed (`search`, BM25, 5 passages). Every run is
checked: every document indexed and none refused, nothing read the second
time, and every query finds a passage.

    python -m benchmarks.sources [DOCUMENTS] [QUERIES]   # just this, as JSON
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from backend.sources.index import SourceIndex
from benchmarks.checks import BenchError
from benchmarks.results import SourcesIndexing
from benchmarks.stats import Summary

SEED = 13
VOCABULARY = 3000
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "shi", "vo", "dre", "pan", "quel")


async def measure(documents: int, queries: int) -> SourcesIndexing:
    randomness = random.Random(SEED)
    words = _vocabulary(randomness)
    with tempfile.TemporaryDirectory(prefix="loopwire-sources-") as workdir:
        folder = Path(workdir) / "documents"
        texts = await asyncio.to_thread(
            _write_corpus, folder, documents, words, randomness
        )
        asked = [_query(randomness, texts) for _ in range(queries)]
        index = await SourceIndex.open(Path(workdir) / "sources.db", {"bench": folder})
        try:
            started = time.perf_counter()
            report = await index.refresh("bench")
            index_s = time.perf_counter() - started
            if (report.added, report.refused) != (documents, ()):
                raise BenchError(f"the sources index went wrong: {report}")
            started = time.perf_counter()
            again = await index.refresh("bench")
            refresh_s = time.perf_counter() - started
            if (again.unchanged, again.read) != (documents, 0):
                raise BenchError(f"an unchanged refresh read files: {again}")
            await index.search(asked[0])  # warm-up
            query_ms = [await _timed_search(index, query) for query in asked]
        finally:
            await index.aclose()
    return SourcesIndexing(
        documents=documents,
        megabytes=sum(len(text) for text in texts) / 1e6,
        passages=report.passages,
        index_s=index_s,
        unchanged_refresh_s=refresh_s,
        queries=queries,
        query_ms=Summary.of(query_ms),
    )


async def _timed_search(index: SourceIndex, query: str) -> float:
    started = time.perf_counter()
    hits = await index.search(query)
    elapsed = (time.perf_counter() - started) * 1000
    if not hits:
        raise BenchError(f"the query {query!r} found nothing")
    return elapsed


def _vocabulary(randomness: random.Random) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < VOCABULARY:
        count = randomness.randint(2, 4)
        words["".join(randomness.choices(SYLLABLES, k=count))] = None
    return list(words)


def _sentence(randomness: random.Random, words: list[str]) -> str:
    # a Zipf-like draw: a few words are common, most are rare
    drawn = [
        words[min(int(randomness.paretovariate(1.1)) - 1, len(words) - 1)]
        if randomness.random() < 0.5
        else randomness.choice(words)
        for _ in range(randomness.randint(8, 16))
    ]
    return " ".join(drawn).capitalize() + "."


def _document(number: int, randomness: random.Random, words: list[str]) -> str:
    parts = [f"# Document {number}", ""]
    for section in range(3):
        parts += [f"## Part {section + 1}: {randomness.choice(words)}", ""]
        for _ in range(2):
            sentences = (_sentence(randomness, words) for _ in range(3))
            parts += [" ".join(sentences), ""]
    return "\n".join(parts)


def _write_corpus(
    folder: Path, count: int, words: list[str], randomness: random.Random
) -> list[str]:
    texts = []
    for number in range(count):
        shelf = folder / f"shelf-{number // 100:02d}"
        shelf.mkdir(parents=True, exist_ok=True)
        text = _document(number, randomness, words)
        (shelf / f"doc-{number:04d}.md").write_text(text, encoding="utf-8")
        texts.append(text)
    return texts


def _query(randomness: random.Random, texts: list[str]) -> str:
    """Two to four words of one document, as a person might remember them."""
    words = [w for w in randomness.choice(texts).split() if w.isalpha()]
    return " ".join(randomness.sample(words, randomness.randint(2, 4)))


def main(argv: list[str]) -> int:
    documents = int(argv[0]) if argv else 1000
    queries = int(argv[1]) if len(argv) > 1 else 200
    figures = asyncio.run(measure(documents, queries))
    print(json.dumps(dataclasses.asdict(figures), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
