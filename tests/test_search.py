"""Search over a user's conversations (`store/search.py`, `store/sql_search.py`,
`GET /api/conversations?q=`): on SQLite (FTS5) and PostgreSQL (full text),
in the store, through a live server, across a restart and a migration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from backend.llm.base import Message
from backend.store import migrate, sql_search
from backend.store.base import Batch
from backend.store.records import ConversationRecord
from backend.store.search import SNIPPET_CHARS, SearchHit, query_words, snippet
from backend.store.sql import SqlStore
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, test_registry

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"


async def keep(
    store: SqlStore,
    cid: str,
    *said: Message,
    owner: str = "ann",
    title: str = "",
    at: float = 100.0,
) -> None:
    """A conversation of `owner`, titled `title`, holding `said`."""
    record = ConversationRecord(
        id=cid, owner=owner, title=title, created_at=at, updated_at=at
    )
    messages = list(enumerate(said))
    await store.write(Batch(cid, at, create=record, messages=messages))


def found(hits: list[SearchHit]) -> list[tuple[str, str, int | None, str]]:
    """Each hit as (conversation, where, position, snippet)."""
    return [(h.conversation.id, h.where, h.position, h.snippet) for h in hits]


async def shopping(store: SqlStore) -> None:
    """ann's shopping conversation, and bob's that says the same."""
    said = [
        Message.user("buy oat milk and bread"),
        Message.assistant("Noted: the list has two things."),
        Message(role="tool", content="toolonly words", tool_call_id="c1"),
    ]
    await keep(store, "c1", *said, title="Weekend shopping")
    await keep(store, "b1", *said, owner="bob", title="Weekend shopping")


# ---------------------------------------------------------------- the store


async def test_a_message_word_a_title_word_and_a_prefix_find_it(
    store: SqlStore,
) -> None:
    """A word of a message, of the title, or the start of one finds the
    conversation, with where it matched; tool results are not searched."""
    await shopping(store)
    assert found(await store.search("ann", "bread", limit=10)) == [
        ("c1", "message", 0, "buy oat milk and «bread»")
    ]
    assert found(await store.search("ann", "SHOPPING", limit=10)) == [
        ("c1", "title", None, "Weekend «shopping»")
    ]
    assert found(await store.search("ann", "the li", limit=10)) == [
        ("c1", "message", 1, "Noted: «the» «list» has two things.")
    ]
    assert await store.search("ann", "toolonly", limit=10) == []
    assert await store.search("ann", "milk cheese", limit=10) == []


async def test_another_users_conversations_are_never_found(store: SqlStore) -> None:
    """Each owner finds their own conversation only; a stranger finds none."""
    await shopping(store)
    assert [h.conversation.id for h in await store.search("ann", "milk", limit=9)] == [
        "c1"
    ]
    assert [h.conversation.id for h in await store.search("bob", "milk", limit=9)] == [
        "b1"
    ]
    assert await store.search("eve", "milk", limit=9) == []


@pytest.mark.parametrize("query", ['"', "*", "(", "-", ":", '"*(-:)', "-- :* ("])
async def test_a_query_of_punctuation_finds_nothing_and_never_fails(
    store: SqlStore, query: str
) -> None:
    """FTS syntax characters alone are no words: nothing is found."""
    await shopping(store)
    assert await store.search("ann", query, limit=10) == []


@pytest.mark.parametrize(
    "query",
    ['"bread', "bread*", "(bread)", "-bread", ":bread", 'milk AND "bread'],
)
async def test_syntax_characters_around_words_are_separators(
    store: SqlStore, query: str
) -> None:
    """Quotes, `*`, parentheses, `-` and `:` around words mean nothing."""
    await shopping(store)
    hits = await store.search("ann", query, limit=10)
    assert [(h.conversation.id, h.position) for h in hits] == [("c1", 0)]


async def test_operator_words_are_plain_words(store: SqlStore) -> None:
    """`AND`, `OR` and `NOT` are words to find, not operators."""
    await keep(store, "c1", Message.user("cats and dogs"))
    await keep(store, "c2", Message.user("cats or dogs"))
    assert found(await store.search("ann", "AND", limit=10)) == [
        ("c1", "message", 0, "cats «and» dogs")
    ]
    assert found(await store.search("ann", "cats OR", limit=10)) == [
        ("c2", "message", 0, "«cats» «or» dogs")
    ]
    assert await store.search("ann", "NOT", limit=10) == []


async def test_deleted_edited_and_retitled_conversations_are_found_as_they_are(
    store: SqlStore,
) -> None:
    """A deleted conversation, a message cut by an edit or rewritten, and an
    old title are not found any more; what replaced them is."""
    await shopping(store)
    await keep(store, "c2", Message.user("pears please"), title="fruit")
    cut = Batch("c1", 101.0, truncate_history_at=0)
    cut.messages = [(0, Message.user("buy apples"))]
    await store.write(cut)
    assert await store.search("ann", "bread", limit=10) == []
    assert await store.search("ann", "list", limit=10) == []
    assert [h.position for h in await store.search("ann", "apples", limit=10)] == [0]

    await store.write(Batch("c1", 102.0, messages=[(0, Message.user("buy plums"))]))
    assert await store.search("ann", "apples", limit=10) == []
    assert await store.rename_conversation("c1", "Market day")
    assert await store.search("ann", "shopping", limit=10) == []
    assert found(await store.search("ann", "market", limit=10)) == [
        ("c1", "title", None, "«Market» day")
    ]

    assert await store.delete_conversation("c2")
    assert await store.search("ann", "pears", limit=10) == []
    assert await store.search("ann", "fruit", limit=10) == []
    assert [
        h.conversation.id for h in await store.search("bob", "bread", limit=10)
    ] == ["b1"]
    if store.url.startswith("sqlite"):
        await store.run_sync(index_in_step)


def index_in_step(connection: sa.Connection) -> None:
    """The FTS5 index holds exactly the rows of `search_docs`, and those are
    exactly the titles and the searched messages."""
    connection.execute(
        sa.text("INSERT INTO search_index (search_index) VALUES ('integrity-check')")
    )
    indexed = connection.execute(sa.text("SELECT id FROM search_index_docsize"))
    kept = connection.execute(sa.text("SELECT id FROM search_docs"))
    assert sorted(indexed.scalars()) == sorted(kept.scalars())
    docs = connection.execute(
        sa.text("SELECT conversation_id, position, body FROM search_docs")
    )
    expected = connection.execute(
        sa.text(
            "SELECT id, -1, title FROM conversations WHERE title <> '' UNION ALL "
            "SELECT conversation_id, position, content FROM messages "
            "WHERE role IN ('user', 'assistant') AND content <> ''"
        )
    )
    assert sorted(map(tuple, docs)) == sorted(map(tuple, expected))


async def test_postgresql_can_answer_from_its_gin_indexes(
    pg_database_url: str,
) -> None:
    """The expressions the search matches are the indexed ones: with no
    other way in, PostgreSQL reads the GIN indexes."""
    store = SqlStore(pg_database_url)
    await store.open()
    matching = {
        "conversations": f"{sql_search.TITLE_VECTOR} @@ q",
        "messages": f"{sql_search.SEARCHED_ROLES} AND {sql_search.MESSAGE_VECTOR} @@ q",
    }

    def plans(connection: sa.Connection) -> list[str]:
        connection.execute(sa.text("SET LOCAL enable_seqscan = off"))
        return [
            " ".join(
                connection.execute(
                    sa.text(
                        f"EXPLAIN SELECT 1 FROM {table}, "
                        f"to_tsquery('simple', 'milk:*') AS q WHERE {where}"
                    )
                ).scalars()
            )
            for table, where in matching.items()
        ]

    try:
        titles, messages = await store.run_sync(plans)
    finally:
        await store.close()
    assert "search_titles" in titles
    assert "search_messages" in messages


async def test_equal_matches_come_newest_first_up_to_the_limit(
    store: SqlStore,
) -> None:
    """Conversations that match alike are listed by their last activity."""
    for n, at in enumerate([100.0, 300.0, 200.0]):
        await keep(store, f"c{n}", Message.user("milk"), at=at)
    hits = await store.search("ann", "milk", limit=2)
    assert [h.conversation.id for h in hits] == ["c1", "c2"]
    assert hits[0].conversation.updated_at == 300.0


async def test_a_database_at_0007_is_upgraded_and_its_messages_indexed(
    database_url: str,
) -> None:
    """Migration 0008 indexes the titles and messages already stored."""
    old = SqlStore(database_url)

    def at_0007(connection: sa.Connection) -> None:
        migrate.upgrade(connection, "0007")
        connection.execute(
            sa.text(
                "INSERT INTO conversations (id, owner, title, created_at, "
                "updated_at, settings) VALUES ('c1', 'ann', 'Old notes', 1, 2, '{}')"
            )
        )
        connection.execute(
            sa.text(
                "INSERT INTO messages (conversation_id, position, role, content) "
                "VALUES ('c1', 0, 'user', 'remember the café'), "
                "('c1', 1, 'tool', 'hidden'), ('c1', 2, 'assistant', NULL)"
            )
        )

    await old.run_sync(at_0007)
    await old.close()
    upgraded = SqlStore(database_url)
    await upgraded.open()
    try:
        assert await upgraded.revision() == "0013"
        assert found(await upgraded.search("ann", "remem", limit=5)) == [
            ("c1", "message", 0, "«remember» the café")
        ]
        assert found(await upgraded.search("ann", "notes", limit=5)) == [
            ("c1", "title", None, "Old «notes»")
        ]
        assert await upgraded.search("ann", "hidden", limit=5) == []
    finally:
        await upgraded.close()


# ---------------------------------------------------------------- snippets


def test_a_snippet_is_cut_around_the_first_match_at_word_boundaries() -> None:
    """A long text shows about 160 characters around its first match, cut
    between words, with `…` where it was cut and every match marked."""
    text = " ".join(f"w{n}" for n in range(100)) + " milk\nand more milk " + "z " * 200
    shown = snippet(text, query_words("milk"))
    assert shown.startswith("…") and shown.endswith("…")
    assert "«milk» and more «milk»" in shown
    bare = shown.replace("«", "").replace("»", "").strip("…")
    assert len(bare) <= SNIPPET_CHARS
    assert bare.startswith("w") and bare.split()[0] in text.split()
    assert shown.index("«milk»") - 1 <= 40


def test_a_snippet_matches_without_case_or_accents_and_by_prefix() -> None:
    """Words match folded; the last word of the query also as a prefix."""
    assert snippet("Un Café, two CAFES", query_words("cafe")) == (
        "Un «Café», two «CAFES»"
    )
    assert snippet("cat catalogue cat", query_words("cat cat")) == (
        "«cat» «catalogue» «cat»"
    )
    assert snippet("short text", ["absent"]) == "short text"


# ---------------------------------------------------------------- the API


def http(harness: Harness, token: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        base_url=harness.server.url(""), timeout=30, headers=headers
    )


async def chat(harness: Harness, content: str, token: str | None = None) -> str:
    """A plain run in a new conversation; its id once stored."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client, ready = await harness.ready_client(**headers)
    await client.chat(content)
    await harness.service.flush_all()
    session_id: str = ready["session_id"]
    return session_id


