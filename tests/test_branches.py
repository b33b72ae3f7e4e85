"""Branches: an edit sets the replaced turns aside instead of losing them,
and `switch_branch` (WebSocket) / `POST …/branches/{id}` (HTTP) brings a
version back. Over the real routes, the store on SQLite files and on
PostgreSQL, across a restart; what the model is sent afterwards; what a
client replaying the conversation ends up showing; the search index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.store.base import StoreError
from backend.store.sql import SqlStore
from tests.conftest import Harness, StartServer
from tests.fakes import Hang, ScriptedLLM, test_registry
from tests.service_harness import serving
from tests.test_edit_resend import PLAIN_RUN, contents, run_id
from tests.test_export_import import ALICE, BOB
from tests.ws_client import Client, labels
from tests.ws_client import Frame as WireFrame


async def switch(client: Client, branch_id: str) -> list[WireFrame]:
    """`switch_branch` sent: `branch_switched` and the frames sent again."""
    await client.send(type="switch_branch", branch_id=branch_id)
    switched = await client.recv()
    assert switched["type"] == "branch_switched", switched
    return [switched, *[await client.recv() for _ in range(switched["resent"])]]


async def forks(harness: Harness, session: str, token: str | None = None) -> Any:
    """`GET …/branches`, once what the server holds is stored."""
    await harness.service.flush_all()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers) as http:
        response = await http.get(
            harness.server.url(f"/api/conversations/{session}/branches")
        )
    assert response.status_code == 200, response.text
    return response.json()["forks"]


def versions(fork: dict[str, Any]) -> list[tuple[str | None, str]]:
    """A fork's versions as (branch id, what its first message asked)."""
    return [(v["branch_id"], v["request"]) for v in fork["versions"]]


async def edited(
    start_server: StartServer, *replies: str, **settings: Any
) -> tuple[Harness, ScriptedLLM, Client, str, list[str]]:
    """A conversation "first" → "one", "second" → "two", then "second"
    edited to "second, edited" → "edited": the server, its model, the
    client, the session and the three runs' ids."""
    llm = ScriptedLLM("one", "two", "edited", *replies)
    harness = await start_server(llm, test_registry(), **settings)
    client, ready = await harness.ready_client()
    first = run_id(await client.chat("first"))
    second = run_id(await client.chat("second"))
    frames = await client.chat("second, edited", replace_from=second)
    assert labels(frames) == ["runs_removed", *PLAIN_RUN]
    return (
        harness,
        llm,
        client,
        ready["session_id"],
        [first, second, run_id(frames[1:])],
    )


BEFORE = [("user", "first"), ("assistant", "one")]
ORIGINAL = [*BEFORE, ("user", "second"), ("assistant", "two")]
EDITED = [*BEFORE, ("user", "second, edited"), ("assistant", "edited")]


async def test_an_edit_keeps_the_replaced_turns_as_a_version_at_its_fork(
    start_server: StartServer, database_url: str
) -> None:
    """After an edit the API lists one fork at the edited message: the old
    version as a branch, then the current one."""
    harness, _, _, session, (_, second, edit) = await edited(
        start_server, database_url=database_url
    )
    (fork,) = await forks(harness, session)
    branch_id = fork["versions"][0]["branch_id"]
    assert isinstance(branch_id, str)
    assert (fork["fork_at"], fork["run_id"], fork["current"]) == (2, edit, 1)
    assert versions(fork) == [(branch_id, "second"), (None, "second, edited")]
    store = SqlStore(database_url)
    await store.open()
    try:
        found = await store.branch(session, branch_id)
        assert found is not None
        branch, runs, frames = found
        assert [(m.role, m.content) for m in branch.messages] == ORIGINAL[2:]
        assert [r.id for r in runs] == [second]
        assert {f.run_id for f in frames} == {second}
        assert [r.id for r in await store.runs(session)] != [second]
    finally:
        await store.close()


async def test_switching_back_restores_the_history_the_frames_and_the_model_context(
    start_server: StartServer,
) -> None:
    """A switch answers `branch_switched` then the restored run's frames
    again with new seqs; the model is next sent the original turns."""
    harness, llm, client, session, (first, second, edit) = await edited(
        start_server, "three"
    )
    original = [f for f in client.seen if f.get("run_id") == second]
    (fork,) = await forks(harness, session)
    last_seq = client.seen[-1]["seq"]

    frames = await switch(client, fork["versions"][0]["branch_id"])

    switched, resent = frames[0], frames[1:]
    set_aside = switched["set_aside"]
    assert {k: switched[k] for k in ("fork_at", "removed", "restored", "resent")} == {
        "fork_at": 2,
        "removed": [edit],
        "restored": [{"run_id": second, "request": "second", "mode": "plain"}],
        "resent": 4,
    }
    assert (switched["run_id"], switched["seq"]) == (None, last_seq + 1)
    assert [f["seq"] for f in resent] == list(range(last_seq + 2, last_seq + 6))
    assert [{**f, "seq": 0} for f in resent] == [{**f, "seq": 0} for f in original]

    await client.chat("third")
    assert contents(llm) == [*ORIGINAL, ("user", "third")]
    (fork,) = await forks(harness, session)
    assert versions(fork) == [(None, "second"), (set_aside, "second, edited")]
    assert (fork["run_id"], fork["current"]) == (second, 0)
    assert first not in switched["removed"]


