// Applies server frames to the screen and turns user actions into client
// frames. Runs: a chat creates a pending RunView at once (immediate feedback);
// the first frame with a new run_id binds it. A replay (reload or reconnect)
// goes through exactly the same code, so the screen it rebuilds is the screen
// the live frames built.
//
// An answer or an approval is kept until the run's next frame shows what
// became of it. If the connection drops first — or the server says it
// reached an instance that no longer holds the conversation (`moved`) — it
// is sent again after the reconnect's replay, when the replay shows the run
// still waiting for it; the user is not asked again. After a reload the
// same holds for the decisions this tab remembers (`Transcript`).
import { CLIENT, ERROR, FRAME, UPDATE } from './protocol.js';
import { answerFields, answerText } from './render/answer_form.js';
import { OWN_CANCEL } from './render/pending.js';
import { RunView, phaseAfter } from './render/run.js';
import { runsOfImport } from './render/transfer.js';
import { RunState } from './state.js';

/** Frames after which a pending question can no longer be waiting. */
const KEEPS_QUESTION = new Set([UPDATE.AGENT_REQUEST_INPUT, UPDATE.AGENT_STEPS_GRANTED, UPDATE.AGENT_BUDGET_GRANTED, UPDATE.AGENT_REQUEST_INPUT_TIMEOUT, UPDATE.AGENT_STOPPED]);
/** Frames that may come while a decision waits (they say nothing of it). */
const GRANTS = new Set([UPDATE.AGENT_STEPS_GRANTED, UPDATE.AGENT_BUDGET_GRANTED]);
const REFUSES_CHAT = new Set([ERROR.BUSY, ERROR.INVALID_MESSAGE, ERROR.RATE_LIMITED, ERROR.UNAUTHORIZED, ERROR.INTERNAL_ERROR, ERROR.BUDGET_EXHAUSTED]);
/** Refusals of a decision that came too late (it had been taken, or the wait was over). */
const STALE_DECISION = new Set([ERROR.NO_PENDING_INPUT, ERROR.NO_PENDING_APPROVAL]);

export class Controller extends EventTarget {
  constructor({ connection, settings, transcript, messages, banner, approvals, held, info }) {
    super();
    this.held = held; // messages sent while a run works (render/pending.js)
    this.connection = connection;
    this.settings = settings;
    this.transcript = transcript;
    this.messages = messages;
    this.banner = banner;
    this.approvals = approvals;
    this.info = info;
    this.runs = new Map();
    this.state = new RunState();
  }

  get running() {
    return this.state.running;
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
    this.restartNotice?.remove(); // the server is back: nothing to say any more
    this.restartNotice = null;
    this.transcript.useSession(frame.session_id);
    this.state.awaitingReplay = true;
    if (!this.connection.replaying) this.afterReplay();
    this.changed();
  }

  onFrame({ frame, replaying }) {
    const resent = frame.run_id && this.state.resending > 0; // a switch sends a branch's frames again
    if (resent) this.state.resending -= 1;
    this.apply(frame, replaying || resent);
    if (this.state.awaitingReplay && !this.connection.replaying) this.afterReplay();
    else if (resent && this.state.resending === 0) this.refreshVersions();
    else if (frame.type === FRAME.RESPONSE_COMPLETE && !replaying && this.state.versionsStale) this.refreshVersions();
    this.changed();
  }

  /** A replay ended without its last seq (the conversation changed servers). */
  onReplayed() {
    if (this.state.awaitingReplay) this.afterReplay();
    this.changed();
  }

  onRefused({ frame }) {
    // a decision reached a server that let the conversation go: the socket
    // closes next, and the decision is sent again after the reconnect
    if (frame.error_type === ERROR.MOVED) return;
    this.messages.errorNotice(frame);
    this.changed();
  }

  /** The server does not know our session any more (it restarted). */
  sessionLost() {
    this.forgetDecisions();
    this.held.clear();
    if (this.runs.size === 0 && !this.state.pending) return;
    this.messages.notice({
      kind: 'warn',
      title: 'The server started a new conversation',
      text: 'It no longer knows the previous one (it probably restarted). What is on screen above is kept, but the model will not remember it.',
    });
    this.abandonRun('Lost when the server restarted');
  }

