// Applies server frames to the screen and turns user actions into client
// frames. Runs: a chat creates a pending RunView at once (immediate feedback);
// the first frame with a new run_id binds it. A replay (reload or reconnect)
// goes through exactly the same code, so the screen it rebuilds is the screen
// the live frames built.
import { RunView, phaseAfter } from './render/run.js';

/** Frames after which a pending question can no longer be waiting. */
const KEEPS_QUESTION = new Set(['agent_request_input', 'agent_steps_granted', 'agent_request_input_timeout', 'agent_stopped']);
const REFUSES_CHAT = new Set(['busy', 'invalid_message', 'rate_limited', 'unauthorized', 'internal_error']);

export class Controller extends EventTarget {
  constructor({ connection, settings, transcript, messages, banner, approvals, info }) {
    super();
    this.connection = connection;
    this.settings = settings;
    this.transcript = transcript;
    this.messages = messages;
    this.banner = banner;
    this.approvals = approvals;
    this.info = info;
    this.runs = new Map();
    this.pending = null;
    this.active = null;
    this.stopRequested = false;
    this.stopWanted = false;
    this.awaitingReplay = false;
    this.questionRun = null;
    this.stored = null;
  }

  get running() {
    return this.pending !== null || this.active !== null;
  }

  changed() {
    this.dispatchEvent(new Event('change'));
  }

  // ---------------------------------------------------------------- connection events

  onReady({ frame, changedSession }) {
    this.info = {
      limits: frame.limits,
      model: frame.model,
      models: frame.models,
      provider: frame.provider,
      tools: frame.tools,
      strategies: frame.strategies,
      data_sources: frame.data_sources ?? [],
    };
    if (changedSession) this.sessionLost();
    this.transcript.useSession(frame.session_id);
    this.awaitingReplay = true;
    if (!this.connection.replaying) this.afterReplay();
    this.changed();
  }

  onFrame({ frame, replaying }) {
    this.apply(frame, replaying);
    if (this.awaitingReplay && !this.connection.replaying) this.afterReplay();
    this.changed();
  }

  onRefused({ frame }) {
    this.messages.errorNotice(frame);
    this.changed();
  }

  /** The server does not know our session any more (it restarted). */
  sessionLost() {
    if (this.runs.size === 0 && !this.pending) return;
    this.messages.notice({
      kind: 'warn',
      title: 'The server started a new conversation',
      text: 'It no longer knows the previous one (it probably restarted). What is on screen above is kept, but the model will not remember it.',
    });
    this.abandonRun('Lost when the server restarted');
  }

  afterReplay() {
    this.awaitingReplay = false;
    this.showEarlierRuns();
    if (this.banner.questionId) this.banner.input.focus();
    if (this.stopWanted && this.running) this.stop();
    this.stopWanted = false;
  }

  /**
   * Runs of the stored conversation that no replayed frame showed (their
   * frames are past the replay window): each as the user's message and the
   * answer the history keeps, above the replayed ones, said to be older.
   */
  showEarlierRuns() {
    const stored = this.stored;
    this.stored = null;
    if (!stored) return;
    const answers = answersByRequest(stored.messages);
    const earlier = [];
    for (const run of stored.runs) {
      if (this.runs.has(run.id)) break; // the replay covers this one and the rest
      const mode = run.mode ?? 'agent';
      const view = new RunView({ mode });
      view.bind(run.id);
      view.response({ message: answers.take(run.request) ?? '' });
      view.finish();
      view.earlier(run);
      view.userBubble = this.messages.userBubble(run.request, mode);
      this.messages.bindUser(view.userBubble, run.id);
      earlier.push(view.userBubble, view.element);
    }
    if (earlier.length) this.messages.addEarlier(earlier);
  }

  // ---------------------------------------------------------------- frames

