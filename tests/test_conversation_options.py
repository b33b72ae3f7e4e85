"""`save_chat: false` and `include_history: false` (seed 001), on both databases."""

from __future__ import annotations

from backend.store.sql import SqlStore
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM


def contents(llm: ScriptedLLM, index: int) -> list[tuple[str, str | None]]:
    """(role, content) of every message in one request after the system prompt."""
    return [(m.role, m.content) for m in llm.requests[index].messages[1:]]


async def stored(url: str, session: str) -> tuple[list[tuple[str, str | None]], int]:
    store = SqlStore(url)
    await store.open()
    try:
        history = [(m.role, m.content) for m in await store.messages(session)]
        return history, len(await store.runs(session))
    finally:
        await store.close()


async def test_an_unsaved_run_is_not_stored_and_later_runs_never_see_it(
    start_server: StartServer, database_url: str
) -> None:
    """A `save_chat=False` run is answered but not stored or shown to later runs."""
    llm = ScriptedLLM("noted", "that stays between us", "you asked me to note X")
    harness = await start_server(llm, database_url=database_url)
    client, ready = await harness.ready_client()
    await client.chat("note X")
    secret = await client.chat("a secret", save_chat=False)
    assert secret[-2]["message"] == "that stays between us"
    await client.chat("what did I ask?")

    assert contents(llm, 2) == [
        ("user", "note X"),
        ("assistant", "noted"),
        ("user", "what did I ask?"),
    ]
    await harness.service.flush_all()
    history, runs = await stored(database_url, ready["session_id"])
    assert history == [
        ("user", "note X"),
        ("assistant", "noted"),
        ("user", "what did I ask?"),
        ("assistant", "you asked me to note X"),
    ]
    assert runs == 2


async def test_without_history_the_model_sees_only_this_message_yet_it_is_kept(
    start_server: StartServer, database_url: str
) -> None:
    """With `include_history=False` the model sees just this message; all is stored."""
    llm = ScriptedLLM("one", "two", "three")
    harness = await start_server(llm, database_url=database_url)
    client, ready = await harness.ready_client()
    await client.chat("first")
    await client.chat("second", include_history=False)
    await client.chat("third")

    assert contents(llm, 1) == [("user", "second")]
    assert contents(llm, 2) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
        ("assistant", "two"),
        ("user", "third"),
    ]
    await harness.service.flush_all()
    history, runs = await stored(database_url, ready["session_id"])
    assert [content for _, content in history] == [
        "first",
        "one",
        "second",
        "two",
        "third",
        "three",
    ]
    assert runs == 3
