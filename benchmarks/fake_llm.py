"""A fake OpenAI-compatible chat completions server for the benchmarks.

    python -m benchmarks.fake_llm --port 9100 --latency-ms 200 --tokens 16

It runs as its own process (raw ASGI on uvicorn with httptools, no
framework), so its CPU is never counted as loopwire's. Like a real model it
is stateless: it decides each reply from the request body alone.

- The phase comes from the phase prompt, the last system message loopwire
  sends (`prompts/agent_*_prompt.md`): `# Agent step N of M: REASON` → prose
  and a reason control block planning a tool call; `ACT` → one tool call;
  `OBSERVE` → go on while N < the steps wanted, else stop with the final
  answer (so a run of S steps makes exactly 3 x S calls); `# Planning` → a
  plan of S steps; `# Final answer` → the streamed answer.
- Without a phase prompt (plain chat, tool mode): tools offered and no tool
  result after the last user message → one `calculator` call; otherwise a
  streamed answer of K tokens.

What to do is tuned by `key=value` words in the last user message, each
defaulting to the command-line option of the same name:

- `steps=S`: steps of an agent run before observe stops it;
- `tokens=K`: tokens in a streamed answer (one SSE chunk each);
- `latency_ms=L`: the wait before the first byte of every reply;
- `token_delay_ms=D`: the wait between two streamed chunks;
- `act=calculator`: what act calls: `calculator`, `ask` (`request_input`)
  or `wait` (`bench_wait`, see `benchmarks/serve.py`);
- `wait_s=W`: the `seconds` argument of a `bench_wait` call;
- `tag=T`: with `--signal-port`, the UDP datagram `llm:T:<phase>` is sent
  to the bench when such a request arrives (`benchmarks/signals.py`).

Replies are in the real wire format: JSON, or server-sent events with one
chunk per token, tool calls as id + name first and the arguments in
fragments, and a final usage chunk when `stream_options.include_usage`.
`GET /v1/models` lists the model; `GET /_bench/counts` tells how many
requests came, by phase (the bench checks every run made the calls it
should).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import re
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

JSON = dict[str, Any]
Receive = Callable[[], Awaitable[JSON]]
Send = Callable[[JSON], Awaitable[None]]

PHASE_HEADER = re.compile(r"#\s*Agent step (\d+) of (\d+):\s*([A-Z]+)")
DIRECTIVE = re.compile(r"\b(\w+)=(\S+)")
LONG_WAIT_S = 0.5
"""Waits at least this long also watch for the client leaving (a Stop)."""
FRAGMENTS = 3
"""Tool-call arguments are streamed in this many pieces."""


@dataclass(frozen=True)
class Options:
    """What a reply looks like; the command line's values, then the message's."""

    steps: int = 3
    tokens: int = 16
    latency_ms: float = 0.0
    token_delay_ms: float = 0.0
    act: str = "calculator"
    wait_s: float = 30.0
    tag: str = ""

    def overridden(self, text: str) -> Options:
        """These options with the `key=value` words of `text` applied."""
        changes: dict[str, Any] = {}
        for key, value in DIRECTIVE.findall(text):
            if key in ("steps", "tokens"):
                changes[key] = int(value)
            elif key in ("latency_ms", "token_delay_ms", "wait_s"):
                changes[key] = float(value)
            elif key in ("act", "tag"):
                changes[key] = value
        return replace(self, **changes) if changes else self


@dataclass(frozen=True)
class Reply:
    """One decided reply: text and/or one tool call (name, JSON arguments)."""

    phase: str
    content: str = ""
    tool: tuple[str, str] | None = None


def answer_tokens(count: int) -> list[str]:
    """The streamed answer: `count` tokens (the bench checks the text)."""
    return [f"w{i} " for i in range(count)]


def answer_text(count: int) -> str:
    """The answer loopwire keeps from `answer_tokens(count)` (stripped)."""
    return "".join(answer_tokens(count)).strip()


def final_answer(steps: int) -> str:
    return f"Done after {steps} steps."


def step_expression(step: int) -> str:
    """The calculator call of agent step `step` (distinct each step: loopwire
    refuses a call repeated within a run)."""
    return f"{step}+{step}"


TOOL_MODE_EXPRESSION = "6*7"


def decide(body: JSON, defaults: Options) -> tuple[Reply, Options]:
    """The reply to a chat completions request body, and the options used."""
    messages: list[JSON] = body.get("messages") or []
    options = defaults.overridden(_last_user_text(messages))
    prompt = _phase_prompt(messages)
    header = PHASE_HEADER.match(prompt)
    if header is not None:
        step, phase = int(header.group(1)), header.group(3).lower()
        return _agent_reply(phase, step, options), options
    if prompt.startswith("# Planning"):
        return _plan(options), options
    if prompt.startswith("# Final answer"):
        return Reply("final", answer_text(options.tokens)), options
    offered = body.get("tools") and body.get("tool_choice") != "none"
    if offered and not _tool_result_since_user(messages):
        arguments = json.dumps({"expression": TOOL_MODE_EXPRESSION})
        return Reply("chat_tool", tool=("calculator", arguments)), options
    return Reply("chat", answer_text(options.tokens)), options


def _plan(options: Options) -> Reply:
    steps = [f"Call calculator for step {i + 1}." for i in range(options.steps)]
    plan = {"steps": steps, "final_answer": ""}
    return Reply("plan", f"A plan.\n```json\n{json.dumps(plan)}\n```")


def _agent_reply(phase: str, step: int, options: Options) -> Reply:
    if phase == "plan":
        return _plan(options)
    if phase == "reason":
        control = {
            "plan": f"Use calculator on {step_expression(step)}.",
            "tools_to_consider": ["calculator"],
            "finish": False,
            "final_answer": "",
        }
        return Reply(phase, f"I will calculate.\n```json\n{json.dumps(control)}\n```")
    if phase == "act":
        if options.act == "ask":
            question = json.dumps({"question": "Which number should I use?"})
            return Reply(phase, tool=("request_input", question))
        if options.act == "wait":
            wait = json.dumps({"seconds": options.wait_s, "tag": options.tag})
            return Reply(phase, tool=("bench_wait", wait))
        arguments = json.dumps({"expression": step_expression(step)})
        return Reply(phase, tool=("calculator", arguments))
    if phase == "observe":
        done = step >= options.steps
        control = {
            "observation": f"Step {step} done.",
            "should_continue": not done,
            "final_answer": final_answer(step) if done else "",
        }
        return Reply(phase, f"Noted.\n```json\n{json.dumps(control)}\n```")
    raise ValueError(f"unknown phase {phase!r}")


def _last_user_text(messages: Sequence[JSON]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def _phase_prompt(messages: Sequence[JSON]) -> str:
    """The last system message, when it is the request's last message."""
    if messages and messages[-1].get("role") == "system":
        content = messages[-1].get("content")
        return content.lstrip() if isinstance(content, str) else ""
    return ""