  apply(frame, replaying) {
    if (!frame.run_id) {
      if (frame.type === 'error') this.globalError(frame);
      else if (frame.type === 'session_reset') this.messages.notice({ kind: 'info', title: 'History cleared', text: 'The model starts afresh from here.' });
      else if (frame.type === 'runs_removed') this.removeRuns(frame.run_ids);
      else if (frame.type === 'files_update') this.dispatchEvent(new CustomEvent('files', { detail: frame.files }));
      return;
    }
    const run = this.runFor(frame.run_id);
    if (this.questionRun === run && !KEEPS_QUESTION.has(frame.update_type)) this.questionSettled(run);
    if (frame.type === 'agent_update') this.agentUpdate(run, frame, replaying);
    else this.runFrame(run, frame);
    run.setPhase(phaseAfter(frame, run.agent));
  }

  runFor(runId) {
    let view = this.runs.get(runId);
    if (view) return view;
    if (this.pending) {
      view = this.pending.view;
      view.userBubble = this.pending.bubble;
      this.transcript.rememberMessage(runId, { content: this.pending.content, mode: this.pending.mode });
      this.pending = null;
      this.dispatchEvent(new Event('run-started'));
    } else {
      const said = this.transcript.message(runId);
      const bubble = said ? this.messages.addUser(said.content, said.mode) : null;
      view = this.newRunView(said?.mode ?? 'plain');
      view.userBubble = bubble;
    }
    view.bind(runId);
    if (view.userBubble) this.messages.bindUser(view.userBubble, runId);
    view.setCap(this.info.limits.max_steps_cap);
    this.runs.set(runId, view);
    this.active = view;
    return view;
  }

  newRunView(mode) {
    for (const earlier of this.runs.values()) earlier.retire();
    const view = new RunView({
      mode,
      onGrant: (steps) => this.grant(steps),
      onContinue: (steps) => this.continueRun(steps),
      onStopAfterStep: () => this.stopAfterStep(),
      onRetry: () => this.retry(view),
    });
    this.messages.add(view.element);
    return view;
  }

  runFrame(run, frame) {
    switch (frame.type) {
      case 'tool_start':
        run.toolStart(frame);
        this.approvals.dismiss(frame.tool_call_id);
        break;
      case 'tool_complete':
        run.toolComplete(frame);
        this.approvals.dismiss(frame.tool_call_id);
        break;
      case 'tool_error':
        run.toolError(frame);
        this.approvals.dismiss(frame.tool_call_id);
        break;
      case 'tool_approval_request':
        this.approvalRequested(run, frame);
        break;
      case 'token_stream':
        run.token(frame);
        break;
      case 'chat_response':
        run.response(frame);
        break;
      case 'response_complete':
        this.finishRun(run);
        break;
      case 'error':
        run.runError(frame);
        break;
      default:
        console.warn('loopwire: unknown frame type', frame.type);
    }
  }

  agentUpdate(run, frame, replaying) {
    run.becomeAgent();
    switch (frame.update_type) {
      case 'agent_start': run.start(frame); break;
      case 'agent_plan': run.plan(frame); break;
      case 'agent_turn_start': run.turnStart(frame); break;
      case 'agent_reason': run.reason(frame); break;
      case 'agent_observe': run.observe(frame); break;
      case 'agent_request_input':
        run.requestInput(frame);
        this.questionRun = run;
        this.banner.show(frame, { live: !replaying });
        break;
      case 'agent_request_input_timeout':
        run.questionTimedOut(frame);
        this.questionRun = null;
        this.banner.clear('No answer came in time — the agent is finishing without it.');
        break;
      case 'agent_duplicate_call': run.duplicateCall(frame); break;
      case 'agent_steps_granted': run.stepsGranted(frame); break;
      case 'agent_max_steps_reached': run.maxStepsReached(frame); break;
      case 'agent_stopped':
        run.stopped(frame);
        this.clearQuestion('Question withdrawn: the run was stopped.');
        this.approvals.clear();
        break;
      case 'agent_completion': run.completion(frame); break;
      case 'agent_error': run.agentError(frame); break;
      default:
        console.warn('loopwire: unknown agent update', frame.update_type);
    }
  }

