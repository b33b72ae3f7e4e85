"""The figures each measurement returns (what the report and the plot show)."""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.machine import Machine
from benchmarks.stats import Summary


@dataclass(frozen=True)
class Others:
    """CPU the other processes spent per unit of work (context, not targets):
    the fake LLM, and the bench's own client process; in the unit of the
    figure they accompany (ms per turn or per call, µs per frame)."""

    fake_cpu: Summary
    client_cpu: Summary


@dataclass(frozen=True)
class TurnCost:
    """CPU per act-shaped turn (tool mode: calculator, then a streamed answer)."""

    sessions: int
    turns_per_session: int
    tokens: int
    cpu_ms: Summary
    """Server CPU per turn, one sample per round."""
    turns_per_s: Summary
    others: Others


@dataclass(frozen=True)
class TracingCost:
    """The act-shaped turns on two servers, traces off and on (exported by
    OTLP to a collector that is down), rounds in turn."""

    off_ms: Summary
    on_ms: Summary
    ratio: Summary
    """Server CPU per turn, on / off, one sample per pair of rounds."""


@dataclass(frozen=True)
class RunScale:
    """Strict agent runs (react) at one concurrency, and the echo doing the same
    number of delayed round trips."""

    sessions: int
    steps: int
    latency_ms: float
    wall_ratio: Summary
    """A round's wall time (all runs) / the ideal, one sample per round."""
    run_ratio: Summary
    """Each run's own time / the ideal, over every run of every round."""
    cpu_ms_per_call: Summary
    """Server CPU per LLM call, one sample per round."""
    echo_wall_ratio: Summary
    echo_cpu_ms_per_trip: Summary
    others: Others

    @property
    def calls(self) -> int:
        return 3 * self.steps

    @property
    def ideal_s(self) -> float:
        return self.calls * self.latency_ms / 1000


@dataclass(frozen=True)
class FrameRate:
    """Streamed tokens to many clients, and the echo sending as many frames."""

    sessions: int
    tokens: int
    frame_bytes: int
    fps: Summary
    cpu_us: Summary
    echo_fps: Summary
    echo_cpu_us: Summary
    echo_client_us: Summary
    """The bench client's CPU per echo frame (it shares the cores)."""
    others: Others


@dataclass(frozen=True)
class PacedStream:
    """One loopwire streaming answers at a model's pace (`token_pace`)."""

    batch_ms: float
    """Its `LOOPWIRE_TOKEN_BATCH_MS` (0: a frame per token)."""
    frames_per_answer: Summary
    """`token_stream` frames per answer (the closing one included): each
    round's median over its answers, one sample per round."""
    cpu_us_per_token: Summary
    """Server CPU over a round / the tokens streamed in it."""
    wall_s: Summary
    """A round's wall time."""


@dataclass(frozen=True)
class TokenPace:
    """Answers streamed at a model's pace, token batching on and off."""

    sessions: int
    tokens: int
    token_delay_ms: float
    batched: PacedStream
    """The default batching."""
    unbatched: PacedStream


@dataclass(frozen=True)
class SessionMemory:
    """RSS per session paused on a question, and per bare echo socket."""

    sessions_per_batch: int
    batches: int
    kib_per_session: Summary
    echo_kib_per_socket: Summary


@dataclass(frozen=True)
class IdleMemory:
    """VmRSS of a fresh loopwire that has done nothing yet (`idle_memory`)."""

    starts: int
    """Pairs of starts: one sample each of the two figures."""
    fresh_mb: Summary
    """The first start, on a new SQLite file (the migrations ran)."""
    migrated_mb: Summary
    """The second start on the same file (migrated already): what an
    operator's restart gives; the target is judged on it."""


@dataclass(frozen=True)
class StopLatency:
    """Stop → `response_complete`, in ms, by the phase the run was in."""

    samples: int
    phases: dict[str, Summary]


@dataclass(frozen=True)
class AgentLoop:
    """The react loop in-process (no server, no socket, no store)."""

    runs: int
    steps: int
    ms_per_step: Summary


@dataclass(frozen=True)
class SourcesIndexing:
    """A data source of small documents indexed, then searched (in-process)."""

    documents: int
    megabytes: float
    """Of Markdown text, all documents told."""
    passages: int
    index_s: float
    """One refresh that indexes every document."""
    unchanged_refresh_s: float
    """A second refresh, nothing changed (nothing read)."""
    queries: int
    query_ms: Summary
    """`search` (BM25, 5 passages), one sample per query."""


@dataclass(frozen=True)
class Profile:
    """Where the server's CPU went over one measured round (`profile`)."""

    what: str
    """The round sampled: `act-shaped turns, 100 sessions`."""
    rate: int
    """Samples per second."""
    samples: int
    """Samples of threads on the CPU (idle ones are left out)."""
    errors: int
    """Samples py-spy could not take."""
    buckets: tuple[tuple[str, float], ...]
    """Each bucket and its share of the samples, the largest first."""
    own_top: tuple[tuple[str, float], ...]
    """loopwire's own functions with the most samples, and their shares."""
    main_thread: float
    """The event loop's thread's share of the samples."""


@dataclass
class Results:
    machine: Machine
    command: str
    date: str
    tiny: bool
    rounds: int
    revision: str = "unknown"
    other_load: tuple[float, ...] = ()
    """Per measured round, the share of the machine's CPU other processes took."""
    duration_s: float = 0.0
    turn_cost: TurnCost | None = None
    tracing: TracingCost | None = None
    runs: list[RunScale] = field(default_factory=list)
    frames: FrameRate | None = None
    token_pace: TokenPace | None = None
    memory: SessionMemory | None = None
    idle: IdleMemory | None = None
    stop: StopLatency | None = None
    loop: AgentLoop | None = None
    sources: SourcesIndexing | None = None
    target_sessions: tuple[int, int] = (100, 1000)
    profiles: dict[str, Profile] = field(default_factory=dict)
    """By the measurement sampled: `turns`, `runs`."""
    profile_note: str = ""
    """Why a profile is missing, if one is."""

    def run_at(self, sessions: int) -> RunScale | None:
        return next((r for r in self.runs if r.sessions == sessions), None)
