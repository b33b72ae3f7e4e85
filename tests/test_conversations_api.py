"""The conversations API over a live server, on SQLite and PostgreSQL."""

from __future__ import annotations

import httpx

from tests.conftest import StartServer
from tests.fakes import ScriptedLLM

JSON = {"Content-Type": "application/json"}


async def test_list_read_rename_and_delete_conversations(
    start_server: StartServer, database_url: str
) -> None:
    """The API pages stored conversations, shows runs and messages, renames, deletes."""
    llm = ScriptedLLM("four", "six")
    harness = await start_server(llm, database_url=database_url)
    ids = []
    for question in ("what is 2+2?", "what is 3+3?"):
        client, ready = await harness.ready_client()
        await client.chat(question)
        ids.append(ready["session_id"])
    await harness.ready_client()  # connected, never chatted: nothing stored

    base = harness.server.url("/api/conversations")
    async with httpx.AsyncClient() as http:
        page = (await http.get(base, params={"limit": 1})).json()
        assert [c["id"] for c in page["items"]] == [ids[1]]
        assert page["items"][0]["title"] == "what is 3+3?"
        rest = (await http.get(base, params={"cursor": page["next"]})).json()
        assert ([c["id"] for c in rest["items"]], rest["next"]) == ([ids[0]], None)

        one = (await http.get(f"{base}/{ids[0]}")).json()
        assert [(m["role"], m["content"]) for m in one["messages"]] == [
            ("user", "what is 2+2?"),
            ("assistant", "four"),
        ]
        (run,) = one["runs"]
        assert (run["strategy"], run["mode"], run["status"], run["request"]) == (
            "llm_only",
            "plain",
            "finished",
            "what is 2+2?",
        )
        assert run["usage"]["llm_calls"] == 1
        (phase,) = run["trace"]
        assert (phase["step"], phase["phase"], phase["llm_calls"]) == (0, "answer", 1)

        renamed = await http.patch(f"{base}/{ids[0]}", json={"title": "Sums"})
        assert renamed.status_code == 200 and renamed.json()["title"] == "Sums"
        bad = await http.patch(f"{base}/{ids[0]}", json={"title": ""})
        assert bad.status_code == 400
        assert bad.json()["error_type"] == "invalid_message"
        huge = await http.patch(
            f"{base}/{ids[0]}", content=b"x" * 100_000, headers=JSON
        )
        assert huge.status_code == 413

        assert (await http.delete(f"{base}/{ids[0]}")).status_code == 204
        assert (await http.get(f"{base}/{ids[0]}")).status_code == 404
        assert (await http.delete(f"{base}/{ids[0]}")).status_code == 404
        left = (await http.get(base)).json()
        assert [c["id"] for c in left["items"]] == [ids[1]]
        assert (await http.get(base, params={"limit": 0})).status_code == 400
        assert (await http.get(base, params={"cursor": "nope"})).status_code == 400


async def test_the_api_wants_the_token_when_one_is_set(
    start_server: StartServer,
) -> None:
    """With an auth token set, the conversations API needs it as a bearer token."""
    harness = await start_server(ScriptedLLM(), auth_token="s3cret")
    base = harness.server.url("/api/conversations")
    async with httpx.AsyncClient() as http:
        assert (await http.get(base)).status_code == 401
        headers = {"Authorization": "Bearer s3cret"}
        ok = await http.get(base, headers=headers)
        assert ok.status_code == 200 and ok.json() == {"items": [], "next": None}