  approvalRequested(run, frame) {
    run.approvalRequested(frame);
    const decided = this.transcript.approval(frame.tool_call_id);
    if (decided) run.approvalDecided(frame.tool_call_id, decided);
    else this.approvals.request(frame);
  }

  /** A later frame shows the pending question was answered. */
  questionSettled(run) {
    const questionId = this.banner.questionId;
    this.questionRun = null;
    if (questionId === null) return;
    run.questionAnswered(questionId, this.transcript.answer(questionId));
    this.banner.clear();
  }

  clearQuestion(message) {
    this.questionRun = null;
    this.banner.clear(message);
  }

  finishRun(run) {
    run.finish();
    this.clearQuestion('The run ended before the question was answered.');
    this.approvals.clear();
    if (this.active === run) this.active = null;
    this.stopRequested = false;
    this.dispatchEvent(new Event('run-finished'));
  }

  /** End the active run locally: the server will not tell us more about it. */
  abandonRun(why) {
    if (this.pending) {
      this.messages.markUnsent(this.pending.bubble, why);
      this.pending.view.discard();
      this.pending = null;
    }
    if (this.active) {
      this.active.notice('error', why);
      this.finishRun(this.active);
    }
    this.stopRequested = false;
  }

  globalError(frame) {
    if (this.pending && REFUSES_CHAT.has(frame.error_type)) {
      this.messages.markUnsent(this.pending.bubble, 'Not sent');
      this.pending.view.discard();
      this.dispatchEvent(new CustomEvent('chat-refused', { detail: { content: this.pending.content } }));
      this.pending = null;
    } else if (frame.error_type === 'no_active_run' && this.running) {
      this.abandonRun('The server has no active run for this message (it may have been lost in a disconnect).');
    } else if (frame.error_type === 'no_pending_input') {
      this.clearQuestion(null);
    } else if (frame.error_type === 'server_restarting') {
      // nothing is lost: the connection comes back and the run goes on
      this.messages.notice({ kind: 'info', title: 'Server restarting', text: 'The server is restarting: the page reconnects and carries on.' });
      return;
    }
    this.messages.errorNotice(frame);
  }

  // ---------------------------------------------------------------- user actions

  /** A run that used up its steps goes on: a follow-up "Continue" with `steps` more. */
  continueRun(steps) {
    return this.sendChat('Continue', { agent_mode: true, agent_max_steps: Math.min(steps, this.info.limits.max_steps_cap) });
  }

  /** Send a chat (`overrides`: fields of the frame instead of the settings'); true when it went out. */
  sendChat(content, overrides = {}) {
    const text = content.trim();
    if (!text || this.running || !this.connection.isOpen) return false;
    const frame = { ...this.settings.chatFrame(text, this.info), ...overrides };
    const size = new TextEncoder().encode(JSON.stringify(frame)).length;
    if (size > this.info.limits.max_message_bytes) {
      this.messages.notice({ kind: 'error', title: 'Message too long', text: `It is ${size} bytes; this server accepts at most ${this.info.limits.max_message_bytes}.` });
      return false;
    }
    if (!this.connection.send(frame)) return false;
    const mode = frame.agent_mode ? 'agent' : this.settings.modeFor(this.info);
    const bubble = this.messages.addUser(text, mode);
    const view = this.newRunView(mode);
    this.pending = { content: text, mode, bubble, view };
    this.banner.hideMessage();
    this.changed();
    return true;
  }

  stop() {
    if (!this.running || this.stopRequested) return;
    if (this.connection.send({ type: 'agent_control', action: 'stop' })) {
      this.stopRequested = true;
      (this.active ?? this.pending?.view)?.setPhase('Stopping…');
    } else {
      this.stopWanted = true;
    }
    this.changed();
  }

  /** Ask the same again: the message and mode of `view`'s run, in its place. */
  retry(view) {
    const said = view.runId ? this.transcript.message(view.runId) : null;
    if (!said) return false;
    const modes = {
      agent: { agent_mode: true },
      tools: { agent_mode: false },
      plain: { agent_mode: false, selected_tools: [] },
      retrieve: { agent_mode: false, selected_tools: [] },
    };
    return this.sendChat(said.content, { ...(modes[said.mode] ?? {}), replace_from: view.runId });
  }

