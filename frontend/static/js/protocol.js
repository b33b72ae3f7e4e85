// GENERATED FILE — do not edit. Written by `python -m backend schema --write`
// (`make schema`, backend/protocol_js.py) from the protocol's JSON Schema
// (docs/protocol.schema.json); a test fails when it is stale.

/** `type` of the frames the server sends. */
export const FRAME = Object.freeze({
  AGENT_UPDATE: 'agent_update',
  BRANCH_SWITCHED: 'branch_switched',
  CHAT_RESPONSE: 'chat_response',
  CLIENT_TOOL_CALL: 'client_tool_call',
  ERROR: 'error',
  FILES_UPDATE: 'files_update',
  PENDING_INPUT: 'pending_input',
  RESPONSE_COMPLETE: 'response_complete',
  RUNS_REMOVED: 'runs_removed',
  SESSION_READY: 'session_ready',
  SESSION_RESET: 'session_reset',
  THINKING: 'thinking',
  TOKEN_STREAM: 'token_stream',
  TOOL_APPROVAL_DECIDED: 'tool_approval_decided',
  TOOL_APPROVAL_REQUEST: 'tool_approval_request',
  TOOL_COMPLETE: 'tool_complete',
  TOOL_ERROR: 'tool_error',
  TOOL_START: 'tool_start',
});

/** `update_type` of an `agent_update` frame. */
export const UPDATE = Object.freeze({
  AGENT_BUDGET_GRANTED: 'agent_budget_granted',
  AGENT_BUDGET_REACHED: 'agent_budget_reached',
  AGENT_BUDGET_WARNING: 'agent_budget_warning',
  AGENT_COMPLETION: 'agent_completion',
  AGENT_DUPLICATE_CALL: 'agent_duplicate_call',
  AGENT_ERROR: 'agent_error',
  AGENT_INTERJECTION: 'agent_interjection',
  AGENT_MAX_STEPS_REACHED: 'agent_max_steps_reached',
  AGENT_OBSERVE: 'agent_observe',
  AGENT_PLAN: 'agent_plan',
  AGENT_REASON: 'agent_reason',
  AGENT_REQUEST_INPUT: 'agent_request_input',
  AGENT_REQUEST_INPUT_TIMEOUT: 'agent_request_input_timeout',
  AGENT_START: 'agent_start',
  AGENT_STEPS_GRANTED: 'agent_steps_granted',
  AGENT_STOPPED: 'agent_stopped',
  AGENT_TURN_START: 'agent_turn_start',
});

/** `type` of the messages the page sends. */
export const CLIENT = Object.freeze({
  AGENT_CONTROL: 'agent_control',
  AGENT_USER_INPUT: 'agent_user_input',
  CANCEL_INPUT: 'cancel_input',
  CHAT: 'chat',
  RESET_SESSION: 'reset_session',
  SWITCH_BRANCH: 'switch_branch',
  TOOL_APPROVAL_RESPONSE: 'tool_approval_response',
  TOOL_RESULT: 'tool_result',
});

/** `error_type` of an `error` frame. */
export const ERROR = Object.freeze({
  BUDGET_EXHAUSTED: 'budget_exhausted',
  BUSY: 'busy',
  INTERNAL_ERROR: 'internal_error',
  INVALID_ANSWER: 'invalid_answer',
  INVALID_MESSAGE: 'invalid_message',
  LLM_ERROR: 'llm_error',
  MOVED: 'moved',
  NO_ACTIVE_RUN: 'no_active_run',
  NO_PENDING_APPROVAL: 'no_pending_approval',
  NO_PENDING_INPUT: 'no_pending_input',
  RATE_LIMITED: 'rate_limited',
  RUN_INTERRUPTED: 'run_interrupted',
  SERVER_RESTARTING: 'server_restarting',
  STORE_ERROR: 'store_error',
  UNAUTHORIZED: 'unauthorized',
  UNAVAILABLE: 'unavailable',
});
