"""Custom instructions from the Python client and the CLI."""

from __future__ import annotations

import asyncio
import io
from argparse import Namespace

import pytest

from backend.__main__ import main
from backend.cli_instructions import instructions_command
from loopwire import ClientError, instructions, set_instructions
from loopwire.exit_codes import ExitCode
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM


async def test_the_client_sets_and_reads_both(start_server: StartServer) -> None:
    """The client keeps the user's and a conversation's; the next run gets both."""
    llm = ScriptedLLM("one", "two")
    harness = await start_server(llm)
    url = harness.server.url("/ws", "ws")
    client, ready = await harness.ready_client()
    cid = ready["session_id"]
    await client.chat("hi")
    assert await set_instructions(url, "Be brief.") == "Be brief."
    kept = await set_instructions(url, "Call me Ada.", conversation_id=cid)
    assert kept == "Call me Ada."
    assert await instructions(url) == "Be brief."
    assert await instructions(url, conversation_id=cid) == "Call me Ada."
    await client.chat("hi again")
    system = llm.requests[1].messages[0].content
    assert system.endswith(
        "<for_all_conversations>\nBe brief.\n</for_all_conversations>\n\n"
        "<for_this_conversation>\nCall me Ada.\n</for_this_conversation>\n"
        "</custom_instructions>"
    )
    with pytest.raises(ClientError) as refused:
        await set_instructions(url, "x" * 4001)
    assert str(refused.value) == (
        "400: instructions are 4001 characters; the limit is 4000 "
        "(LOOPWIRE_INSTRUCTIONS_MAX_CHARS)"
    )
    with pytest.raises(ClientError) as missing:
        await instructions(url, conversation_id="f" * 32)
    assert str(missing.value) == f"404: no conversation {'f' * 32!r}"


def command(url: str, action: str, text: str | None, cid: str | None) -> Namespace:
    return Namespace(action=action, text=text, conversation=cid, url=url, token=None)


async def test_the_cli_shows_and_sets_them(
    start_server: StartServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`instructions set` takes text or stdin, `show` prints it, a refusal exits 1."""
    harness = await start_server(ScriptedLLM("one"))
    client, ready = await harness.ready_client()
    cid = ready["session_id"]
    await client.chat("hi")
    base = harness.server.url("/")

    async def run(action: str, text: str | None, cid: str | None = None) -> int:
        args = command(base, action, text, cid)
        return await asyncio.to_thread(instructions_command, args)

    assert await run("show", None) == ExitCode.FINISHED
    assert capsys.readouterr().out == ""
    assert await run("set", "Be brief.") == ExitCode.FINISHED
    assert capsys.readouterr().out == "instructions set: 9 characters\n"
    monkeypatch.setattr("sys.stdin", io.StringIO("Call me Ada."))
    assert await run("set", "-", cid) == ExitCode.FINISHED
    assert capsys.readouterr().out == "instructions set: 12 characters\n"
    assert await run("show", None) == ExitCode.FINISHED
    assert capsys.readouterr().out == "Be brief.\n"
    assert await run("show", None, cid) == ExitCode.FINISHED
    assert capsys.readouterr().out == "Call me Ada.\n"
    assert await run("set", "x" * 4001) == ExitCode.ERROR
    assert capsys.readouterr().err == (
        "loopwire: 400: instructions are 4001 characters; the limit is 4000 "
        "(LOOPWIRE_INSTRUCTIONS_MAX_CHARS)\n"
    )
    assert await run("set", "") == ExitCode.FINISHED
    assert capsys.readouterr().out == "instructions cleared\n"


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """No text for `set`, text for `show` and an unknown action are usage errors."""
    assert main(["instructions", "set"]) == ExitCode.USAGE
    assert main(["instructions", "show", "extra"]) == ExitCode.USAGE
    assert capsys.readouterr().err == (
        "loopwire: instructions set: TEXT? (- reads stdin)\n"
        "loopwire: instructions show takes no text\n"
    )
    with pytest.raises(SystemExit) as bad:
        main(["instructions", "bogus"])
    assert bad.value.code == ExitCode.USAGE
