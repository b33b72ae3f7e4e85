"""The frames `AgentClient.chat()` yields, by kind: the payload models of
`backend.protocol` (THE wire contract), named here for client code.

Every event is an instance of one of these and of `backend.protocol.Envelope`
(`seq`, `session_id`, `run_id`, `ts`; `loopwire.connection.envelope()` gives
it a type). `AgentErrorUpdate` is the protocol's `AgentError` (the model
failed; the run still ends properly), renamed so as not to be taken for the
exception `loopwire.AgentError` (an `error` frame). Tell them apart with
`isinstance`. An `Error` that ends nothing is yielded too (a control that
came too late; `invalid_answer`, a decision that does not fit, the run still
waiting for one); any other is raised as `loopwire.AgentError`:

```python
if isinstance(event, events.AgentRequestInput):
    await client.answer(ask_someone(event.question))
```

An `AgentRequestInput` asked by a tool rather than the model (an MCP
server's question during its call) names the asker in `asked_by` ("the MCP
server 'cafe'"); with a `url` it asks the person to open that page and
answer (with no text) once done there. Any question may be declined
(`client.decline()`).
"""

from backend.protocol import (
    AgentCompletion,
    AgentDuplicateCall,
    AgentMaxStepsReached,
    AgentObserve,
    AgentPlan,
    AgentReason,
    AgentRequestInput,
    AgentRequestInputTimeout,
    AgentStart,
    AgentStepsGranted,
    AgentStopped,
    AgentTurnStart,
    ChatResponse,
    Envelope,
    Error,
    ResponseComplete,
    RunsRemoved,
    SessionReady,
    SessionReset,
    Thinking,
    TokenStream,
    ToolApprovalDecided,
    ToolApprovalRequest,
    ToolComplete,
    ToolError,
    ToolStart,
)
from backend.protocol import AgentError as AgentErrorUpdate

__all__ = [
    "AgentCompletion",
    "AgentDuplicateCall",
    "AgentErrorUpdate",
    "AgentMaxStepsReached",
    "AgentObserve",
    "AgentPlan",
    "AgentReason",
    "AgentRequestInput",
    "AgentRequestInputTimeout",
    "AgentStart",
    "AgentStepsGranted",
    "AgentStopped",
    "AgentTurnStart",
    "ChatResponse",
    "Envelope",
    "Error",
    "ResponseComplete",
    "RunsRemoved",
    "SessionReady",
    "SessionReset",
    "Thinking",
    "TokenStream",
    "ToolApprovalDecided",
    "ToolApprovalRequest",
    "ToolComplete",
    "ToolError",
    "ToolStart",
]
