"""MCP servers as loopwire tools: config, start-up, calls, Stop, crashes.

The servers are real MCP servers built with the SDK (`tests/mcp_servers/`),
run over stdio as subprocesses, or over streamable HTTP (in this event loop
or as a subprocess). Nothing here sleeps: waits are on FIFOs the servers
write, subprocess pipes, log records or the calls themselves, each bounded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import mcp_types
import pytest
import pytest_asyncio

from backend.errors import ConfigError, ToolError
from backend.tools.base import AnyTool, ToolContext, ToolEffect, ToolRegistry
from backend.tools.mcp import MCPManager, load_mcp_config
from backend.tools.mcp_config import (
    MCPServerConfig,
    object_schema,
    parse_mcp_config,
    result_value,
    tool_names,
)
from tests.fifo import fifo
from tests.live_server import serving
from tests.mcp_servers.tools_server import build_server

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "mcp_servers"
CTX = ToolContext(session_id="test")
BOUND_S = 10.0  # every wait is bounded by this; the tests need far less


def server(name: str, script: str = "tools_server.py", **keys: Any) -> MCPServerConfig:
    """A stdio server running one of our test scripts, through the real loader."""
    entry = {"command": sys.executable, "args": [str(SERVERS / script)], **keys}
    return parse_mcp_config({"mcpServers": {name: entry}})[0]


def by_name(manager: MCPManager) -> dict[str, AnyTool]:
    return {tool.name: tool for tool in manager.tools()}


async def call(tool: AnyTool, **arguments: Any) -> Any:
    async with asyncio.timeout(BOUND_S):
        return await tool(tool.args_model.model_validate(arguments), CTX)


async def fails(tool: AnyTool, **arguments: Any) -> str:
    with pytest.raises(ToolError) as caught:
        await call(tool, **arguments)
    return str(caught.value)


async def next_line(reader: asyncio.StreamReader) -> str:
    async with asyncio.timeout(BOUND_S):
        return (await reader.readline()).decode().strip()


async def pid_of(tools: dict[str, AnyTool]) -> int:
    """The process id of the server behind these tools (via its `pid` tool)."""
    [pid_tool] = [tool for name, tool in tools.items() if name.endswith("__pid")]
    result = await call(pid_tool)
    assert isinstance(result, dict)
    pid: int = result["pid"]
    return pid


@contextmanager
def logged(text: str) -> Iterator[asyncio.Event]:
    """An event set when the MCP manager logs a message containing `text`."""
    seen = asyncio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if text in record.getMessage():
                seen.set()

    handler, logger = Watch(), logging.getLogger("backend.tools.mcp")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


@asynccontextmanager
async def promptly(limit_s: float = 2.0) -> AsyncIterator[None]:
    """Assert the body takes well under a second or two (not a timeout's worth)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    yield
    assert loop.time() - started < limit_s


async def wait_for(event: asyncio.Event) -> None:
    async with asyncio.timeout(BOUND_S):
        await event.wait()


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


DEMO_TOOLS = ("echo", "add", "stats", "picture", "fail", "pid", "wait", "post", "crash")
EFFECTS = {
    "default": {"requires_approval": True},
    "tools": {
        "echo": {"read_only": True, "idempotent": True, "requires_approval": False},
        "add": {"read_only": True},
    },
}


@pytest_asyncio.fixture(scope="class", loop_scope="class")
async def demo() -> AsyncIterator[MCPManager]:
    """Two tools servers, shared by the tests of one class (and its loop)."""
    configs = [server("demo"), server("fx", effects=EFFECTS, timeout_s=7)]
    async with MCPManager(configs) as manager:
        assert manager.problems == []
        yield manager


@pytest.mark.asyncio(loop_scope="class")
class TestSharedServer:
    """Tests that leave the servers healthy share them (a start costs ~1 s)."""

    async def test_tools_are_namespaced_with_descriptions_and_schemas(
        self, demo: MCPManager
    ) -> None:
        """Tools are named `server__tool` and described with a `[server]` prefix."""
        tools = by_name(demo)
        names = [f"demo__{n}" for n in DEMO_TOOLS]
        assert list(tools) == names + [f"fx__{n}" for n in DEMO_TOOLS]
        echo = tools["demo__echo"]
        assert echo.description == "[demo] Echo the text back."
        assert echo.spec().parameters == {
            "type": "object",
            "properties": {"text": {"title": "Text", "type": "string"}},
            "required": ["text"],
        }
        assert tools["demo__stats"].spec().parameters == {
            "type": "object",
            "properties": {},
        }
        registry = ToolRegistry(demo.tools())  # valid loopwire names, no clash
        assert registry.names == tuple(tools)

    async def test_effects_default_to_mutating_and_asking_unless_configured(
        self, demo: MCPManager
    ) -> None:
        """Unconfigured tools need approval and may mutate; `effects` overrides that."""
        tools = by_name(demo)
        assert tools["demo__echo"].effect == ToolEffect(requires_approval=True)
        assert tools["demo__echo"].effect.read_only is False
        assert tools["demo__echo"].effect.idempotent is False
        assert tools["fx__echo"].effect == ToolEffect(
            requires_approval=False, read_only=True, idempotent=True, timeout_s=7
        )
        assert tools["fx__add"].effect == ToolEffect(
            read_only=True, requires_approval=True, timeout_s=7
        )
        assert tools["fx__crash"].effect == ToolEffect(
            requires_approval=True, timeout_s=7
        )
        assert demo.status() == {"demo": "up", "fx": "up"}

    async def test_text_result(self, demo: MCPManager) -> None:
        """A text content result comes back as the plain string."""
        assert await call(by_name(demo)["demo__echo"], text="hello") == "hello"

    async def test_structured_result(self, demo: MCPManager) -> None:
        """A structured content result comes back as the server's dict."""
        assert await call(by_name(demo)["demo__add"], a=2, b=3.5) == {"sum": 5.5}

    async def test_json_text_is_decoded_and_images_are_summarised(
        self, demo: MCPManager
    ) -> None:
        """JSON text is decoded, and an image becomes its type, MIME type and size."""
        tools = by_name(demo)
        stats = await call(tools["demo__stats"])
        assert stats == {"files": 3, "names": ["a", "b", "c"]}
        assert await call(tools["demo__picture"]) == [
            {"type": "image", "mimeType": "image/png", "bytes": 70}
        ]

    async def test_error_result_raises_tool_error_with_the_servers_text(
        self, demo: MCPManager
    ) -> None:
        """An error result raises `ToolError` carrying the server's own message."""
        message = await fails(by_name(demo)["demo__fail"], reason="disk full")
        assert "cannot do that: disk full" in message

    async def test_the_server_validates_arguments(self, demo: MCPManager) -> None:
        """A missing argument fails with the server's validation error; it stays up."""
        message = await fails(by_name(demo)["demo__add"], a=1)
        assert "validation error" in message and "b" in message
        assert demo.status()["demo"] == "up"

    async def test_stop_cancels_the_call_on_the_server(
        self, demo: MCPManager, tmp_path: Path
    ) -> None:
        """Cancelling a call cancels its handler on the server, which stays usable."""
        await stop_while_running(by_name(demo)["demo__wait"], tmp_path)
        echo = by_name(demo)["demo__echo"]
        assert await call(echo, text="still up") == "still up"

    async def test_a_timeout_cancels_the_call_on_the_server(
        self, demo: MCPManager, tmp_path: Path
    ) -> None:
        """The executor bounds calls with `asyncio.timeout`; expire one now."""
        deadlines: list[asyncio.Timeout] = []

        async def bounded(channel: str) -> None:
            async with asyncio.timeout(None) as deadline:
                deadlines.append(deadline)
                await call(by_name(demo)["demo__wait"], channel=channel)

        async with fifo(tmp_path, "signals") as (channel, signals):
            task = asyncio.create_task(bounded(channel))
            assert await next_line(signals) == "started"
            deadlines[0].reschedule(asyncio.get_running_loop().time())
            with pytest.raises(TimeoutError):
                await task
            assert await next_line(signals) == "cancelled"

    async def test_concurrent_calls(self, demo: MCPManager) -> None:
        """Calls in flight at once, across two servers, each get their own result."""
        tools = by_name(demo)
        results = await asyncio.gather(
            *(call(tools["demo__add"], a=n, b=1) for n in range(5)),
            call(tools["fx__echo"], text="x"),
        )
        assert results == [{"sum": n + 1} for n in range(5)] + ["x"]


def test_result_value_summarises_resources() -> None:
    """`result_value` summarises resources and links and joins text that is not JSON."""
    text = mcp_types.TextResourceContents(
        uri="file:///a.txt", mime_type="text/plain", text="hi"
    )
    blob = mcp_types.BlobResourceContents(uri="file:///b.bin", blob="AAAA")
    link = mcp_types.ResourceLink(uri="file:///c", name="c")
    content: list[mcp_types.ContentBlock] = [
        mcp_types.TextContent(text="see:"),
        mcp_types.EmbeddedResource(resource=text),
        mcp_types.EmbeddedResource(resource=blob),
        link,
    ]
    assert result_value(mcp_types.CallToolResult(content=content)) == [
        "see:",
        {
            "type": "resource",
            "uri": "file:///a.txt",
            "mimeType": "text/plain",
            "text": "hi",
        },
        {"type": "resource", "uri": "file:///b.bin", "bytes": 3},
        {"type": "resource_link", "uri": "file:///c", "name": "c"},
    ]
    assert result_value(mcp_types.CallToolResult(content=[])) is None
    plain = [mcp_types.TextContent(text="[not json"), mcp_types.TextContent(text="x")]
    assert result_value(mcp_types.CallToolResult(content=plain)) == "[not json\nx"
    structured = mcp_types.CallToolResult(content=[], structured_content=[1, 2])
    assert result_value(structured) == [1, 2]
    with pytest.raises(ToolError, match="without a message"):
        result_value(mcp_types.CallToolResult(content=[], is_error=True))


# --- Stop ------------------------------------------------------------------------------


async def stop_while_running(tool: AnyTool, tmp_path: Path) -> None:
    """Cancel a running `wait` call; the server must see its handler cancelled."""
    async with fifo(tmp_path, "signals") as (channel, signals):
        task = asyncio.create_task(call(tool, channel=channel))
        assert await next_line(signals) == "started"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await next_line(signals) == "cancelled"


async def test_stop_with_the_legacy_handshake(tmp_path: Path) -> None:
    """Cancelling reaches a server on the legacy handshake, which goes on serving."""
    async with MCPManager([server("old", protocol="legacy")]) as manager:
        await stop_while_running(by_name(manager)["old__wait"], tmp_path)
        assert await call(by_name(manager)["old__echo"], text="ok") == "ok"


# --- streamable HTTP ----------------------------------------------------------------------


async def test_streamable_http_server(tmp_path: Path) -> None:
    """An HTTP server gets env-expanded headers, renamed clashing tools, and Stop."""
    inner = build_server().streamable_http_app()
    tokens: set[bytes | None] = set()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            tokens.add(dict(scope["headers"]).get(b"x-token"))
        await inner(scope, receive, send)

    async with serving(app) as live:
        entry = {"url": live.url("/mcp"), "headers": {"X-Token": "${TEST_TOKEN}"}}
        configs = parse_mcp_config(
            {"mcpServers": {"web": entry}}, environ={"TEST_TOKEN": "s3cret"}
        )
        async with MCPManager(configs, reserved_names={"web__fail"}) as manager:
            tools = by_name(manager)
            assert await call(tools["web__add"], a=1, b=2) == {"sum": 3}
            assert "nope" in await fails(tools["web__fail_2"], reason="nope")
            await stop_while_running(tools["web__wait"], tmp_path)
            assert await call(tools["web__echo"], text="after") == "after"
    assert tokens == {b"s3cret"}


@asynccontextmanager
async def http_subprocess() -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    """The tools server over HTTP in its own process (so it can really die)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVERS / "tools_server.py"),
        "--http",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(BOUND_S):
            port = int(await proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        if proc.returncode is None:
            proc.kill()
        assert proc.stdout is not None
        await proc.stdout.read()
        await proc.wait()


async def test_http_server_dying_mid_call() -> None:
    """A dying HTTP server fails its call at once, then is down after one reconnect."""
    async with http_subprocess() as (url, proc):
        configs = parse_mcp_config({"mcpServers": {"web": {"url": url}}})
        async with MCPManager(configs) as manager:
            tools = by_name(manager)
            assert await call(tools["web__echo"], text="hi") == "hi"
            async with promptly():
                message = await fails(tools["web__crash"])
            assert message.startswith("MCP server 'web' is not available:")
            assert await proc.wait() == 1
            # one reconnect attempt, which finds nobody listening
            message = await fails(tools["web__echo"], text="x")
            assert "reconnecting failed: cannot reach" in message
            assert await fails(tools["web__echo"], text="x") == message
            assert manager.status()["web"].startswith("down:")


# --- crashes and start-up problems ----------------------------------------------------


async def test_a_crashing_server_is_reconnected_once_per_outage(
    tmp_path: Path,
) -> None:
    """A crashed server restarts on the next call; one unable to restart stays down."""
    script = tmp_path / "tools_server.py"  # a copy we can take away
    shutil.copy(SERVERS / "tools_server.py", script)
    async with MCPManager([server("s", str(script))]) as manager:
        tools = by_name(manager)
        first_pid = await pid_of(tools)
        # dies mid-call: the call fails at once, the server is marked down
        async with promptly():
            message = await fails(tools["s__crash"])
        assert message == (
            "MCP server 's' is not available: "
            "the connection closed during the call (Connection closed)"
        )
        assert manager.status()["s"].startswith("down:")
        # the next call reconnects (a new process) and works
        second_pid = await pid_of(tools)
        assert second_pid != first_pid and manager.status()["s"] == "up"
        # dies while idle: noticed, and the next call reconnects transparently
        with logged("MCP server 's': the server process exited") as noticed:
            os.kill(second_pid, signal.SIGKILL)
            await wait_for(noticed)
        assert manager.status()["s"] == "down: the server process exited"
        third_pid = await pid_of(tools)
        assert third_pid not in (first_pid, second_pid)
        # a crash after which the server cannot start again: down for good
        script.unlink()
        assert "not available" in await fails(tools["s__crash"])
        message = await fails(tools["s__echo"], text="x")
        assert (
            "reconnecting failed: the server process closed the connection" in message
        )
        async with promptly(0.5):  # fails fast: no new process
            assert await fails(tools["s__echo"], text="x") == message
        assert manager.status()["s"] == f"down: {message.split(': ', 1)[1]}"
    assert all(gone(pid) for pid in (first_pid, second_pid, third_pid))


async def test_failing_servers_are_reported_and_the_others_work() -> None:
    """Servers failing to start are listed as problems; the healthy one serves tools."""
    async with serving(build_server().streamable_http_app()) as live:
        configs = [
            *parse_mcp_config(
                {
                    "mcpServers": {
                        "good": {"url": live.url("/mcp")},
                        "missing": {"command": "loopwire-no-such-command"},
                        "off": {
                            "command": "loopwire-no-such-command",
                            "enabled": False,
                        },
                        "refused": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
                    }
                }
            ),
            server("exits", "exits_at_start.py"),
            server("mute", "never_answers.py", startup_timeout_s=0.3),
        ]
        async with MCPManager(configs) as manager:
            assert manager.problems == [
                "MCP server 'missing' failed to start: cannot run "
                "'loopwire-no-such-command': No such file or directory",
                "MCP server 'refused' failed to start: cannot reach "
                f"{configs[3].url}: All connection attempts failed",
                "MCP server 'exits' failed to start: the server process closed the "
                "connection (did it exit?)",
                "MCP server 'mute' failed to start: no answer within 0.3s",
            ]
            assert {t.name.split("__")[0] for t in manager.tools()} == {"good"}
            assert await call(by_name(manager)["good__echo"], text="fine") == "fine"
            status = manager.status()
            assert status["good"] == "up" and status["off"] == "disabled"
            assert status["mute"] == "failed: no answer within 0.3s"


async def test_exit_with_a_call_in_flight_ends_the_call(tmp_path: Path) -> None:
    """Closing the manager fails an in-flight call and ends the server process."""
    async with fifo(tmp_path, "signals") as (channel, signals):
        async with MCPManager([server("s")]) as manager:
            pid = await pid_of(by_name(manager))
            task = asyncio.create_task(
                call(by_name(manager)["s__wait"], channel=channel)
            )
            assert await next_line(signals) == "started"
        with pytest.raises(ToolError, match="MCP server 's' is not available"):
            await task
    assert gone(pid)


# --- names and schemas --------------------------------------------------------------------


def test_tool_names_are_sanitised_bounded_and_unique(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Tool names are made valid, at most 64 characters, unique and deterministic."""
    long = "x" * 80
    names = tool_names(
        [
            ("fs", "read.file"),
            ("fs", "read_file"),
            ("fs", "read file"),
            ("fs", long),
            ("fs", long + "y"),
        ],
        reserved={"taken__x"},
    )
    assert names[:3] == ["fs__read_file", "fs__read_file_2", "fs__read_file_3"]
    assert all(len(n) <= 64 for n in names) and len(set(names)) == 5
    assert names[3] != names[4] and names[3].startswith("fs__xxx")
    assert "'read_file' of server 'fs' is named 'fs__read_file_2'" in caplog.text
    assert tool_names([("taken", "x")], reserved={"taken__x"}) == ["taken__x_2"]
    assert tool_names([("a", "b")]) == tool_names([("a", "b")])  # deterministic


def test_input_schemas_become_object_schemas() -> None:
    """Any input schema becomes a title-less object schema, leaving the input as is."""
    schema = {"title": "T", "properties": {"q": {"type": "string"}}}
    assert object_schema(schema) == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
    }
    assert schema["title"] == "T"  # not mutated
    assert object_schema({"type": "object"}) == {"type": "object", "properties": {}}
    assert object_schema({"type": "string"}) == {"type": "object", "properties": {}}


