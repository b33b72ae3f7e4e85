"""Edit and resend (`chat` with `replace_from`): the named run and every
later run of the conversation are removed, then the edited message starts a
new run. Over the real WebSocket and HTTP routes, the store on SQLite files
and PostgreSQL, and the pieces (`History.truncate`, the `Journal`,
`plan_replacement`) on their own.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from backend.agent.state import RunState
from backend.chat.journal import Journal
from backend.chat.replacement import conversation_runs, plan_replacement
from backend.errors import InvalidMessage
from backend.history import History
from backend.llm.base import Message, ToolCall
from backend.protocol import ChatMessage, client_message_adapter
from backend.store.base import Batch, SetAside, StoreError
from backend.store.records import ConversationRecord, RunRecord
from backend.store.sql import SqlStore
from backend.transcript import Frame
from tests.conftest import Harness, StartServer
from tests.fakes import Hang, ScriptedLLM, reason, test_registry
from tests.service_harness import serving
from tests.ws_client import Client, labels
from tests.ws_client import Frame as WireFrame

PLAIN_RUN = ["token_stream", "token_stream", "chat_response", "response_complete"]
"""A plain run answered with one word: its token, the closing token, the end."""
BUSY = "a run is already active in this session ({}); wait for response_complete or stop it"


def contents(llm: ScriptedLLM, index: int = -1) -> list[tuple[str, str | None]]:
    """(role, content) of every message of one request after the system prompt."""
    return [(m.role, m.content) for m in llm.requests[index].messages[1:]]


def run_id(frames: list[WireFrame]) -> str:
    ids = {f["run_id"] for f in frames}
    assert len(ids) == 1, ids
    value = ids.pop()
    assert isinstance(value, str)
    return value


async def stored(
    url: str, session_id: str
) -> tuple[list[tuple[str, str | None]], list[str]]:
    """What the database at `url` holds of the conversation: its messages
    and its runs' ids, oldest first."""
    store = SqlStore(url)
    await store.open()
    try:
        history = [(m.role, m.content) for m in await store.messages(session_id)]
        return history, [r.id for r in await store.runs(session_id)]
    finally:
        await store.close()


async def two_runs(
    start_server: StartServer, *replies: str, **settings: Any
) -> tuple[Harness, ScriptedLLM, Client, str, str, str]:
    """A server, and a conversation with two plain runs: "first" → "one",
    "second" → "two". `replies` answer the chats that follow."""
    llm = ScriptedLLM("one", "two", *replies)
    harness = await start_server(llm, test_registry(), **settings)
    client, ready = await harness.ready_client()
    first = run_id(await client.chat("first"))
    second = run_id(await client.chat("second"))
    return harness, llm, client, ready["session_id"], first, second


# ------------------------------------------------------------ over the WebSocket


async def edit(client: Client, replace_from: str, **fields: Any) -> WireFrame:
    """Send "edited" in place of run `replace_from`; the frame that comes back."""
    await client.send(
        type="chat", content="edited", replace_from=replace_from, **fields
    )
    return await client.recv()


async def test_editing_the_first_run_removes_both_and_the_model_sees_only_the_edit(
    start_server: StartServer,
) -> None:
    """Replacing the first run drops both runs; the model sees only the edited turn."""
    _, llm, client, _, first, second = await two_runs(start_server, "edited", "three")
    last_seq = client.seen[-1]["seq"]

    frames = await client.chat("first, edited", replace_from=first)

    assert labels(frames) == ["runs_removed", *PLAIN_RUN]
    removed, new_run = frames[0], frames[1:]
    assert removed["run_ids"] == [first, second]
    assert removed["run_id"] is None and removed["seq"] == last_seq + 1
    assert [f["seq"] for f in frames] == list(range(last_seq + 1, last_seq + 6))
    assert run_id(new_run) not in (first, second)
    assert new_run[-2]["message"] == "edited"
    assert contents(llm) == [("user", "first, edited")]

    await client.chat("third")
    assert contents(llm) == [
        ("user", "first, edited"),
        ("assistant", "edited"),
        ("user", "third"),
    ]