  afterReplay() {
    this.state.awaitingReplay = false;
    if (this.state.stored?.runs.length) this.refreshVersions(); // a stored conversation may fork
    this.resendDecisions();
    this.showEarlierRuns();
    if (this.banner.questionId) this.banner.input.focus();
    if (this.state.stopWanted && this.running) this.stop();
    this.state.stopWanted = false;
  }

  /**
   * Runs of the stored conversation that no replayed frame showed (their
   * frames are past the replay window): each as the user's message and the
   * answer the history keeps, above the replayed ones, said to be older.
   */
  showEarlierRuns() {
    const stored = this.state.stored;
    this.state.stored = null;
    if (!stored) return;
    const answers = answersByRequest(stored.messages);
    const earlier = [];
    for (const run of stored.runs.length ? stored.runs : runsOfImport(stored.messages)) {
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
      if (frame.type === FRAME.ERROR) this.globalError(frame, replaying);
      else if (frame.type === FRAME.SESSION_RESET) this.messages.notice({ kind: 'info', title: 'History cleared', text: 'The model starts afresh from here.' });
      else if (frame.type === FRAME.RUNS_REMOVED) this.removeRuns(frame.run_ids, replaying);
      else if (frame.type === FRAME.BRANCH_SWITCHED) this.branchSwitched(frame);
      else if (frame.type === FRAME.FILES_UPDATE) this.dispatchEvent(new CustomEvent('files', { detail: frame.files }));
      else if (frame.type === FRAME.PENDING_INPUT) this.pendingInput(frame);
      return;
    }
    this.noteEffects(frame);
    const run = this.runFor(frame.run_id);
    if (this.state.questionRun === run && !KEEPS_QUESTION.has(frame.update_type)) this.questionSettled(run);
    if (frame.type === FRAME.AGENT_UPDATE) this.agentUpdate(run, frame, replaying);
    else this.runFrame(run, frame);
    run.setPhase(phaseAfter(frame, run.agent));
  }

  runFor(runId) {
    let view = this.runs.get(runId);
    if (view) return view;
    if (this.state.pending) {
      view = this.state.pending.view;
      view.userBubble = this.state.pending.bubble;
      this.transcript.rememberMessage(runId, { content: this.state.pending.content, mode: this.state.pending.mode });
      this.state.pending = null;
      this.dispatchEvent(new Event('run-started'));
    } else {
      const said = this.transcript.message(runId) ?? this.held.unannounced();
      const bubble = said ? this.messages.addUser(said.content, said.mode) : null;
      view = this.newRunView(said?.mode ?? 'plain');
      view.userBubble = bubble;
    }
    view.bind(runId);
    if (view.userBubble) this.messages.bindUser(view.userBubble, runId);
    view.setCap(this.info.limits.max_steps_cap);
    this.runs.set(runId, view);
    this.state.active = view;
    return view;
  }

  newRunView(mode) {
    for (const earlier of this.runs.values()) earlier.retire();
    const view = new RunView({
      mode,
      onGrant: (steps) => this.grant(steps),
      onContinue: (steps) => this.continueRun(steps),
      onGrantBudget: (budget) => this.grantBudget(budget),
      onContinueBudget: (budget) => this.continueWithBudget(budget),
      budgetCap: () => this.info.limits.run_budget ?? null,
      onStopAfterStep: () => this.stopAfterStep(),
      onRetry: () => this.retry(view),
    });
    this.messages.add(view.element);
    return view;
  }

  runFrame(run, frame) {
    switch (frame.type) {
      case FRAME.TOOL_START:
        run.toolStart(frame);
        this.approvals.dismiss(frame.tool_call_id);
        break;
      case FRAME.TOOL_COMPLETE:
        run.toolComplete(frame);
        this.approvals.dismiss(frame.tool_call_id);
        break;
      case FRAME.TOOL_ERROR:
        run.toolError(frame);
        this.approvals.dismiss(frame.tool_call_id);
        break;
      case FRAME.TOOL_APPROVAL_REQUEST:
        this.approvalRequested(run, frame);
        break;
      case FRAME.TOOL_APPROVAL_DECIDED:
        run.approvalDecided(frame.tool_call_id, { approved: true, arguments: frame.arguments, remember: frame.remember, confirmed: true });
        this.approvals.dismiss(frame.tool_call_id);
        if (frame.remember) this.dispatchEvent(new Event('grants-changed'));
        break;
      case FRAME.TOKEN_STREAM:
        run.token(frame);
        break;
      case FRAME.THINKING:
        run.thinking(frame);
        break;
      case FRAME.CHAT_RESPONSE:
        run.response(frame);
        break;
      case FRAME.RESPONSE_COMPLETE:
        this.finishRun(run);
        break;
      case FRAME.ERROR:
        run.runError(frame);
        break;
      default:
        console.warn('loopwire: unknown frame type', frame.type);
    }
  }

