"""AG-UI 1.0 over HTTP: `POST /api/ag-ui` takes a `RunAgentInput` and
answers the AG-UI event stream (Server-Sent Events) of a loopwire run.

- `threadId` is the conversation: a conversation id of the caller's (as
  32 hex digits or in UUID form) continues it; a thread loopwire does not
  know starts a new conversation, with that id if it spells one, else with
  one of its own (`RUN_STARTED.metadata.loopwire.conversation_id` gives it:
  send it as `threadId` from then on). Another user's conversation is a 404.
- A new run asks the last message, which must be the user's, in agent
  mode; `forwardedProps` may set `detach`, `max_steps`, `loop_strategy`,
  `selected_tools` and `model`, as on `/api/agent`.
- A question or an approval ends the AG-UI run with the interrupt outcome;
  the next input on the thread answers it in `resume` (or, for a question,
  with a new user message) and follows the same loopwire run on.
- The input's `tools` are frontend tools (loopwire's client tools): the
  model may call them next to the server's; a call is streamed as a tool
  call and ends the AG-UI run, and the next input, whose last messages are
  the `tool` messages with the results, follows the same loopwire run on.
- A client that goes away stops the run, unless `forwardedProps.detach`.

The input is read in `transport/ag_ui_input.py`, the run followed in
`transport/ag_ui_runs.py`, its frames become events in
`transport/ag_ui_events.py`; the run itself is `/api/agent`'s: the same
`ChatService` calls, auth, limits and refusals. Only the route and its
OpenAPI entry are here: the rest, with the `ag_ui` package, is imported by
the first AG-UI request, not when the server starts.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


async def run(request: Request) -> Response:
    """`POST /api/ag-ui` (`transport/ag_ui_runs.py`). The first request
    imports it, and with it the `ag_ui` package's models (~3.5 MB): a
    server no AG-UI client uses never loads them."""
    from backend.transport.ag_ui_runs import AG_UI

    return await AG_UI.run(request)


def routes() -> list[Route]:
    return [Route("/api/ag-ui", run, methods=["POST"])]


def ag_ui_paths() -> dict[str, Any]:
    """`POST /api/ag-ui` in the OpenAPI document (`transport/openapi.py`)."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    refusals = {
        "400": "a bad RunAgentInput (`fields` names each problem), or its last "
        "message is not the user's",
        "401": "not signed in",
        "404": "the thread is another user's conversation",
        "409": "busy, or no such interrupt waiting",
        "413": "the body is over the limit",
        "415": "the body is not application/json",
        "429": "too many runs or connections",
        "503": "the server is restarting or its store is unavailable",
    }
    body = {
        "type": "object",
        "description": "An AG-UI 1.0 `RunAgentInput` (camelCase); "
        "`forwardedProps` may hold `detach`, `max_steps`, `loop_strategy`, "
        "`selected_tools`, `model`.",
        "required": ["threadId", "runId", "messages"],
    }
    return {
        "/api/ag-ui": {
            "post": {
                "summary": "Run the agent for an AG-UI client (docs/integrations.md)",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                },
                "responses": {
                    "200": {
                        "description": "the AG-UI events of the run, to "
                        "RUN_FINISHED (success, interrupt or cancelled) or "
                        "RUN_ERROR",
                        "content": {
                            "text/event-stream": {"schema": {"type": "string"}}
                        },
                    },
                    **{
                        code: {"description": meaning, "content": error}
                        for code, meaning in refusals.items()
                    },
                },
            }
        }
    }