async def search(api: httpx.AsyncClient, q: str, **params: Any) -> Any:
    response = await api.get("/api/conversations", params={"q": q, **params})
    assert response.status_code == 200, response.text
    return response.json()


async def test_over_the_api_each_user_finds_their_own(
    start_server: StartServer, tmp_path: Path
) -> None:
    """`?q=` lists the caller's matching conversations with where they
    matched; another user's are never listed."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {ALICE}\nbob: {BOB}\n")
    tokens.chmod(0o600)
    llm = ScriptedLLM("Noted: oat milk.", "Noted too.")
    harness = await start_server(llm, test_registry(), auth_tokens_file=tokens)
    mine = await chat(harness, "buy oat milk", ALICE)
    await chat(harness, "buy oat milk", BOB)
    async with http(harness, ALICE) as api:
        body = await search(api, "noted")
        listed = (await api.get("/api/conversations")).json()["items"]
    summary = next(item for item in listed if item["id"] == mine)
    assert body == {
        "items": [
            {
                **summary,
                "match": {
                    "in": "message",
                    "position": 1,
                    "snippet": "«Noted»: oat milk.",
                },
            }
        ],
        "next": None,
    }
    async with http(harness, BOB) as api:
        assert [i["match"] for i in (await search(api, "oat mil"))["items"]] == [
            {"in": "title", "position": None, "snippet": "buy «oat» «milk»"}
        ]
        assert (await search(api, "noted"))["items"][0]["match"]["snippet"] == (
            "«Noted» too."
        )
        assert (await search(api, "oat milk"))["items"][0]["id"] != mine


async def test_blank_queries_are_refused_and_punctuation_finds_nothing(
    start_server: StartServer,
) -> None:
    """An empty or blank `q` (or `q` with a cursor) is a 400 saying why; a
    `q` of syntax characters is an empty list."""
    harness = await start_server(ScriptedLLM("ok"), test_registry())
    await chat(harness, "milk")
    async with http(harness) as api:
        for params in [{"q": ""}, {"q": "  \t"}, {"q": "milk", "cursor": "x"}]:
            response = await api.get("/api/conversations", params=params)
            assert response.status_code == 400
            assert response.json()["error_type"] == "invalid_message"
        blank = await api.get("/api/conversations", params={"q": " "})
        assert blank.json()["message"] == "q must be 1 to 500 characters, not blank"
        assert await search(api, '"*()-: AND') == {"items": [], "next": None}
        assert await search(api, '"*()-:') == {"items": [], "next": None}


async def test_search_across_a_restart_an_edit_and_a_delete(
    start_server: StartServer, database_url: str
) -> None:
    """A restarted server finds what the first one stored; an edited message
    and a deleted conversation are not found any more."""
    llm = ScriptedLLM("Sure: bring lemonade.")
    first = await start_server(llm, test_registry(), database_url=database_url)
    session = await chat(first, "plan the garden party")
    await first.server.stop()

    llm = ScriptedLLM("Fine.")
    harness = await start_server(llm, test_registry(), database_url=database_url)
    async with http(harness) as api:
        hits = (await search(api, "lemon"))["items"]
        assert [(h["id"], h["match"]) for h in hits] == [
            (
                session,
                {"in": "message", "position": 1, "snippet": "Sure: bring «lemonade»."},
            )
        ]
        client, _ = await harness.ready_client(f"session_id={session}&last_seq=0")
        replayed = await client.run()  # the first run, as it was sent
        assert replayed[-2]["message"] == "Sure: bring lemonade."
        runs = (await api.get(f"/api/conversations/{session}")).json()["runs"]
        await client.chat("plan the picnic", replace_from=runs[0]["id"])
        await harness.service.flush_all()
        assert (await search(api, "lemonade"))["items"] == []
        assert [h["id"] for h in (await search(api, "picnic"))["items"]] == [session]
        assert (await api.delete(f"/api/conversations/{session}")).status_code == 204
        assert (await search(api, "picnic"))["items"] == []
        assert (await search(api, "plan"))["items"] == []