  agentUpdate(run, frame, replaying) {
    run.becomeAgent();
    switch (frame.update_type) {
      case UPDATE.AGENT_START: run.start(frame); break;
      case UPDATE.AGENT_PLAN: run.plan(frame); break;
      case UPDATE.AGENT_TURN_START: run.turnStart(frame); break;
      case UPDATE.AGENT_REASON: run.reason(frame); break;
      case UPDATE.AGENT_OBSERVE: run.observe(frame); break;
      case UPDATE.AGENT_REQUEST_INPUT:
        this.questionAsked(run, frame, replaying);
        break;
      case UPDATE.AGENT_REQUEST_INPUT_TIMEOUT:
        run.questionTimedOut(frame);
        this.state.questionRun = null;
        this.banner.clear('No answer came in time — the agent is finishing without it.');
        break;
      case UPDATE.AGENT_INTERJECTION:
        run.interjection(frame);
        this.held.remove(frame.input_id);
        break;
      case UPDATE.AGENT_DUPLICATE_CALL: run.duplicateCall(frame); break;
      case UPDATE.AGENT_STEPS_GRANTED: run.stepsGranted(frame); break;
      case UPDATE.AGENT_MAX_STEPS_REACHED: run.maxStepsReached(frame); break;
      case UPDATE.AGENT_BUDGET_WARNING: run.budgetWarning(frame); break;
      case UPDATE.AGENT_BUDGET_GRANTED: run.budgetGranted(frame); break;
      case UPDATE.AGENT_BUDGET_REACHED: run.budgetReached(frame); break;
      case UPDATE.AGENT_STOPPED:
        run.stopped(frame);
        this.clearQuestion('Question withdrawn: the run was stopped.');
        this.approvals.clear();
        break;
      case UPDATE.AGENT_COMPLETION: run.completion(frame); break;
      case UPDATE.AGENT_ERROR: run.agentError(frame); break;
      default:
        console.warn('loopwire: unknown agent update', frame.update_type);
    }
  }

  /** A question; replayed after this tab answered it, the answer is shown (and kept, see above). */
  questionAsked(run, frame, replaying) {
    run.requestInput(frame);
    const said = this.transcript.answer(frame.run_id, frame.question_id);
    if (said === null) {
      this.state.questionRun = run;
      this.banner.show(frame, { live: !replaying });
      return;
    }
    run.questionAnswered(frame.question_id, answerText(said));
    this.awaitEffect(frame, answerFrame(frame, said));
  }

  approvalRequested(run, frame) {
    run.approvalRequested(frame);
    const decided = this.transcript.approval(frame);
    if (!decided) {
      this.approvals.request(frame);
      return;
    }
    run.approvalDecided(frame.tool_call_id, decided);
    this.awaitEffect(frame, approvalFrame(frame, decided));
    // edited arguments are checked by the server: it may still refuse them
    if (decided.approved && decided.arguments) this.approvals.resent(frame, decided);
  }

  /** A later frame shows the pending question was answered. */
  questionSettled(run) {
    const questionId = this.banner.questionId;
    this.state.questionRun = null;
    if (questionId === null) return;
    run.questionAnswered(questionId, answerText(this.transcript.answer(run.runId, questionId)));
    this.banner.clear();
  }

  // ---------------------------------------------------------------- decisions in flight

  /** `decision` (a client frame) answers `request`: keep it until the run moves on.
   * A call decided ahead (`ahead_of`) shares its request's seq: kept apart. */
  awaitEffect(request, decision) {
    const key = request.ahead_of ? `${request.run_id} ${request.seq} ${request.tool_call_id}` : `${request.run_id} ${request.seq}`;
    this.state.unacked.set(key, { frame: decision, runId: request.run_id, seq: request.seq });
  }

  /** The run's next frame after a request shows what became of the decision on
   * it (its tool's result, the question's follow-up, the call asked about again
   * in doubt, a timeout, a stop); only a step grant can come while it waits. */
  noteEffects(frame) {
    if (this.state.unacked.size === 0 || GRANTS.has(frame.update_type)) return;
    for (const [key, kept] of this.state.unacked) {
      if (kept.runId === frame.run_id && frame.seq > kept.seq) this.state.unacked.delete(key);
    }
  }

