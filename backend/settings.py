"""Frozen settings from `LOOPWIRE_*` environment variables or `.env`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import SettingsConfigDict

from backend.agent.config import LoopConfig, OnReject
from backend.errors import ConfigError
from backend.llm.openai_compat.profiles import ProfileName
from backend.setting_values import (
    check_networks,
    check_origins,
    comma_list,
    parse_data_sources,
)
from backend.settings_budget import BudgetSettings
from backend.settings_identity import IdentitySettings
from backend.settings_observability import ObservabilitySettings
from backend.tools.config import ExecutorConfig

ProviderName = Literal["offline", "openai"]
_LOOP = LoopConfig()
_EXECUTOR = ExecutorConfig()
"""Where the defaults of the loop's and the executor's settings live."""


class Settings(IdentitySettings, ObservabilitySettings, BudgetSettings):
    model_config = SettingsConfigDict(
        env_prefix="LOOPWIRE_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        frozen=True,
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)

    llm_provider: ProviderName | None = Field(
        default=None,
        description="offline | openai; default openai when a base URL or key is set",
    )
    llm_base_url: str | None = None
    llm_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("LOOPWIRE_LLM_API_KEY", "OPENAI_API_KEY"),
    )
    llm_model: str = "gpt-4o-mini"
    llm_models: str = ""
    """Models (comma-separated) a client may name; default: `llm_model` only."""
    llm_timeout_s: float = Field(default=60.0, gt=0)
    llm_max_retries: int = Field(default=2, ge=0, le=10)
    llm_retry_backoff_s: float = Field(default=0.5, ge=0)
    """The wait before the first retry of an LLM request (it doubles)."""
    llm_retry_max_wait_s: float = Field(default=30.0, ge=0)
    """No wait between LLM attempts is longer, the server's Retry-After included."""
    llm_temperature: float | None = Field(default=None, ge=0, le=2)
    llm_max_connections: int = Field(default=1000, ge=1, le=100_000)
    """Connections to the LLM server at once (kept for reuse); requests past
    this many wait for one to come free."""
    llm_profile: ProfileName = "auto"
    """What the LLM server is sent: openai, ollama, vllm, lmstudio, llamacpp,
    deepseek, or auto (the common shape, less what the server refuses)."""
    llm_context_tokens: int | None = Field(default=None, ge=256)
    """The model's context window in tokens; unset: asked of its server at
    start-up (vLLM, llama.cpp, LM Studio, Ollama), else unknown."""
    llm_reply_tokens: int = Field(default=_LOOP.reply_tokens, ge=0)
    """Of a known context window, the tokens kept for the model's reply."""
    client_system_prompts: bool = True
    """Whether a client may add its own instructions (`system_prompt`) to a
    run; false refuses such a request with an error naming this setting."""
    instructions_max_chars: int = Field(default=4000, ge=1, le=100_000)
    """The longest custom instructions, a user's or a conversation's."""

    database_url: str = "sqlite:///data/loopwire.db"
    """SQLite by default (a file under ./data/); postgresql://… for PostgreSQL."""
    redis_url: str | None = None
    """redis://host:port/db: run as one of several instances, coordinated
    through this Redis (leases, control messages, frames); they share the
    PostgreSQL database `LOOPWIRE_DATABASE_URL` names. Unset: one process."""
    lease_ttl_s: float = Field(default=10.0, ge=0.5, le=600)
    """How long an instance's hold on a conversation lasts unless renewed
    (every third of it): when an instance dies, another takes its paused
    runs over within about this long."""
    bus_timeout_s: float = Field(default=5.0, gt=0, le=120)
    """How long an instance waits for another to answer a forwarded message."""
    redis_timeout_s: float = Field(default=2.0, gt=0, le=60)
    """How long connecting to Redis, or one command, may take before the
    connection is dropped (a half-open one would hang); a lease renewal is
    then tried again on a new connection while the leases last, so keep it
    well below `lease_ttl_s`."""
    files_dir: Path = Path("data/files")
    """Where the conversations' files are kept, by the SHA-256 of their content."""
    max_file_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    """The largest file a conversation takes (an upload or a tool's artifact)."""
    max_files_per_conversation: int = Field(default=100, ge=1)
    upload_timeout_s: float = Field(default=120.0, gt=0)
    """An upload's body must have arrived within this many seconds."""
    max_file_bytes_per_user: int = Field(default=1024**3, ge=1024)
    """The bytes of files one user may hold: the sizes of the files in all
    their conversations, added up (a file held twice counts twice). An
    upload or an artifact that would take them past it is refused."""
    blob_gc_s: float = Field(default=3600.0, ge=0)
    """How often file contents no file refers to any more (their
    conversations were deleted) are removed from `files_dir`, besides a
    pass soon after each deletion; 0 turns the collector off."""
    blob_gc_grace_s: float = Field(default=600.0, ge=60)
    """A file in `files_dir` younger than this (by its modification time)
    is never removed: an upload writes its content before its record."""
    max_connections_per_user: int = Field(default=32, ge=1)
    """WebSockets and event streams one client has open at once. A client
    is a user when authentication is on, else a client address (loopback
    ones are not limited: a server without sign-in is one person's)."""
    max_connections: int = Field(default=5000, ge=1)
    """WebSockets and event streams open at once on this server, everyone's."""
    connects_per_s: float = Field(default=5.0, gt=0)
    connect_burst: int = Field(default=60, ge=1)
    """New connections per second of one client, and the burst: one that
    reconnects in a loop gets HTTP 429 at the handshake."""
    user_messages_per_s: float = Field(default=50.0, gt=0)
    user_message_burst: int = Field(default=150, ge=1)
    """A client's frames per second over all their sockets, and the burst."""
    runs_per_minute: float = Field(default=60.0, gt=0)
    run_burst: int = Field(default=20, ge=1)
    """Runs one client may start per minute, and the burst: a `chat` frame
    and `POST /api/agent` alike."""
    allowed_origins: str = ""
    """Browser origins (comma-separated) besides loopback ones and the public URL's."""
    cors_origins: str = ""
    """Origins (comma-separated, `*` = any) whose pages may call the HTTP API
    (`/api/`, `/v1/`) across origins: answered with CORS headers, and let
    through the `Guard` there (only there: not the WebSocket, not the UI;
    from `*`, only without a cookie). Empty: no CORS headers at all."""
    allowed_hosts: str = ""
    """Host names (comma-separated) besides loopback ones and the public URL's."""
    public_url: str | None = None
    """Where people reach the server (e.g. https://chat.example.com), when
    that is not a loopback address: its host and origin are allowed."""
    trusted_proxies: str = ""
    """Addresses or networks (comma-separated, e.g. `127.0.0.1,10.0.0.0/8`) of
    the reverse proxies in front of the server: only a request from one of
    them has its `X-Forwarded-For` and `X-Forwarded-Proto` believed. Empty:
    no one's are, and the client address is the connection's own (it is
    what the per-address limits count by)."""

    agent_max_steps: int = Field(default=10, ge=1)
    agent_max_steps_cap: int = Field(default=50, ge=1)
    agent_loop_strategy: str = "react"
    agent_max_parse_failures: int = Field(default=_LOOP.max_parse_failures, ge=1)
    run_timeout_s: float = Field(default=300.0, gt=0)
    """Seconds of work a run may do (waits for the user do not count)."""
    run_final_answer_timeout_s: float = Field(default=30.0, gt=0)
    """The least time a run's final answer gets once its time is up."""
    request_input_timeout_s: float = Field(default=_LOOP.request_input_timeout_s, gt=0)
    approval_timeout_s: float = Field(default=_LOOP.approval_timeout_s, gt=0)
    approval_on_reject: OnReject = _LOOP.on_reject
    tool_timeout_s: float = Field(default=_EXECUTOR.default_timeout_s, gt=0)
    tool_max_attempts: int = Field(default=_EXECUTOR.max_attempts, ge=1, le=10)
    tool_retry_backoff_s: float = Field(default=_EXECUTOR.retry_backoff_s, ge=0)
    tool_rate_limit_calls: int = Field(default=_EXECUTOR.rate_limit_calls, ge=1)
    tool_rate_limit_window_s: float = Field(default=_EXECUTOR.rate_limit_window_s, gt=0)
    tool_max_consecutive_failures: int = Field(
        default=_LOOP.max_consecutive_failures, ge=1
    )
    tool_threads: int = Field(default=_EXECUTOR.threads, ge=1, le=256)
    """Plain (synchronous) tool functions running at once, each in a thread."""
    tool_processes: int = Field(default=_EXECUTOR.processes, ge=1, le=64)
    """`cpu_bound` tool calls running at once, each in a worker process."""
    agent_max_duplicate_calls: int = Field(default=_LOOP.max_duplicate_calls, ge=1)
    agent_max_replans: int = Field(default=_LOOP.max_replans, ge=0)
    agent_max_tool_calls_per_step: int = Field(
        default=_LOOP.max_tool_calls_per_step, ge=1, le=100
    )
    agent_parallel_tool_calls: int = Field(
        default=_LOOP.parallel_tool_calls, ge=1, le=100
    )
    """Read-only tool calls of one reply that run at once (1: one at a time)."""
    tool_mode_max_rounds: int = Field(default=4, ge=1)
    tool_result_max_chars: int = Field(default=_LOOP.tool_result_max_chars, ge=200)
    history_window_tokens: int = Field(default=_LOOP.history_window_tokens, ge=256)
    """Estimated tokens of history sent per LLM call (`History.window`)."""
    history_tool_output_chars: int = Field(
        default=_LOOP.history_tool_output_chars, ge=100
    )
    """Characters of each older tool result kept in the window."""

    max_message_bytes: int = Field(default=65536, ge=256)
    ws_messages_per_s: float = Field(default=20.0, gt=0)
    ws_message_burst: int = Field(default=60, ge=1)
    frame_log_bytes: int = Field(default=2 * 1024 * 1024, ge=4096)
    """Frames each session holds for replay (newest first), in bytes."""
    max_sessions: int = Field(default=10_000, ge=1)
    """Sessions held in memory at once (idle ones are evicted to make room,
    then runs waiting unwatched for their user are parked in the store)."""
    max_sessions_per_user: int = Field(default=1000, ge=1)
    """Sessions of one user held in memory at once, made room for the same
    way; past it that user (not the others) is refused until one frees.
    Without sign-in everyone is the user `local`."""
    park_waiting_after_s: float = Field(default=120.0, gt=0)
    """A run waiting for its user's answer or approval with no socket or
    stream on its conversation for this long is parked in the store and
    leaves memory; it goes on when the conversation is next opened (its
    deadline still counts)."""
    session_grace_s: float = Field(default=300.0, gt=0)
    """A session with no socket and no run leaves memory after this long."""
    shutdown_grace_s: float = Field(default=3.0, ge=0)
    """On SIGTERM, how long runs get to reach a phase boundary."""
    store_retry_s: float = Field(default=10.0, ge=0, le=600)
    """How long a run whose checkpoint cannot be written (the database
    restarting, a connection cut) tries again before it ends `store_error`."""
    store_max_failures: int = Field(default=5, ge=1, le=1000)
    """Flushes of one conversation that may fail in a row before it is let
    go (its clients closed, told why) instead of being tried forever."""
    ws_compression: bool = False
    """permessage-deflate on WebSockets: less traffic for slow links, more
    CPU per frame (off: frames are small and mostly unique)."""
    token_batch_ms: float = Field(default=20.0, ge=0, le=1000)
    """Streamed text goes out as at most one `token_stream` frame per this
    many milliseconds (pieces the model sends faster are joined; none waits
    longer); 0 sends a frame per piece."""
    mcp_config: Path | None = None
    log_level: str = "info"
    access_log: bool = False
    """A log line per HTTP request and WebSocket connection (uvicorn's)."""
    sharing: bool = True
    """Read-only share links (`transport/shares.py`); off: none made or shown."""

    # --- data sources: document folders for `search_documents` (backend/sources/)
    data_sources: str = ""
    """Named folders of documents, comma-separated `name=path` entries
    (`handbook=/srv/docs/handbook,notes=./notes`); names are
    `[a-z0-9_-]{1,40}`. Empty: no data sources, no `search_documents` tool."""
    sources_index: str = "data/sources.db"
    """The SQLite (FTS5) file that indexes the data sources, whatever the main
    database is; `:memory:` keeps it in memory (tests)."""
    sources_max_file_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    """A larger document is refused (and reported), not indexed."""
    sources_max_files: int = Field(default=10_000, ge=1)
    """Documents indexed per source; those past it are reported, not indexed."""
    embeddings_model: str = ""
    """An embeddings model of the OpenAI-compatible server at
    `LOOPWIRE_LLM_BASE_URL` (`/v1/embeddings`, with `LOOPWIRE_LLM_API_KEY`):
    passages and queries are embedded and ranked by BM25 and cosine
    together. Empty: BM25 alone, nothing is sent anywhere."""
    search_finalize: bool = False
    """`search_documents` is a `finalize` tool: its summary ends the run."""
    sources_refresh_s: float = Field(default=60.0, gt=0)
    """How often the data sources are brought in step with their folders
    (only files whose size or time changed are read again)."""

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        too_many = self.agent_max_steps > self.agent_max_steps_cap
        if too_many and "agent_max_steps" not in self.model_fields_set:
            object.__setattr__(self, "agent_max_steps", self.agent_max_steps_cap)
        elif too_many:
            raise ValueError(
                f"LOOPWIRE_AGENT_MAX_STEPS ({self.agent_max_steps}) exceeds "
                f"LOOPWIRE_AGENT_MAX_STEPS_CAP ({self.agent_max_steps_cap})"
            )
        return self

    @model_validator(mode="after")
    def _shared_database(self) -> Settings:
        if self.redis_url is not None and not self.redis_url.strip():
            raise ValueError(
                "LOOPWIRE_REDIS_URL is set but empty; give a redis:// URL or unset it"
            )
        if self.redis_url and not self.database_url.startswith("postgresql"):
            raise ValueError(
                "LOOPWIRE_REDIS_URL runs several instances on one database: set "
                "LOOPWIRE_DATABASE_URL to a PostgreSQL URL (postgresql://…), "
                "not SQLite"
            )
        return self

    @model_validator(mode="after")
    def _proxies(self) -> Settings:
        check_networks("LOOPWIRE_TRUSTED_PROXIES", self.proxies)
        check_origins("LOOPWIRE_CORS_ORIGINS", self.cors)
        return self

    @model_validator(mode="after")
    def _data_sources(self) -> Settings:
        try:
            parse_data_sources(self.data_sources)
        except ConfigError as exc:  # a validation error, as every bad setting is
            raise ValueError(str(exc)) from None
        return self

    @property
    def data_source_folders(self) -> dict[str, Path]:
        """`LOOPWIRE_DATA_SOURCES` as name → folder (not checked on disk here)."""
        return parse_data_sources(self.data_sources)

    @property
    def provider(self) -> ProviderName:
        """The provider in force: explicit, else openai when configured."""
        if self.llm_provider is not None:
            return self.llm_provider
        return "openai" if (self.llm_base_url or self.llm_api_key) else "offline"

    @property
    def origins(self) -> tuple[str, ...]:
        return comma_list(self.allowed_origins)

    @property
    def cors(self) -> tuple[str, ...]:
        """`LOOPWIRE_CORS_ORIGINS`, as browsers send an origin (lowercase)."""
        return tuple(o.lower() for o in comma_list(self.cors_origins))

    @property
    def models(self) -> tuple[str, ...]:
        """The models a client may ask for, the configured one first."""
        return tuple(dict.fromkeys([self.llm_model, *self.listed_models]))

    @property
    def listed_models(self) -> tuple[str, ...]:
        """`LOOPWIRE_LLM_MODELS` as given (without the default `llm_model`)."""
        return comma_list(self.llm_models)

    @property
    def proxies(self) -> tuple[str, ...]:
        """`LOOPWIRE_TRUSTED_PROXIES` as a tuple (each checked at start-up)."""
        return comma_list(self.trusted_proxies)

    @property
    def hosts(self) -> tuple[str, ...]:
        return comma_list(self.allowed_hosts)

    def loop_config(self) -> LoopConfig:
        """What every strategy shares, from these settings."""
        return LoopConfig(
            tool_result_max_chars=self.tool_result_max_chars,
            history_window_tokens=self.history_window_tokens,
            history_tool_output_chars=self.history_tool_output_chars,
            max_parse_failures=self.agent_max_parse_failures,
            request_input_timeout_s=self.request_input_timeout_s,
            approval_timeout_s=self.approval_timeout_s,
            max_consecutive_failures=self.tool_max_consecutive_failures,
            max_duplicate_calls=self.agent_max_duplicate_calls,
            on_reject=self.approval_on_reject,
            max_replans=self.agent_max_replans,
            max_tool_calls_per_step=self.agent_max_tool_calls_per_step,
            parallel_tool_calls=self.agent_parallel_tool_calls,
            token_batch_s=self.token_batch_ms / 1000,
            context_tokens=self.llm_context_tokens,
            reply_tokens=self.llm_reply_tokens,
        )

    def executor_config(self) -> ExecutorConfig:
        """How tools are run, from these settings."""
        return ExecutorConfig(
            default_timeout_s=self.tool_timeout_s,
            max_attempts=self.tool_max_attempts,
            retry_backoff_s=self.tool_retry_backoff_s,
            rate_limit_calls=self.tool_rate_limit_calls,
            rate_limit_window_s=self.tool_rate_limit_window_s,
            threads=self.tool_threads,
            processes=self.tool_processes,
        )

    def clamp_steps(self, requested: int | None) -> int:
        """The budget a run gets: the client's ask, capped by the server."""
        steps = self.agent_max_steps if requested is None else requested
        return max(1, min(steps, self.agent_max_steps_cap))
