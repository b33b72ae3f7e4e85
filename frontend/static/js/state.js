// Application state that outlives a frame: the server's description, the
// user's controls, and what this tab said (the server does not echo the
// user's own messages, so they are kept here to rebuild the screen on reload).
import { CLIENT } from './protocol.js';

const SETTINGS_KEY = 'loopwire.settings';
const TRANSCRIPT_KEY = 'loopwire.transcript';

function readJson(storage, key, fallback) {
  try {
    const raw = storage.getItem(key);
    return raw ? JSON.parse(raw) : fallback;
  } catch {
    return fallback;
  }
}

function writeJson(storage, key, value) {
  try {
    storage.setItem(key, JSON.stringify(value));
  } catch {
    // storage full or disabled: the UI still works, a reload just shows less
  }
}

/**
 * What the controller knows of the run in progress, the question or approvals
 * it waits on, and the replay under way: the controller's mutable state, in
 * one place (it lives as long as the tab; nothing of it is stored).
 */
export class RunState {
  constructor() {
    /** A chat sent whose run has no frame yet: {content, mode, bubble, view}. */
    this.pending = null;
    /** The RunView of the run in progress (bound to its run_id). */
    this.active = null;
    /** A stop went out for the run in progress. */
    this.stopRequested = false;
    /** Stop was asked while offline: sent after the reconnect's replay. */
    this.stopWanted = false;
    /** A replay is under way (from session_ready until its last frame). */
    this.awaitingReplay = false;
    /** The RunView whose question waits for an answer. */
    this.questionRun = null;
    /** The opened conversation's stored runs and messages, until the replay has shown what it covers. */
    this.stored = null;
    /** Decisions not yet seen acted on: request key → {frame, runId, seq}. */
    this.unacked = new Map();
    /** Decisions sent again that the server may refuse as stale. */
    this.staleExpected = 0;
    /** Frames still to come that a switch of versions sends again (shown as a replay). */
    this.resending = 0;
    /** Runs were set aside live: the versions shown are asked again after the next run. */
    this.versionsStale = false;
  }

  /** From a chat sent until its run's response_complete. */
  get running() {
    return this.pending !== null || this.active !== null;
  }
}

/** The controls of the composer's toolbar, remembered across visits. */
export class Settings {
  constructor(storage = window.localStorage) {
    this.storage = storage;
    const saved = readJson(storage, SETTINGS_KEY, {});
    this.agentMode = saved.agentMode ?? true;
    this.maxSteps = Number.isInteger(saved.maxSteps) ? saved.maxSteps : null;
    // a run's token budget (null: the server's); a value the toolbar refused
    // is not kept, only said (`budgetProblem`) until it is fixed
    this.budgetTokens = Number.isInteger(saved.budgetTokens) && saved.budgetTokens > 0 ? saved.budgetTokens : null;
    this.budgetCost = typeof saved.budgetCost === 'number' && saved.budgetCost > 0 ? saved.budgetCost : null;
    this.budgetProblem = null;
    this.readOnly = saved.readOnly ?? false;
    this.strategy = typeof saved.strategy === 'string' ? saved.strategy : null;
    this.model = typeof saved.model === 'string' ? saved.model : null;
    // names the user turned off; new tools on the server start enabled
    this.disabledTools = new Set(Array.isArray(saved.disabledTools) ? saved.disabledTools : []);
    // data sources the user turned off; new ones on the server start on
    this.disabledSources = new Set(Array.isArray(saved.disabledSources) ? saved.disabledSources : []);
  }

  save() {
    writeJson(this.storage, SETTINGS_KEY, {
      agentMode: this.agentMode,
      maxSteps: this.maxSteps,
      budgetTokens: this.budgetTokens,
      budgetCost: this.budgetCost,
      readOnly: this.readOnly,
      strategy: this.strategy,
      model: this.model,
      disabledTools: [...this.disabledTools],
      disabledSources: [...this.disabledSources],
    });
  }

  /** The step budget to ask for: the user's choice clamped to [1, cap]. */
  stepsFor(limits) {
    const wanted = this.maxSteps ?? limits.default_max_steps;
    return Math.min(Math.max(1, Math.round(wanted)), limits.max_steps_cap);
  }

  /** The `agent_budget` to ask for (null: the server's), each bound at most
   * its cap; a cost only where the server caps cost (else the page hides it). */
  budgetFor(limits) {
    const caps = limits.run_budget ?? {};
    const budget = {};
    if (this.budgetTokens !== null) budget.tokens = Math.min(this.budgetTokens, caps.tokens ?? Infinity);
    if (this.budgetCost !== null && typeof caps.cost_usd === 'number') budget.cost_usd = Math.min(this.budgetCost, caps.cost_usd);
    return Object.keys(budget).length ? budget : null;
  }