  /** After a replay: the decisions it does not show acted on, again. A copy
   * the server had taken after all is refused as stale, and that refusal is
   * not shown. */
  resendDecisions() {
    for (const kept of this.state.unacked.values()) {
      if (this.connection.send(kept.frame)) this.state.staleExpected += 1;
    }
  }

  forgetDecisions() {
    this.state.unacked.clear();
    this.state.staleExpected = 0;
  }

  clearQuestion(message) {
    this.state.questionRun = null;
    this.banner.clear(message);
  }

  finishRun(run) {
    run.finish();
    this.clearQuestion('The run ended before the question was answered.');
    this.approvals.clear();
    if (this.state.active === run) this.state.active = null;
    this.state.stopRequested = false;
    this.dispatchEvent(new Event('run-finished'));
  }

  /** End the active run locally: the server will not tell us more about it. */
  abandonRun(why) {
    if (this.state.pending) {
      this.messages.markUnsent(this.state.pending.bubble, why);
      this.state.pending.view.discard();
      this.state.pending = null;
    }
    if (this.state.active) {
      this.state.active.notice('error', why);
      this.finishRun(this.state.active);
    }
    this.state.stopRequested = false;
  }

  globalError(frame, replaying) {
    if (STALE_DECISION.has(frame.error_type) && (replaying || this.state.staleExpected > 0)) {
      // a decision sent again (or, replayed, one sent before) came too late:
      // the frames around it show what happened
      if (!replaying) this.state.staleExpected -= 1;
      return;
    }
    if (this.state.pending && REFUSES_CHAT.has(frame.error_type)) {
      this.messages.markUnsent(this.state.pending.bubble, 'Not sent');
      this.state.pending.view.discard();
      this.dispatchEvent(new CustomEvent('chat-refused', { detail: { content: this.state.pending.content } }));
      this.state.pending = null;
    } else if (REFUSES_CHAT.has(frame.error_type) && this.held.outbox.length) {
      this.dispatchEvent(new CustomEvent('chat-refused', { detail: { content: this.held.refused() } }));
    } else if (frame.error_type === ERROR.NO_PENDING_INPUT && this.held.cancelRefused()) {
      this.messages.notice({ kind: 'info', title: 'Too late to cancel', text: 'That message was already used.' });
      return;
    } else if (frame.error_type === ERROR.NO_ACTIVE_RUN && this.running) {
      this.abandonRun('The server has no active run for this message (it may have been lost in a disconnect).');
    } else if (frame.error_type === ERROR.NO_PENDING_INPUT) {
      this.clearQuestion(null);
    } else if (frame.error_type === ERROR.INVALID_ANSWER && this.approvals.awaiting) {
      this.approvalRefused(frame.message);
      return; // shown in the dialog, next to the arguments
    } else if (frame.error_type === ERROR.INVALID_ANSWER) {
      this.answerRefused();
    } else if (frame.error_type === ERROR.SERVER_RESTARTING) {
      // nothing is lost: the connection comes back and the run goes on
      this.restartNotice?.remove();
      this.restartNotice = this.messages.notice({ kind: 'info', title: 'Server restarting', text: 'The server is restarting: the page reconnects and carries on.' });
      return;
    }
    this.messages.errorNotice(frame);
  }

  // ---------------------------------------------------------------- user actions

  /** A run that used up its steps goes on: a follow-up "Continue" with `steps` more. */
  continueRun(steps) {
    return this.sendChat('Continue', { agent_mode: true, agent_max_steps: Math.min(steps, this.info.limits.max_steps_cap) });
  }

  /** A run that used up its own budget goes on: a follow-up "Continue" asking for `budget`. */
  continueWithBudget(budget) {
    return this.sendChat('Continue', { agent_mode: true, agent_budget: budget });
  }