  /** Send `text` instead of the message that started run `runId`: that run and
   * every later one are replaced (the server confirms with `runs_removed`). */
  editMessage(runId, text) {
    if (!runId || !this.runs.has(runId)) return false;
    return this.sendChat(text, { replace_from: runId });
  }

  /** The server removed these runs (an edit or a retry): so does the screen. */
  removeRuns(runIds) {
    for (const runId of runIds) {
      const view = this.runs.get(runId);
      if (!view) continue;
      view.userBubble?.remove();
      view.element.remove();
      this.runs.delete(runId);
      if (this.questionRun === view) this.clearQuestion(null);
    }
    this.messages.stick();
  }

  /** Let the step in progress finish, then end the run; true when it went out. */
  stopAfterStep() {
    if (!this.running || this.stopRequested) return false;
    return this.connection.send({ type: 'agent_control', action: 'stop_after_step' });
  }

  grant(steps) {
    this.connection.send({ type: 'agent_control', action: 'grant_steps', steps });
  }

  answer(content, questionId) {
    const sent = this.connection.send({ type: 'agent_user_input', content, question_id: questionId });
    if (!sent) return false;
    this.transcript.rememberAnswer(questionId, content);
    const run = this.questionRun;
    this.questionRun = null;
    run?.questionAnswered(questionId, content);
    run?.setPhase('Observing…');
    this.banner.clear();
    this.changed();
    return true;
  }

  decide(callId, approved, reason) {
    const frame = { type: 'tool_approval_response', tool_call_id: callId, approved };
    if (reason) frame.reason = reason;
    if (!this.connection.send(frame)) return false;
    const decision = { approved, reason };
    this.transcript.rememberApproval(callId, decision);
    this.active?.approvalDecided(callId, decision);
    this.active?.setPhase(approved ? 'Continuing…' : 'Rejected — continuing…');
    this.changed();
    return true;
  }

  newConversation() {
    this.openConversation(null);
  }

  /**
   * Show conversation `id` (null: a new one). What the user said in each of
   * its runs (`runs`: the conversations API's, each with `id`, `request` and
   * `mode`) is remembered first, then its frames are replayed from the start
   * and rebuild the screen as they built it live.
   */
  openConversation(id, runs = [], messages = []) {
    this.runs.clear();
    this.pending = null;
    this.active = null;
    this.stopRequested = false;
    this.stopWanted = false;
    this.messages.clear();
    this.clearQuestion(null);
    this.banner.hideMessage();
    this.approvals.clear();
    this.rememberRuns(id, runs, messages);
    this.connection.switchTo(id);
    this.changed();
  }

  /**
   * What the user said in each of `runs` of conversation `id`, kept for the
   * replay; with the conversation's `messages`, the runs the replay will not
   * cover (older than the frames the server keeps) are shown from them.
   */
  rememberRuns(id, runs, messages = []) {
    this.stored = { runs, messages };
    this.transcript.useSession(id);
    for (const run of runs) {
      if (!this.transcript.message(run.id)) {
        this.transcript.rememberMessage(run.id, { content: run.request, mode: run.mode ?? 'agent' });
      }
    }
  }
}

/**
 * The answer to each user message, in order: the last assistant message with
 * text before the next user message. `take(request)` hands out the next one
 * whose user message is `request`.
 */
function answersByRequest(messages) {
  const groups = [];
  for (const message of messages) {
    if (message.role === 'user') groups.push({ request: message.content ?? '', answer: null });
    else if (message.role === 'assistant' && message.content && !message.tool_calls?.length && groups.length) {
      groups[groups.length - 1].answer = message.content;
    }
  }
  let next = 0;
  return {
    take(request) {
      const found = groups.findIndex((group, index) => index >= next && group.request === request);
      if (found < 0) return null;
      next = found + 1;
      return groups[found].answer;
    },
  };
}