  selectedTools(tools) {
    return tools.map((t) => t.name).filter((name) => !this.disabledTools.has(name));
  }

  /** The data sources to search (all the server's but those turned off). */
  selectedSources(info) {
    return (info.data_sources ?? []).filter((name) => !this.disabledSources.has(name));
  }

  /** The selected tools that may run (read-only leaves out those that write). */
  runnableTools(tools) {
    return tools.filter((t) => !this.disabledTools.has(t.name) && (!this.readOnly || t.effect.read_only));
  }

  /** The chosen strategy if the server still offers it, else its default (the first). */
  strategyFor(info) {
    return info.strategies.includes(this.strategy) ? this.strategy : info.strategies[0];
  }

  /** The chosen model if the server still offers it, else its default (the first). */
  modelFor(info) {
    return info.models.includes(this.model) ? this.model : info.models[0];
  }

  /** The `chat` frame for `content`, with exactly the protocol's fields. */
  chatFrame(content, info) {
    const sources = this.selectedSources(info);
    let tools = this.selectedTools(info.tools);
    // no data source chosen: nothing to search, so not the search tool either
    if ((info.data_sources ?? []).length && !sources.length) tools = tools.filter((n) => n !== 'search_documents');
    const frame = {
      type: CLIENT.CHAT,
      content,
      agent_mode: this.agentMode,
      agent_max_steps: this.stepsFor(info.limits),
      selected_tools: tools,
      read_only: this.readOnly,
    };
    if (sources.length) frame.selected_data_sources = sources;
    const budget = this.agentMode ? this.budgetFor(info.limits) : null;
    if (budget !== null) frame.agent_budget = budget;
    // the defaults are left out, so the server's own choice applies
    const strategy = this.strategyFor(info);
    if (this.agentMode && strategy !== undefined && strategy !== info.strategies[0]) frame.loop_strategy = strategy;
    const model = this.modelFor(info);
    if (model !== undefined && model !== info.models[0]) frame.model = model;
    return frame;
  }

  /** 'agent' | 'tools' | 'retrieve' | 'plain': what a chat sent now would do. */
  modeFor(info) {
    if (this.agentMode) return 'agent';
    if (this.selectedTools(info.tools).length > 0) return 'tools';
    return this.selectedSources(info).length > 0 ? 'retrieve' : 'plain';
  }
}

/**
 * What this tab sent in the current session, keyed by what the server's
 * frames refer to: run_id → the user's message; run_id and question_id →
 * the answer; run_id and tool_call_id → the approval decision (ids of calls
 * repeat from run to run with some models). A call asked about again after
 * a crash (`in_doubt`) is a request of its own.
 */
export class Transcript {
  constructor(storage = window.sessionStorage) {
    this.storage = storage;
    const saved = readJson(storage, TRANSCRIPT_KEY, null);
    this.data = saved && typeof saved === 'object' ? saved : Transcript.empty(null);
  }

  static empty(sessionId) {
    return { session_id: sessionId, runs: {}, answers: {}, approvals: {} };
  }

  /** Keep what belongs to `sessionId`; anything else is forgotten. */
  useSession(sessionId) {
    if (this.data.session_id !== sessionId) {
      this.data = Transcript.empty(sessionId);
      this.save();
    }
  }

  message(runId) {
    return this.data.runs[runId] ?? null;
  }

  answer(runId, questionId) {
    return this.data.answers[`${runId} ${questionId}`] ?? null;
  }

  /** The decision on `request` (a `tool_approval_request`), if this tab made one. */
  approval(request) {
    return this.data.approvals[approvalKey(request)] ?? null;
  }

  rememberMessage(runId, message) {
    this.data.runs[runId] = message;
    this.save();
  }

  rememberAnswer(runId, questionId, content) {
    this.data.answers[`${runId} ${questionId}`] = content;
    this.save();
  }

  rememberApproval(request, decision) {
    this.data.approvals[approvalKey(request)] = decision;
    this.save();
  }

  save() {
    writeJson(this.storage, TRANSCRIPT_KEY, this.data);
  }
}

function approvalKey({ run_id: runId, tool_call_id: callId, in_doubt: inDoubt }) {
  return `${runId} ${callId}${inDoubt ? ' again' : ''}`;
}