def _tool_result_since_user(messages: Sequence[JSON]) -> bool:
    for message in reversed(messages):
        role = message.get("role")
        if role == "tool":
            return True
        if role == "user":
            return False
    return False


# ------------------------------------------------------------- wire format


class Wire:
    """Encodes replies as chat completions JSON or server-sent events."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._ids = itertools.count(1)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):08d}"

    def completion(self, reply: Reply, usage: JSON) -> bytes:
        message: JSON = {"role": "assistant", "content": reply.content or None}
        if reply.tool is not None:
            name, arguments = reply.tool
            message["tool_calls"] = [
                {
                    "id": self.new_id("call_"),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ]
        document = {
            "id": self.new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if reply.tool else "stop",
                }
            ],
            "usage": usage,
        }
        return json.dumps(document).encode()

    def chunks(
        self, reply: Reply, tokens: Sequence[str], usage: JSON | None
    ) -> list[bytes]:
        """The SSE events of a streamed reply, `[DONE]` included."""
        head = (
            f'data: {{"id":"{self.new_id("chatcmpl-")}",'
            f'"object":"chat.completion.chunk","created":{int(time.time())},'
            f'"model":{json.dumps(self.model)},"system_fingerprint":null,'
        )
        tail = ',"usage":null}\n\n' if usage is not None else "}\n\n"

        def event(delta: JSON | str, finish: str | None = None) -> bytes:
            text = delta if isinstance(delta, str) else json.dumps(delta)
            reason = "null" if finish is None else f'"{finish}"'
            return (
                f'{head}"choices":[{{"index":0,"delta":{text},'
                f'"logprobs":null,"finish_reason":{reason}}}]{tail}'
            ).encode()

        events = [event({"role": "assistant", "content": ""})]
        if reply.tool is not None:
            events.extend(self._tool_events(reply.tool, event))
        events.extend(event(f'{{"content":{json.dumps(token)}}}') for token in tokens)
        events.append(event("{}", "tool_calls" if reply.tool else "stop"))
        if usage is not None:
            events.append(
                f'{head}"choices":[],"usage":{json.dumps(usage)}}}\n\n'.encode()
            )
        events.append(b"data: [DONE]\n\n")
        return events

    def _tool_events(
        self, tool: tuple[str, str], event: Callable[[JSON | str], bytes]
    ) -> list[bytes]:
        name, arguments = tool
        first = {
            "tool_calls": [
                {
                    "index": 0,
                    "id": self.new_id("call_"),
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
            ]
        }
        size = -(-len(arguments) // FRAGMENTS)
        pieces = [arguments[i : i + size] for i in range(0, len(arguments), size)]
        rest = [
            {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
            for piece in pieces
        ]
        return [event(first), *(event(delta) for delta in rest)]


# ------------------------------------------------------------------- server


class FakeLLM:
    """The ASGI app."""

    def __init__(self, defaults: Options, model: str, signal_port: int | None) -> None:
        self.defaults = defaults
        self.model = model
        self.wire = Wire(model)
        self.counts: Counter[str] = Counter()
        self._signal_port = signal_port
        self._signals: socket.socket | None = None
        if signal_port is not None:
            self._signals = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._signals.setblocking(False)

    async def __call__(self, scope: JSON, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if method == "POST" and path.endswith("/chat/completions"):
            await self._completions(receive, send)
        elif method == "GET" and path.endswith("/models"):
            models = {
                "object": "list",
                "data": [
                    {
                        "id": self.model,
                        "object": "model",
                        "created": 0,
                        "owned_by": "bench",
                    }
                ],
            }
            await _respond(send, 200, json.dumps(models).encode())
        elif method == "GET" and path == "/_bench/counts":
            await _respond(send, 200, json.dumps(dict(self.counts)).encode())
        else:
            await _respond(send, 404, b'{"error": {"message": "not found"}}')

    async def _completions(self, receive: Receive, send: Send) -> None:
        raw = await _body(receive)
        body = json.loads(raw)
        reply, options = decide(body, self.defaults)
        self.counts["requests"] += 1
        self.counts[reply.phase] += 1
        streamed = bool(body.get("stream"))
        if options.tag:
            self._signal(f"llm:{options.tag}:{reply.phase}")
        if options.latency_ms > 0 and not await _wait(options.latency_ms, receive):
            self.counts["abandoned"] += 1
            return  # the client left while it waited: nothing to send
        if reply.phase in ("chat", "final"):
            tokens = answer_tokens(options.tokens)
        else:
            tokens = [reply.content] if reply.content else []
        prompt_tokens = len(raw) // 4
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(tokens) + 8,
            "total_tokens": prompt_tokens + len(tokens) + 8,
        }
        if not streamed:
            await _respond(send, 200, self.wire.completion(reply, usage))
            return
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = self.wire.chunks(reply, tokens, usage if include_usage else None)
        await _stream(send, receive, events, options.token_delay_ms)

    def _signal(self, text: str) -> None:
        if self._signals is not None and self._signal_port is not None:
            with contextlib.suppress(OSError):  # a lost signal: the bench times out
                self._signals.sendto(text.encode(), ("127.0.0.1", self._signal_port))


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _body(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def _wait(ms: float, receive: Receive) -> bool:
    """Wait `ms`; False if the client disconnected meanwhile (long waits only)."""
    if ms / 1000 < LONG_WAIT_S:
        await asyncio.sleep(ms / 1000)
        return True
    try:
        async with asyncio.timeout(ms / 1000):
            message = await receive()
    except TimeoutError:
        return True
    return bool(message["type"] != "http.disconnect")


async def _respond(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _stream(
    send: Send, receive: Receive, events: Sequence[bytes], delay_ms: float
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"),
            ],
        }
    )
    if delay_ms <= 0:  # as fast as it goes: one write
        await send({"type": "http.response.body", "body": b"".join(events)})
        return
    left = asyncio.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        left.set()

    watcher = asyncio.create_task(watch())
    try:
        for event in events:
            if left.is_set():
                return
            await send({"type": "http.response.body", "body": event, "more_body": True})
            await asyncio.sleep(delay_ms / 1000)
        await send({"type": "http.response.body", "body": b""})
    finally:
        watcher.cancel()


def main(argv: Sequence[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m benchmarks.fake_llm")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--token-delay-ms", type=float, default=0.0)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--signal-port", type=int, default=None)
    args = parser.parse_args(argv)
    defaults = Options(
        steps=args.steps,
        tokens=args.tokens,
        latency_ms=args.latency_ms,
        token_delay_ms=args.token_delay_ms,
    )
    app = FakeLLM(defaults, args.model, args.signal_port)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        backlog=4096,
        timeout_keep_alive=60,
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