  /** Send a chat (`overrides`: fields of the frame instead of the settings'); true when it went out. */
  sendChat(content, overrides = {}) {
    const text = content.trim();
    if (!text || this.running || !this.connection.isOpen) return false;
    const frame = { ...this.settings.chatFrame(text, this.info), ...overrides };
    if (this.budgetRefuses(frame, overrides)) return false;
    const size = new TextEncoder().encode(JSON.stringify(frame)).length;
    if (size > this.info.limits.max_message_bytes) {
      this.messages.notice({ kind: 'error', title: 'Message too long', text: `It is ${size} bytes; this server accepts at most ${this.info.limits.max_message_bytes}.` });
      return false;
    }
    if (!this.connection.send(frame)) return false;
    const mode = frame.agent_mode ? 'agent' : this.settings.modeFor(this.info);
    const bubble = this.messages.addUser(text, mode);
    const view = this.newRunView(mode);
    this.state.pending = { content: text, mode, bubble, view };
    this.banner.hideMessage();
    this.changed();
    return true;
  }

  /** An agent chat is not sent while the toolbar's token budget is not valid
   * (unless the chat names its own budget, as Continue does): said, true. */
  budgetRefuses(frame, overrides) {
    const problem = this.settings.budgetProblem;
    if (!problem || !frame.agent_mode || 'agent_budget' in overrides) return false;
    this.messages.notice({ kind: 'error', title: 'Not sent: the token budget is not valid', text: problem });
    return true;
  }

  /** Send a chat while a run works: held by the server as `whenBusy` says
   * (`steer`, `queue`, `interrupt`); true when it went out. */
  sendHeld(content, whenBusy) {
    const text = content.trim();
    if (!text || !this.connection.isOpen) return false;
    const frame = { ...this.settings.chatFrame(text, this.info), when_busy: whenBusy };
    if (this.budgetRefuses(frame, {})) return false;
    if (!this.connection.send(frame)) return false;
    this.held.sent(text, frame.agent_mode ? 'agent' : this.settings.modeFor(this.info));
    this.changed();
    return true;
  }

  /** A held message changed: shown while queued; a run of its own once started. */
  pendingInput(frame) {
    if (frame.state === 'queued') {
      this.held.queued(frame);
      return;
    }
    const mode = this.held.modeOf(frame.input_id);
    this.held.remove(frame.input_id);
    if (frame.state === 'started') {
      this.transcript.rememberMessage(frame.started_run_id, { content: frame.content, mode: mode ?? this.transcript.message(frame.started_run_id)?.mode ?? 'plain' });
      this.dispatchEvent(new Event('run-started'));
    } else if (frame.reason !== OWN_CANCEL) {
      this.messages.notice({ kind: 'info', title: `Not sent: “${frame.content}”`, text: frame.reason });
    }
  }

  /** Drop a held message unused; true when the request went out. */
  cancelHeld(inputId) {
    return this.connection.send({ type: CLIENT.CANCEL_INPUT, input_id: inputId });
  }