async def test_editing_the_last_run_keeps_the_ones_before_it(
    start_server: StartServer,
) -> None:
    """Replacing the last run removes only it; the model still sees the first turn."""
    _, llm, client, _, first, second = await two_runs(start_server, "edited")

    frames = await client.chat("second, edited", replace_from=second)

    assert labels(frames) == ["runs_removed", *PLAIN_RUN]
    assert frames[0]["run_ids"] == [second]
    assert run_id(frames[1:]) not in (first, second)
    assert contents(llm) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second, edited"),
    ]


async def test_an_edit_is_stored_and_a_restarted_server_continues_from_it(
    start_server: StartServer, database_url: str
) -> None:
    """An edit is saved and shown over HTTP, and a restarted server continues it."""
    harness, _, client, session, first, second = await two_runs(
        start_server, "three", "edited", database_url=database_url
    )
    third = run_id(await client.chat("third"))

    edit = await client.chat("second, edited", replace_from=second)
    assert edit[0]["run_ids"] == [second, third]
    edited = run_id(edit[1:])
    await harness.service.flush_all()

    after_edit = [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second, edited"),
        ("assistant", "edited"),
    ]
    assert await stored(database_url, session) == (after_edit, [first, edited])
    async with httpx.AsyncClient() as http:
        url = harness.server.url(f"/api/conversations/{session}")
        body = (await http.get(url)).json()
    assert [(m["role"], m["content"]) for m in body["messages"]] == after_edit
    assert [(r["id"], r["request"]) for r in body["runs"]] == [
        (first, "first"),
        (edited, "second, edited"),
    ]
    seen = client.seen[1:]  # after session_ready
    await harness.server.stop()

    llm = ScriptedLLM("four")
    restarted = await start_server(llm, test_registry(), database_url=database_url)
    again, ready = await restarted.ready_client(f"session_id={session}&last_seq=0")
    assert ready["resumed"] is True
    replayed = [await again.recv() for _ in seen]
    assert replayed == seen
    await again.chat("fourth")
    assert contents(llm) == [*after_edit, ("user", "fourth")]


async def test_a_new_connection_replays_the_old_runs_then_the_removal_then_the_new_run(
    start_server: StartServer,
) -> None:
    """A client resuming from zero gets the old runs, the removal, then the new run."""
    harness, _, client, session, first, second = await two_runs(start_server, "edited")
    await client.chat("first, edited", replace_from=first)
    seen = client.seen[1:]

    other, ready = await harness.ready_client(f"session_id={session}&last_seq=0")
    replayed = [await other.recv() for _ in seen]

    assert replayed == seen
    assert labels(replayed) == [*PLAIN_RUN, *PLAIN_RUN, "runs_removed", *PLAIN_RUN]
    assert [f["run_id"] for f in replayed[:8]] == [first] * 4 + [second] * 4
    assert replayed[8]["run_ids"] == [first, second]
    assert ready["last_seq"] == replayed[-1]["seq"] == 13


# ------------------------------------------------------------ refusals


async def assert_nothing_changed(
    harness: Harness,
    llm: ScriptedLLM,
    client: Client,
    session: str,
    runs: list[str],
) -> None:
    """The conversation is as the two runs left it: a normal chat's model
    call sees both, and the store holds both runs, then the new one."""
    frames = await client.chat("then")
    assert contents(llm) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
        ("assistant", "two"),
        ("user", "then"),
    ]
    await harness.service.flush_all()
    store = harness.service.store
    assert [r.id for r in await store.runs(session)] == [*runs, run_id(frames)]


@pytest.mark.parametrize(
    ("replace_from", "message"),
    [
        ("nope", "replace_from: run nope is not a run of this conversation"),
        (
            "x" * 256,
            f"replace_from: run {'x' * 39}… is not a run of this conversation",
        ),
    ],
    ids=["unknown", "quoted-short"],
)
async def test_an_unknown_run_is_refused_and_nothing_changes(
    start_server: StartServer, replace_from: str, message: str
) -> None:
    """An unknown run id is refused (a long one quoted short) and nothing changes."""
    harness, llm, client, session, first, second = await two_runs(start_server, "three")
    error = await edit(client, replace_from)
    assert (error["type"], error["error_type"], error["message"]) == (
        "error",
        "invalid_message",
        message,
    )
    await assert_nothing_changed(harness, llm, client, session, [first, second])