# --- config -----------------------------------------------------------------------------------


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "mcp.json"
    text = document if isinstance(document, str) else json.dumps(document)
    path.write_text(text, encoding="utf-8")
    return path


def test_config_loads_stdio_and_http_servers(tmp_path: Path) -> None:
    """A config file yields stdio and HTTP servers with env expansion and effects."""
    path = write(
        tmp_path,
        {
            "globalShortcut": "ignored",
            "mcpServers": {
                "files": {
                    "command": "files-server",
                    "args": ["--root", "/data"],
                    "env": {"TOKEN": "pre-${FILES_TOKEN}-post"},
                    "cwd": "work",
                    "timeout_s": 5,
                    "effects": {"tools": {"read": {"read_only": True}}},
                },
                "web-search_2": {
                    "type": "http",
                    "url": "https://example.com/mcp",
                    "enabled": False,
                },
            },
        },
    )
    files, web = load_mcp_config(path, environ={"FILES_TOKEN": "s3cret"})
    assert (files.name, files.transport, files.command) == (
        "files",
        "stdio",
        "files-server",
    )
    assert files.env == {"TOKEN": "pre-s3cret-post"}
    assert files.cwd == str(tmp_path / "work")
    assert files.effect_for("read") == ToolEffect(
        requires_approval=False, read_only=True, timeout_s=5
    )
    assert files.effect_for("write") == ToolEffect(requires_approval=True, timeout_s=5)
    assert (web.name, web.transport, web.enabled) == ("web-search_2", "http", False)
    assert web.startup_timeout_s == 15