  stop() {
    if (!this.running || this.state.stopRequested) return;
    if (this.connection.send({ type: CLIENT.AGENT_CONTROL, action: 'stop' })) {
      this.state.stopRequested = true;
      (this.state.active ?? this.state.pending?.view)?.setPhase('Stopping…');
    } else {
      this.state.stopWanted = true;
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

  /** Where the conversation forks, shown on the bubbles (`render/versions.js`). */
  refreshVersions() {
    this.state.versionsStale = false;
    this.versions?.refresh(this.runs);
  }

  /** A switch of versions: the runs set aside go; the restored runs' frames follow. */
  branchSwitched(frame) {
    this.removeRuns(frame.removed, true);
    for (const restored of frame.restored) {
      this.transcript.rememberMessage(restored.run_id, { content: restored.request, mode: restored.mode ?? 'plain' });
    }
    this.state.resending = frame.resent;
    if (frame.resent === 0) this.refreshVersions();
  }

  /** Send a switch to version `branchId` (true when it went out). */
  switchVersion(branchId) {
    if (this.running) return false;
    return this.connection.send({ type: CLIENT.SWITCH_BRANCH, branch_id: branchId });
  }

  /** The server set these runs aside (an edit or a retry): so does the screen.
   * Live, the versions shown are asked again once the new run has ended. */
  removeRuns(runIds, replaying = false) {
    if (!replaying) this.state.versionsStale = true;
    for (const runId of runIds) {
      const view = this.runs.get(runId);
      if (!view) continue;
      view.userBubble?.remove();
      view.element.remove();
      this.runs.delete(runId);
      if (this.state.questionRun === view) this.clearQuestion(null);
    }
    this.messages.stick();
  }

  /** Let the step in progress finish, then end the run; true when it went out. */
  stopAfterStep() {
    if (!this.running || this.state.stopRequested) return false;
    return this.connection.send({ type: CLIENT.AGENT_CONTROL, action: 'stop_after_step' });
  }

  grant(steps) {
    this.connection.send({ type: CLIENT.AGENT_CONTROL, action: 'grant_steps', steps });
  }

  /** Add `budget` (`BudgetLimits` amounts) to the running run's; true when it went out. */
  grantBudget(budget) {
    if (!this.running) return false;
    return this.connection.send({ type: CLIENT.AGENT_CONTROL, action: 'grant_budget', budget });
  }

  /** Answer the pending question; `action` 'decline' / 'cancel' (no
   * `content`) says no to it or dismisses it. True when it went out. */
  answer(content, questionId, action = null) {
    const question = this.banner.pending;
    const said = action ? { action } : content; // as the transcript keeps it
    const frame = answerFrame({ question_id: questionId }, said);
    if (!this.connection.send(frame)) return false;
    if (question?.question_id === questionId) {
      this.transcript.rememberAnswer(question.run_id, questionId, said);
      this.awaitEffect(question, frame);
    }
    const run = this.state.questionRun;
    this.refusable = question ? { question, run } : null;
    this.state.questionRun = null;
    run?.questionAnswered(questionId, answerText(said));
    run?.setPhase('Observing…');
    this.banner.clear();
    this.changed();
    return true;
  }

  /** The answer just sent did not fit its question's form (`invalid_answer`):
   * the question still waits, so it is asked again. */
  answerRefused() {
    const { question, run } = this.refusable ?? {};
    this.refusable = null;
    const key = question && `${question.run_id} ${question.seq}`;
    if (!question || !this.state.unacked.delete(key) || this.banner.answering) return;
    this.transcript.rememberAnswer(question.run_id, question.question_id, null);
    run?.questions.get(question.question_id)?.setState('waiting');
    run?.setPhase(phaseAfter(question, true));
    this.state.questionRun = run ?? null;
    this.banner.show(question, { live: true });
    this.changed();
  }

  /** The user's decision on `request`; sent now, or (offline) after the reconnect's replay.
   * A call decided ahead of its turn (`request.ahead_of`, render/approval.js) is
   * not remembered as answered: should it be asked after all (the server
   * refused the decision), it is asked as usual. */
  decide(request, decision) {
    const { approved } = decision;
    const frame = approvalFrame(request, decision);
    const sent = this.connection.send(frame);
    if (!request.ahead_of) this.transcript.rememberApproval(request, decision);
    this.awaitEffect(request, frame);
    const run = this.runs.get(request.run_id) ?? this.state.active;
    run?.approvalDecided(request.tool_call_id, decision);
    run?.setPhase(approved ? 'Continuing…' : 'Rejected — continuing…');
    this.changed();
    return sent;
  }

  /** The edited arguments just approved did not fit the tool (`invalid_answer`):
   * the request still waits, and the dialog shows why next to them. */
  approvalRefused(message) {
    const request = this.approvals.refused(message);
    this.state.unacked.delete(`${request.run_id} ${request.seq}`);
    this.transcript.rememberApproval(request, null);
    const run = this.runs.get(request.run_id) ?? this.state.active;
    run?.approvalRequested(request);
    run?.setPhase(phaseAfter(request, true));
    this.changed();
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
    this.state.pending = null;
    this.state.active = null;
    this.state.stopRequested = false;
    this.state.stopWanted = false;
    this.forgetDecisions();
    this.messages.clear();
    this.clearQuestion(null);
    this.banner.hideMessage();
    this.approvals.clear();
    this.held.clear();
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
    this.state.stored = { runs, messages };
    this.transcript.useSession(id);
    for (const run of runs) {
      if (!this.transcript.message(run.id)) {
        this.transcript.rememberMessage(run.id, { content: run.request, mode: run.mode ?? 'agent' });
      }
    }
  }
}

function answerFrame(question, said) {
  return { type: CLIENT.AGENT_USER_INPUT, ...answerFields(said), question_id: question.question_id };
}

function approvalFrame(request, { approved, reason, arguments: args, remember }) {
  const frame = { type: CLIENT.TOOL_APPROVAL_RESPONSE, tool_call_id: request.tool_call_id, approved };
  if (reason) frame.reason = reason;
  if (approved && args) frame.arguments = args;
  if (approved && remember) frame.remember = remember;
  if (approved && request.in_doubt) frame.in_doubt = true; // "run it again" says so
  return frame;
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