async def test_a_run_of_another_conversation_is_refused(
    start_server: StartServer,
) -> None:
    """A run id from another conversation is refused and this one is left intact."""
    harness, llm, client, session, first, second = await two_runs(
        start_server, "elsewhere", "three"
    )
    stranger, _ = await harness.ready_client()
    foreign = run_id(await stranger.chat("elsewhere"))
    error = await edit(client, foreign)
    assert error["message"] == (
        f"replace_from: run {foreign} is not a run of this conversation"
    )
    await assert_nothing_changed(harness, llm, client, session, [first, second])


async def test_an_unsaved_run_is_refused_and_nothing_changes(
    start_server: StartServer,
) -> None:
    """A run sent with `save_chat: false` cannot be replaced; history stays intact."""
    harness, llm, client, session, first, second = await two_runs(
        start_server, "secret answer", "three"
    )
    unsaved = run_id(await client.chat("a secret", save_chat=False))
    error = await edit(client, unsaved)
    assert error["message"] == (
        f"replace_from: run {unsaved} was not saved (save_chat: false), so it "
        "is not in the conversation's history and cannot be replaced"
    )
    await assert_nothing_changed(harness, llm, client, session, [first, second])


async def test_an_unsaved_edit_is_refused_and_nothing_changes(
    start_server: StartServer,
) -> None:
    """An edit that itself has `save_chat: false` is refused and removes nothing."""
    harness, llm, client, session, first, second = await two_runs(start_server, "three")
    error = await edit(client, first, save_chat=False)
    assert error["message"] == (
        "replace_from needs save_chat: true (an edit replaces runs of the "
        "saved conversation)"
    )
    await assert_nothing_changed(harness, llm, client, session, [first, second])


async def test_an_edit_while_a_run_is_active_is_refused_as_busy(
    start_server: StartServer,
) -> None:
    """An edit during an active run is refused as busy; the stopped run stays stored."""
    hang = Hang()
    harness, llm, client, session, first, second = await two_runs(
        start_server,
        hang,
        "three",  # type: ignore[arg-type]
    )
    await client.send(type="chat", content="slow")
    await hang.started.wait()
    active = harness.service.sessions[session].run.run_id
    error = await edit(client, first)
    assert (error["error_type"], error["message"]) == ("busy", BUSY.format(active))
    await client.send(type="agent_control", action="stop")
    stopped = await client.run()
    assert labels(stopped) == ["response_complete"]
    frames = await client.chat("then")
    assert contents(llm) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
        ("assistant", "two"),
        ("user", "slow"),
        (
            "assistant",
            "(This run was stopped by the user at step 0 before it answered.)",
        ),
        ("user", "then"),
    ]
    await harness.service.flush_all()
    runs = await harness.service.store.runs(session)
    assert [r.id for r in runs] == [first, second, active, run_id(frames)]


async def test_an_invalid_chat_with_a_valid_edit_removes_nothing(
    start_server: StartServer,
) -> None:
    """An edit whose chat fails validation (an unknown tool) removes no runs."""
    harness, llm, client, session, first, second = await two_runs(start_server, "three")
    error = await edit(client, first, selected_tools=["nope"])
    assert (error["error_type"], error["message"]) == (
        "invalid_message",
        "unknown tool(s) in selected_tools: nope; available: add, fail, slow",
    )
    await assert_nothing_changed(harness, llm, client, session, [first, second])


async def test_a_run_from_before_a_reset_is_refused(start_server: StartServer) -> None:
    """A run from before a reset is refused though its words sit at its old position."""
    llm = ScriptedLLM("one", "two", "three")
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()
    first = run_id(await client.chat("first"))
    await client.send(type="reset_session")
    assert (await client.recv())["type"] == "session_reset"
    second = run_id(await client.chat("first"))  # the same words, now at 0 again

    error = await edit(client, first)
    assert error["message"] == (
        f"replace_from: run {first} is no longer where it was in the "
        "conversation's history (the session was reset since), so it cannot "
        "be replaced"
    )
    then = run_id(await client.chat("then"))
    assert contents(llm) == [("user", "first"), ("assistant", "two"), ("user", "then")]
    await harness.service.flush_all()
    runs = await harness.service.store.runs(client.seen[0]["session_id"])
    assert [r.id for r in runs] == [first, second, then]