def test_the_example_config_parses() -> None:
    """`docs/mcp.example.json` loads: a local notes server on, a remote one off."""
    notes, remote = load_mcp_config(ROOT / "docs" / "mcp.example.json", environ={})
    assert notes.enabled and notes.cwd == str(ROOT)
    assert notes.effect_for("list_notes") == ToolEffect(
        requires_approval=False, read_only=True, idempotent=True, timeout_s=20
    )
    assert notes.effect_for("add_note") == ToolEffect(
        requires_approval=False, timeout_s=20
    )
    assert not remote.enabled and remote.transport == "http"


async def test_the_example_config_runs() -> None:
    """The example notes server starts, and its add and list tools work."""
    notes = load_mcp_config(ROOT / "docs" / "mcp.example.json", environ={})[0]
    notes = notes.model_copy(update={"command": sys.executable})  # wherever the venv is
    async with MCPManager([notes]) as manager:
        tools = by_name(manager)
        assert list(tools) == ["notes__add_note", "notes__list_notes"]
        assert await call(tools["notes__add_note"], text="buy milk") == {"count": 1}
        assert await call(tools["notes__list_notes"]) == {"notes": ["buy milk"]}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("{not json", "is not valid JSON"),
        (
            '{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}',
            "the key 'a' is given twice",
        ),
        (
            {"servers": {}},
            'expected {"mcpServers": {...}} (mcpServers: Field required)',
        ),
        (
            {"mcpServers": {"a": {}}},
            "MCP server 'a': needs exactly one of 'command' (stdio) or 'url' (HTTP)",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "url": "http://h/mcp"}}},
            "MCP server 'a': needs exactly one of 'command'",
        ),
        (
            {"mcpServers": {"bad name": {"command": "x"}}},
            "MCP server 'bad name': the name must be",
        ),
        (
            {"mcpServers": {"a.b": {"command": "x"}}},
            "MCP server 'a.b': the name must be",
        ),
        (
            {
                "mcpServers": {
                    "a": {"command": "x", "effects": {"default": {"readonly": True}}}
                }
            },
            "MCP server 'a': effects.default.readonly: unknown key",
        ),
        (
            {
                "mcpServers": {
                    "a": {
                        "command": "x",
                        "effects": {"tools": {"t": {"approve": True}}},
                    }
                }
            },
            "MCP server 'a': effects.tools.t.approve: unknown key",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "enable": False}}},
            "MCP server 'a': enable: unknown key",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "env": {"K": "${MISSING_VAR}"}}}},
            "MCP server 'a': env.K: references ${MISSING_VAR}, which is not set",
        ),
        (
            {"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"H": "${1x}"}}}},
            "MCP server 'a': headers.H: ${1x} is not a valid variable reference",
        ),
        (
            {"mcpServers": {"a": {"url": "ftp://h"}}},
            "MCP server 'a': 'url' must start with http:// or https://",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "timeout_s": 0}}},
            "MCP server 'a': timeout_s: Input should be greater than 0",
        ),
        (
            {"mcpServers": {"a": {"url": "http://h/mcp", "args": ["-v"]}}},
            "'args', 'env' and 'cwd' apply to 'command'",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "type": "http"}}},
            "'type' 'http' does not go with 'command'",
        ),
        (
            {"mcpServers": {"a": {"url": "http://h/sse", "type": "sse"}}},
            "SSE transport is not supported",
        ),
        ({"mcpServers": {"a": ["x"]}}, "MCP server 'a': expected an object, got list"),
    ],
)
def test_config_errors_are_clear(tmp_path: Path, document: Any, expected: str) -> None:
    """Each bad MCP config raises `ConfigError` naming the file and the problem."""
    path = write(tmp_path, document)
    with pytest.raises(ConfigError) as caught:
        load_mcp_config(path, environ={})
    assert expected in str(caught.value)
    assert str(path) in str(caught.value)


def test_a_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    """A missing MCP config file raises `ConfigError` saying it cannot be read."""
    with pytest.raises(ConfigError, match="cannot read MCP config"):
        load_mcp_config(tmp_path / "nope.json")