async def test_switching_to_and_fro_keeps_both_versions_and_every_turn(
    start_server: StartServer, database_url: str
) -> None:
    """Back to the original, then to the edit again: each switch sets the
    other version aside, and the stored history is the current one's."""
    harness, llm, client, session, (_, second, edit) = await edited(
        start_server, "after the edit", database_url=database_url
    )
    (fork,) = await forks(harness, session)
    back = await switch(client, fork["versions"][0]["branch_id"])
    again = await switch(client, back[0]["set_aside"])

    assert again[0]["removed"] == [second]
    assert again[0]["restored"][0]["run_id"] == edit
    (fork,) = await forks(harness, session)
    assert versions(fork) == [
        (again[0]["set_aside"], "second"),
        (None, "second, edited"),
    ]
    await client.chat("go on")
    assert contents(llm) == [*EDITED, ("user", "go on")]


async def test_a_client_replaying_from_zero_ends_on_the_current_version(
    start_server: StartServer,
) -> None:
    """A new connection replays the whole story: the first version, its
    removal, the edit, the switch and the restored frames, in seq order."""
    harness, _, client, session, (_, second, _) = await edited(start_server)
    (fork,) = await forks(harness, session)
    await switch(client, fork["versions"][0]["branch_id"])
    seen = client.seen[1:]

    other, ready = await harness.ready_client(f"session_id={session}&last_seq=0")
    replayed = [await other.recv() for _ in seen]

    assert replayed == seen
    assert labels(replayed) == [
        *PLAIN_RUN,
        *PLAIN_RUN,
        "runs_removed",
        *PLAIN_RUN,
        "branch_switched",
        *PLAIN_RUN,
    ]
    assert [f["run_id"] for f in replayed[-4:]] == [second] * 4
    assert ready["last_seq"] == replayed[-1]["seq"]


async def test_branches_and_a_switch_outlive_a_restart(
    start_server: StartServer, database_url: str
) -> None:
    """A restarted server lists the same fork, switches back, and the model
    is sent the original turns."""
    harness, _, client, session, (_, second, _) = await edited(
        start_server, database_url=database_url
    )
    before = await forks(harness, session)
    await harness.server.stop()

    llm = ScriptedLLM("three")
    restarted = await start_server(llm, test_registry(), database_url=database_url)
    assert await forks(restarted, session) == before
    again, _ = await restarted.ready_client(f"session_id={session}&last_seq=0")
    for _ in client.seen[1:]:
        await again.recv()
    frames = await switch(again, before[0]["versions"][0]["branch_id"])
    assert [f["run_id"] for f in frames[1:]] == [second] * 4
    await again.chat("third")
    assert contents(llm) == [*ORIGINAL, ("user", "third")]


async def test_a_version_keeps_the_branches_that_forked_from_it(
    start_server: StartServer,
) -> None:
    """An edit inside the edited version forks again; switching back to the
    original hides that fork, and switching to the edit shows it again."""
    llm = ScriptedLLM("one", "two", "edited", "three", "three, again", "go")
    harness = await start_server(llm, test_registry())
    client, ready = await harness.ready_client()
    session = ready["session_id"]
    await client.chat("first")
    second = run_id(await client.chat("second"))
    await client.chat("second, edited", replace_from=second)
    third = run_id(await client.chat("third"))
    await client.chat("third, edited", replace_from=third)
    outer, inner = await forks(harness, session)
    assert (outer["fork_at"], inner["fork_at"]) == (2, 4)
    assert versions(inner)[0] == (inner["versions"][0]["branch_id"], "third")

    back = await switch(client, outer["versions"][0]["branch_id"])
    assert len(back[0]["removed"]) == 2
    (only,) = await forks(harness, session)
    assert only["fork_at"] == 2
    nested = inner["versions"][0]["branch_id"]
    await client.send(type="switch_branch", branch_id=nested)
    refused = await client.recv()
    assert refused["message"] == (
        f"switch_branch: branch {nested} forks from another branch "
        f"({back[0]['set_aside']}); switch to that one first"
    )

    await switch(client, back[0]["set_aside"])
    assert [f["fork_at"] for f in await forks(harness, session)] == [2, 4]
    await client.chat("go on")
    assert contents(llm) == [
        *EDITED,
        ("user", "third, edited"),
        ("assistant", "three, again"),
        ("user", "go on"),
    ]