async def test_a_store_that_cannot_list_the_runs_refuses_the_edit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the store cannot list runs, the edit fails as `store_error`, unapplied."""
    llm = ScriptedLLM("one", "two", "three")
    async with serving(llm, test_registry()) as client:
        first = run_id(await client.chat("first"))
        await client.chat("second")
        store = client.service.store
        assert store is not None

        async def unavailable(conversation_id: str) -> list[RunRecord]:
            raise StoreError("the database is gone")

        monkeypatch.setattr(store, "runs", unavailable)
        await client.send(type="chat", content="edited", replace_from=first)
        error = await client.recv()
        monkeypatch.undo()

        assert (error["error_type"], error["message"]) == (
            "store_error",
            "the conversation store is unavailable; try again later",
        )
        await client.chat("then")
        assert contents(llm)[-1] == ("user", "then") and len(contents(llm)) == 5
        assert [r.request for r in await store.runs(client.session.id)] == [
            "first",
            "second",
            "then",
        ]


# ------------------------------------------------------------ over HTTP


async def test_the_agent_api_edits_too_and_refuses_the_same_way(
    start_server: StartServer,
) -> None:
    """`/api/agent` answers 400 to an unknown run and replaces a known one."""
    llm = ScriptedLLM(
        *(reason("", finish=True, final=answer) for answer in ("one", "two", "1!"))
    )
    harness = await start_server(llm, test_registry())
    async with httpx.AsyncClient(base_url=harness.server.url(""), timeout=30) as http:
        one = await http.post("/api/agent", json={"query": "first", "stream": False})
        conversation = one.json()["conversation_id"]
        body = {"conversation_id": conversation, "stream": False}
        await http.post("/api/agent", json={"query": "second", **body})
        refused = await http.post(
            "/api/agent", json={"query": "x", "replace_from": "nope", **body}
        )
        edited = await http.post(
            "/api/agent",
            json={"query": "first!", "replace_from": one.json()["run_id"], **body},
        )

    assert (refused.status_code, refused.json()) == (
        400,
        {
            "error_type": "invalid_message",
            "message": "replace_from: run nope is not a run of this conversation",
        },
    )
    assert edited.status_code == 200
    document = edited.json()
    assert document["user_message"] == {"id": 0, "role": "user", "content": "first!"}
    assert document["assistant_message"] == {
        "id": 1,
        "role": "assistant",
        "content": "1!",
    }
    said = [m.content for m in llm.requests[-1].messages]
    assert "first!" in said
    assert not {"first", "one", "second", "two"} & set(said)
    history = harness.service.sessions[conversation].history
    assert [m.content for m in history] == ["first!", "1!"]


def test_replace_from_is_a_protocol_id() -> None:
    """`replace_from` takes an id-like string; empty, spaced, long or non-str fail."""
    frame = {"type": "chat", "content": "hi", "replace_from": "0123abcd"}
    assert client_message_adapter.validate_python(frame) == ChatMessage(
        type="chat", content="hi", replace_from="0123abcd"
    )
    for bad in ("", "has space", "x" * 257, 5):
        with pytest.raises(ValueError):
            client_message_adapter.validate_python({**frame, "replace_from": bad})


# ------------------------------------------------------------ History.truncate


def call(call_id: str) -> Message:
    return Message.assistant("", [ToolCall(id=call_id, name="add")])


def result(call_id: str, text: str = "5") -> Message:
    return Message.tool(call_id, "add", text)


def internals(history: History) -> tuple[Any, ...]:
    return (
        history.messages,
        history._tokens,
        history._owners,
        history._calls,
    )


CONVERSATION = [
    Message.user("a"),
    call("c1"),
    result("c1", "r" * 500),
    Message.assistant("A"),
    Message.user("b"),
    call("c1"),  # the provider used the id again
    result("c1"),
    call("c2"),
    result("c2"),
    Message.assistant("B"),
]


@pytest.mark.parametrize("length", range(len(CONVERSATION) + 1))
def test_a_truncated_history_is_the_history_of_what_it_kept(length: int) -> None:
    """A `History` truncated to any length equals one built from the kept messages."""
    history = History(CONVERSATION)
    history.window(10_000, tool_output_chars=10)  # fills the compaction cache
    history.truncate(length)
    fresh = History(CONVERSATION[:length])
    assert internals(history) == internals(fresh)
    assert all(index < length for index, _chars in history._compacted)
    for budget in (1, 30, 10_000):
        assert history.window(budget, tool_output_chars=10) == fresh.window(
            budget, tool_output_chars=10
        )


def test_a_result_whose_call_was_cut_is_a_result_without_a_call() -> None:
    """A result appended after its call was cut away is owned by no call."""
    history = History(CONVERSATION[:4])
    history.truncate(2)  # keeps the call c1 made; its result is cut
    history.truncate(1)  # and now the call too
    history.append(result("c1"))
    history.append(Message.user("next"))
    assert history._owners == [0, 1, 2]
    assert "c1" not in history._calls
    # the window never starts at the orphan result
    assert history.window(10_000, tool_output_chars=10) == [
        Message.user("a"),
        result("c1"),
        Message.user("next"),
    ]
    assert history.window(1, tool_output_chars=10) == [Message.user("next")]


def test_a_repeated_call_id_points_back_to_the_kept_call() -> None:
    """Cutting the later call of a reused id maps the id back to its earlier call."""
    history = History(CONVERSATION)
    assert history._calls["c1"] == 5
    history.truncate(5)
    assert history._calls == {"c1": 1}
    history.append(result("c1"))
    assert history._owners[-1] == 1


def test_truncate_past_the_end_keeps_everything_and_clear_empties() -> None:
    """Truncating beyond the end keeps every message; `clear` leaves a fresh history."""
    history = History(CONVERSATION)
    history.truncate(100)
    assert len(history) == len(CONVERSATION)
    history.clear()
    assert internals(history) == internals(History())


# ------------------------------------------------------------ the journal


def journal(saved: int = 0) -> Journal:
    record = ConversationRecord(id="c", owner="local", created_at=1, updated_at=1)
    return Journal(record, stored=True, saved_messages=saved)


def record(rid: str, at: float, state: dict[str, Any] | None = None) -> RunRecord:
    return RunRecord(
        id=rid,
        conversation_id="c",
        strategy="llm_only",
        status="finished",
        request="first",
        started_at=at,
        state=json.dumps(state or {}),
    )


def test_an_edit_makes_one_batch_that_cuts_and_sets_aside() -> None:
    """An edit yields one batch: the cut, the new message, the tail set aside."""
    history = History([Message.user(t) for t in ("a", "A", "b", "B")])
    pending = journal(saved=4)
    pending.run(record("r2", 2))
    pending.run(record("r3", 3))
    tail = SetAside("b1", 2, [Message.user("b"), Message.user("B")], ["r2"], 2.0)
    history.truncate(2)
    pending.history_truncated(2)
    pending.tail_set_aside(tail)
    pending.run(record("r2", 2))  # a late checkpoint of a run set aside
    history.append(Message.user("b!"))

    batch = pending.take(history, now=5, keep_frames_from=0)

    assert batch.truncate_history_at == 2
    assert batch.messages == [(2, Message.user("b!"))]
    assert [r.id for r in batch.runs] == ["r2", "r3"]  # written, then set aside
    assert batch.set_aside == [tail]
    assert pending.removed_runs == {"r2"}
    assert not pending.pending(history)


def test_a_failed_batch_comes_back_and_the_earlier_cut_wins() -> None:
    """A failed batch given back merges with a later edit, keeping the earlier cut."""
    history = History([Message.user(t) for t in "abcdef"])
    pending = journal(saved=2)
    pending.run(record("r1", 1))
    pending.history_truncated(4)  # messages 2, 3 unsaved; 4 and on cut
    history.truncate(4)
    first = SetAside("b1", 4, [Message.user("e"), Message.user("f")], ["r2"], 2.0)
    pending.tail_set_aside(first)
    failed = pending.take(history, now=5, keep_frames_from=0)
    assert (failed.truncate_history_at, failed.messages[0][0]) == (4, 2)

    history.truncate(1)  # a second edit while the batch was being written
    pending.history_truncated(1)
    second = SetAside("b2", 1, [Message.user("b")], ["r1", "r3"], 1.0)
    pending.tail_set_aside(second)
    pending.give_back(failed)

    batch = pending.take(history, now=6, keep_frames_from=0)
    assert batch.truncate_history_at == 1
    assert batch.messages == []
    assert [r.id for r in batch.runs] == ["r1"]  # written, then set aside
    assert batch.set_aside == [first, second]


def test_a_switch_and_a_reset_are_journalled_and_survive_a_failed_batch() -> None:
    """A branch restored and a reset's drop go in the batch, and come back with it."""
    history = History([Message.user("a")])
    pending = journal(saved=1)
    pending.tail_set_aside(SetAside("b1", 0, [Message.user("a")], ["r1"], 1.0))
    pending.branch_restored("b0", ["r1", "r0"])
    assert pending.removed_runs == set()
    failed = pending.take(history, now=2, keep_frames_from=0)
    assert (failed.restore, failed.drop_branches) == (["b0"], False)

    pending.branches_dropped()
    pending.give_back(failed)
    batch = pending.take(history, now=3, keep_frames_from=0)
    assert [t.branch_id for t in batch.set_aside] == ["b1"]
    assert (batch.restore, batch.drop_branches) == (["b0"], True)
    assert not pending.pending(history)


def test_a_reset_is_a_cut_at_zero() -> None:
    """Clearing history journals a cut at zero that survives a given-back batch."""
    history = History([Message.user("a")])
    pending = journal(saved=1)
    history.clear()
    pending.history_truncated(0)
    history.append(Message.user("b"))
    batch = pending.take(history, now=2, keep_frames_from=0)
    assert (batch.truncate_history_at, batch.messages) == (0, [(0, Message.user("b"))])
    pending.give_back(batch)
    assert (pending.truncate_at, pending.saved_messages) == (0, 0)
    assert Batch("c", 1).empty and not Batch("c", 1, truncate_history_at=0).empty


def test_frames_of_runs_set_aside_are_still_journalled() -> None:
    """A frame of a run set aside is still kept in the journal."""
    pending = journal()
    pending.tail_set_aside(SetAside("b1", 0, [], ["r1"], 1.0))
    pending.frame(Frame(1, "r1", "{}"))
    assert [f.seq for f in pending.frames] == [1]


# ------------------------------------------------------------ plan_replacement


def test_a_run_checkpointed_before_runs_knew_their_position_is_refused() -> None:
    """A run whose stored state lacks `request_at` (an older server's) is refused."""
    old = RunState.model_validate_json(
        json.dumps(
            {
                "run_id": "r1",
                "session_id": "c",
                "strategy": "llm_only",
                "request": {"content": "first", "agent": False},
                "max_steps": 0,
                "max_steps_cap": 50,
            }
        )
    )
    assert old.request_at is None  # an old checkpoint loads
    history = History([Message.user("first"), Message.assistant("one")])
    with pytest.raises(InvalidMessage) as refused:
        plan_replacement("r1", [record("r1", 1, old.model_dump())], history)
    assert str(refused.value) == (
        "replace_from: run r1 cannot be replaced: its record does not say where "
        "its message is in the history (an older server saved it)"
    )


def test_the_runs_are_the_stored_ones_with_the_pending_ones_oldest_first() -> None:
    """Pending records override stored ones, removed runs drop out, oldest first."""
    stored_runs = [record("r1", 1), record("r2", 2)]
    newer = record("r2", 2).model_copy(update={"status": "running"})
    runs = conversation_runs(
        stored_runs, [record("r4", 4), newer, record("r3", 3)], removed={"r1"}
    )
    assert [(r.id, r.status) for r in runs] == [
        ("r2", "running"),
        ("r3", "finished"),
        ("r4", "finished"),
    ]


def test_the_named_run_and_every_later_one_are_removed() -> None:
    """The plan cuts at the run's message and removes it and every later run."""
    history = History([Message.user(t) for t in ("first", "1", "first", "2")])
    runs = [
        record("r1", 1, {"request_at": 0}),
        record("r2", 2, {"request_at": 2}),
        record("r3", 3, {}),  # unreadable position: removed all the same
    ]
    plan = plan_replacement("r2", runs, history)
    assert (plan.cut_at, plan.run_ids) == (2, ["r2", "r3"])
    with pytest.raises(InvalidMessage, match="no longer where it was"):
        plan_replacement("r2", runs, History(history.messages[:2]))