async def test_bad_switches_are_refused_and_change_nothing(
    start_server: StartServer,
) -> None:
    """An unknown branch and a switch during a run are refused with a
    reason, changing nothing; a reset drops every branch."""
    hang = Hang()
    harness, llm, client, session, _ = await edited(start_server, hang, "three")  # type: ignore[arg-type]
    await client.send(type="switch_branch", branch_id="nope")
    error = await client.recv()
    assert (error["error_type"], error["message"]) == (
        "invalid_message",
        "switch_branch: nope is not a branch of this conversation",
    )
    (fork,) = await forks(harness, session)
    branch_id = fork["versions"][0]["branch_id"]

    await client.send(type="chat", content="slow")
    await hang.started.wait()
    active = harness.service.sessions[session].run.run_id
    await client.send(type="switch_branch", branch_id=branch_id)
    busy = await client.until_label("error:busy")
    assert busy[-1]["message"] == (
        f"cannot switch branches while a run is active ({active}); "
        "wait for response_complete or stop it"
    )
    await client.send(type="agent_control", action="stop")
    await client.run()
    assert await forks(harness, session) == [fork]

    await client.send(type="reset_session")
    assert (await client.recv())["type"] == "session_reset"
    assert await forks(harness, session) == []
    await client.send(type="switch_branch", branch_id=branch_id)
    assert (await client.recv())["error_type"] == "invalid_message"
    await client.chat("afresh")
    assert contents(llm) == [("user", "afresh")]


async def test_over_http_the_owner_lists_and_switches_and_nobody_else_can(
    start_server: StartServer, tmp_path: Path
) -> None:
    """`GET`/`POST …/branches` work for the owner; another user gets 404."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {ALICE}\nbob: {BOB}\n")
    tokens.chmod(0o600)
    llm = ScriptedLLM("one", "edited", "after")
    harness = await start_server(llm, test_registry(), auth_tokens_file=tokens)
    client, ready = await harness.ready_client(Authorization=f"Bearer {ALICE}")
    session = ready["session_id"]
    first = run_id(await client.chat("first"))
    edit = run_id((await client.chat("first, edited", replace_from=first))[1:])
    (fork,) = await forks(harness, session, ALICE)
    branch_id = fork["versions"][0]["branch_id"]
    base = harness.server.url(f"/api/conversations/{session}/branches")

    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {BOB}"}) as bob:
        assert (await bob.get(base)).status_code == 404
        assert (await bob.post(f"{base}/{branch_id}")).status_code == 404
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}) as api:
        response = await api.post(f"{base}/{branch_id}")
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["removed"] == [edit]
        assert body["restored"] == [
            {"run_id": first, "request": "first", "mode": "plain"}
        ]
        missing = await api.post(f"{base}/nope")
        assert (missing.status_code, missing.json()["error_type"]) == (
            400,
            "invalid_message",
        )
    switched = await client.recv()
    assert switched["type"] == "branch_switched"
    assert [(await client.recv())["run_id"] for _ in range(switched["resent"])] == [
        first
    ] * 4
    await client.chat("go on")
    assert contents(llm) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "go on"),
    ]


async def test_search_finds_the_current_version_only(
    start_server: StartServer, database_url: str
) -> None:
    """Words of a version set aside are not found; once switched back, they are."""
    harness, _, client, session, _ = await edited(
        start_server, database_url=database_url
    )
    await harness.service.flush_all()
    store = SqlStore(database_url)
    await store.open()
    try:
        assert await store.search("local", "two", limit=5) == []
        assert [h.snippet for h in await store.search("local", "edited", limit=5)]
        (fork,) = await forks(harness, session)
        await switch(client, fork["versions"][0]["branch_id"])
        await harness.service.flush_all()
        assert [h.snippet for h in await store.search("local", "two", limit=5)] == [
            "«two»"
        ]
        assert await store.search("local", "edited", limit=5) == []
    finally:
        await store.close()


async def test_a_store_that_cannot_read_the_branch_refuses_the_switch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the store cannot read the branch, the switch fails as
    `store_error` and nothing changes; once it can, the switch is done."""
    llm = ScriptedLLM("one", "two", "edited")
    async with serving(llm, test_registry()) as client:
        await client.chat("first")
        second = run_id(await client.chat("second"))
        await client.chat("second, edited", replace_from=second)
        store = client.service.store
        assert store is not None
        (branch,) = await store.branches(client.session.id)

        async def unavailable(*args: Any) -> None:
            raise StoreError("the database is gone")

        monkeypatch.setattr(store, "branch", unavailable)
        await client.send(type="switch_branch", branch_id=branch.id)
        error = await client.recv()
        monkeypatch.undo()
        assert (error["error_type"], error["message"]) == (
            "store_error",
            "the conversation store is unavailable; try again later",
        )
        assert [m.content for m in client.session.history][2:] == [
            "second, edited",
            "edited",
        ]

        await client.send(type="switch_branch", branch_id=branch.id)
        assert (await client.recv())["type"] == "branch_switched"
        assert [m.content for m in client.session.history][2:] == ["second", "two"]
