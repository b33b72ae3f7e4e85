"""`create_app`: routes and lifespan. The only place concrete classes are wired."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware

from backend.agent.kit import LoopKit
from backend.agent.registry import StrategyRegistry
from backend.agent.strategies.act import ActUntilAnswer
from backend.agent.strategies.llm_only import LLMOnly
from backend.agent.strategies.plan_execute import PlanAndExecute
from backend.agent.strategies.react import ReasonActObserve
from backend.agent.strategies.retrieve import RetrieveThenAnswer
from backend.budget import Budget
from backend.bus.base import Bus
from backend.bus.local import LocalBus
from backend.chat.levels import levels_of
from backend.chat.run_requests import RunRequests
from backend.chat.service import ChatService
from backend.files.blobs import BlobStore
from backend.files.collector import BlobCollector
from backend.files.shelf import FileShelf
from backend.files.tools import file_tools
from backend.identity.claims import ClaimMap
from backend.identity.identities import Identities
from backend.identity.oidc import OidcProvider
from backend.identity.signins import SignIns
from backend.llm.base import LLMClient
from backend.llm.context_windows import ContextWindows
from backend.llm.observed import ObservedLLM
from backend.prompts import PromptProvider
from backend.settings import Settings
from backend.sources.library import Library
from backend.store.base import Store
from backend.store.sql import SqlStore
from backend.telemetry.signals import NO_TELEMETRY, Telemetry, default_telemetry
from backend.tools.base import AnyTool, ToolRegistry
from backend.tools.builtin import builtin_tools
from backend.tools.executor import Runner, ToolExecutor
from backend.tools.notes import MemoryNotebook, Notebook, note_tools
from backend.tools.processes import ProcessPool
from backend.transport.auth import Authenticate
from backend.transport.cors import cors_middleware
from backend.transport.guard import Guard
from backend.transport.guesses import Guesses
from backend.transport.incidents import Incidents
from backend.transport.instance import InstanceHeader
from backend.transport.limits import ClientLimits
from backend.transport.login import Login
from backend.transport.refusal import Refused, answer_refused
from backend.transport.routing import routes
from backend.transport.trace_context import TraceContext
from backend.users import Users

if TYPE_CHECKING:
    from backend.tools.mcp import MCPManager

log = logging.getLogger("loopwire")


def make_llm(settings: Settings, registry: ToolRegistry) -> LLMClient:
    """The configured provider: OpenAI-compatible, or the embedded offline model
    (which learns the registry's tools from their offline skills)."""
    if settings.provider == "openai":
        from backend.llm.openai_compat.client import OpenAIClient

        return OpenAIClient(
            model=settings.llm_model,
            base_url=settings.llm_base_url,
            api_key=settings.llm_api_key,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            retry_backoff_s=settings.llm_retry_backoff_s,
            retry_max_wait_s=settings.llm_retry_max_wait_s,
            max_connections=settings.llm_max_connections,
            profile=settings.llm_profile,
        )
    from backend.llm.offline import OfflineLLM

    return OfflineLLM(registry)


def default_registry(
    notebook: Notebook | None = None,
    shelf: FileShelf | None = None,
    processes: Runner | None = None,
) -> ToolRegistry:
    """The built-in tools: calculator, current_time, convert_units, notes
    (kept in `notebook`: the store, or server memory) and, with a `shelf`
    and worker `processes` (for PDFs), read_file and write_file (the
    conversation's files)."""
    notes = note_tools(notebook if notebook is not None else MemoryNotebook())
    files = []
    if shelf is not None and processes is not None:
        files = file_tools(shelf, processes)
    return ToolRegistry([*builtin_tools(), *notes, *files])


StrategyFactory = Callable[[LoopKit], StrategyRegistry]
"""Builds the strategies a server offers from the kit (`default_strategies`)."""


def make_service(
    settings: Settings,
    llm: LLMClient,
    registry: ToolRegistry,
    prompts: PromptProvider,
    strategies: StrategyFactory | None = None,
    store: Store | None = None,
    data_sources: Sequence[str] = (),
    processes: Runner | None = None,
    windows: ContextWindows | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
    daily_budgets: Mapping[str, Budget] | None = None,
) -> ChatService:
    """The service and its loop; `processes` (the executor's worker
    processes) may be shared with tools that need them, such as read_file;
    `windows` are the models' context windows, learnt at start-up;
    `telemetry` traces and counts the runs and their model calls (every
    call goes through the kit's `ObservedLLM`); `daily_budgets`: the users
    whose daily budget is their own (the tokens file's)."""
    executor = ToolExecutor(registry, settings.executor_config(), processes=processes)
    config = settings.loop_config()
    config = replace(config, windows=windows) if windows is not None else config
    kit = LoopKit.build(
        ObservedLLM(llm, telemetry), registry, executor, prompts, config
    )
    requests = RunRequests(
        llm=llm,
        registry=registry,
        strategies=(strategies or default_strategies)(kit),
        settings=settings,
        data_sources=data_sources,
        daily_budgets=daily_budgets,
    )
    return ChatService(
        requests=requests,
        settings=settings,
        store=store,
        forget_session=executor.forget_session,
        on_close=executor.aclose,
        bus=make_bus(settings),
        telemetry=telemetry,
    )


def make_bus(settings: Settings) -> Bus:
    """Redis when `LOOPWIRE_REDIS_URL` is set (several instances), else the
    single-process bus."""
    if settings.redis_url:
        from backend.bus.redis_bus import RedisBus  # only a cluster loads redis

        return RedisBus(
            settings.redis_url,
            lease_ttl_s=settings.lease_ttl_s,
            timeout_s=settings.bus_timeout_s,
            redis_timeout_s=settings.redis_timeout_s,
        )
    return LocalBus(lease_ttl_s=settings.lease_ttl_s)


def default_strategies(kit: LoopKit) -> StrategyRegistry:
    """Every strategy loopwire ships, the default (`react`) first."""
    return StrategyRegistry(
        [
            ReasonActObserve(kit),
            ActUntilAnswer(kit),
            PlanAndExecute(kit),
            LLMOnly(kit),
            RetrieveThenAnswer(kit),
        ]
    )


def _mcp_servers(
    settings: Settings, reserved: Collection[str]
) -> AbstractAsyncContextManager[MCPManager | None]:
    """The MCP servers `LOOPWIRE_MCP_CONFIG` names, started while the app
    runs; without it, nothing (and the MCP SDK, a third of the start-up's
    imports, is never loaded)."""
    if not settings.mcp_config:
        return contextlib.nullcontext()
    from backend.tools.mcp import MCPManager, load_mcp_config

    return MCPManager(load_mcp_config(settings.mcp_config), reserved_names=reserved)


def _add_mcp_tools(registry: ToolRegistry, mcp: MCPManager) -> None:
    for tool in mcp.tools():
        registry.add(tool)
    for problem in mcp.problems:
        log.warning("%s", problem)
    if mcp.tools():
        log.info("MCP tools: %s", ", ".join(t.name for t in mcp.tools()))


def make_identities(settings: Settings, store: Store) -> Identities:
    """Who may use the server: the tokens, sign-ins kept in `store`, and the
    identity providers the settings name (JWT bearer tokens, OIDC)."""
    users = Users.configured(
        settings.auth_token,
        settings.auth_tokens_file,
        external=settings.jwt_enabled or settings.oidc_enabled,
    )
    signins = SignIns(store, users, ttl_s=settings.auth_cookie_ttl_s)
    identities = Identities(users, signins)
    if settings.jwt_enabled:
        from backend.identity.jwks import Jwks  # PyJWT: only when JWTs are on
        from backend.identity.jwt_bearer import JwtVerifier

        assert settings.jwt_issuer and settings.jwt_audience and settings.jwt_jwks_url
        identities.jwt = JwtVerifier(
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            jwks=Jwks(settings.jwt_jwks_url, refetch_s=settings.jwt_jwks_refetch_s),
            claims=ClaimMap(
                settings.jwt_user_claim,
                settings.jwt_roles_claim,
                settings.jwt_admin_role,
            ),
        )
    if settings.oidc_enabled:
        issuer, client_id = settings.oidc_issuer, settings.oidc_client_id
        assert issuer and client_id and settings.oidc_client_secret
        identities.oidc = OidcProvider(
            issuer=issuer,
            client_id=client_id,
            client_secret=settings.oidc_client_secret,
            claims=ClaimMap(
                settings.oidc_user_claim,
                settings.oidc_roles_claim,
                settings.oidc_admin_role,
            ),
            name=settings.oidc_name or urlsplit(issuer).netloc,
            scopes=settings.oidc_scopes,
            jwks_refetch_s=settings.jwt_jwks_refetch_s,
        )
    return identities


def create_app(
    settings: Settings | None = None,
    *,
    llm: LLMClient | None = None,
    registry: ToolRegistry | None = None,
    prompts: PromptProvider | None = None,
    strategies: StrategyFactory | None = None,
    store: Store | None = None,
    extra_tools: Sequence[AnyTool] = (),
    telemetry: Telemetry | None = None,
) -> Starlette:
    """The ASGI app. Tests inject `llm` / `registry`; production uses settings.

    `extra_tools` are offered besides the registry's (an embedder's own).

    `strategies` builds the strategies to offer from the shared `LoopKit`
    (default: `default_strategies`); embedders add their own this way.
    `store` defaults to the database `LOOPWIRE_DATABASE_URL` names.
    `telemetry` defaults to Prometheus metrics, and traces as the standard
    `OTEL_*` variables say (`telemetry/signals.py`).
    """
    settings = settings or Settings()
    prompts = prompts or PromptProvider()
    prompts.check()
    chosen_store = store if store is not None else SqlStore(settings.database_url)
    identities = make_identities(settings, chosen_store)
    guesses = Guesses(settings.auth_failures_per_minute)
    login = Login(identities, settings, guesses)
    shelf, collector = _make_files(settings, chosen_store)
    processes = ProcessPool(settings.tool_processes)
    tools, library = _make_tools(
        settings, registry, chosen_store, shelf, processes, extra_tools
    )
    chosen_llm = llm or make_llm(settings, tools)
    windows = ContextWindows()
    service = make_service(
        settings,
        chosen_llm,
        tools,
        prompts,
        strategies,
        chosen_store,
        data_sources=library.names if library is not None else (),
        processes=processes,
        windows=windows,
        telemetry=telemetry or default_telemetry(),
        daily_budgets=identities.users.daily_budgets,
    )
    shelf.on_added = service.files_added
    parts = _Parts(
        settings, chosen_store, chosen_llm, tools, library, service, shelf, collector
    )
    app = Starlette(
        routes=routes(identities, login, settings),
        lifespan=_lifespan(parts, windows),
        exception_handlers={Refused: answer_refused},
        middleware=_middleware(settings, service, identities, guesses),
    )
    _set_state(app, parts, identities, guesses)
    return app


@dataclass(frozen=True)
class _Parts:
    """What `create_app` wired, for the lifespan and `app.state`."""

    settings: Settings
    store: Store
    llm: LLMClient
    tools: ToolRegistry
    library: Library | None
    service: ChatService
    shelf: FileShelf
    collector: BlobCollector


def _make_files(settings: Settings, store: Store) -> tuple[FileShelf, BlobCollector]:
    """The conversations' files and the collector of their orphaned blobs."""
    shelf = FileShelf(
        store,
        BlobStore(settings.files_dir),
        max_bytes=settings.max_file_bytes,
        max_files=settings.max_files_per_conversation,
        clock=time.time,
        max_user_bytes=settings.max_file_bytes_per_user,
    )
    collector = BlobCollector(
        shelf.blobs,
        store,
        grace_s=settings.blob_gc_grace_s,
        every_s=settings.blob_gc_s,
    )
    return shelf, collector


def _make_tools(
    settings: Settings,
    registry: ToolRegistry | None,
    store: Store,
    shelf: FileShelf,
    processes: ProcessPool,
    extra_tools: Sequence[AnyTool],
) -> tuple[ToolRegistry, Library | None]:
    """`registry` (default: the built-in tools), plus the data sources'
    search tool when folders are configured, plus `extra_tools`."""
    tools = registry
    if tools is None:
        tools = default_registry(store, shelf, processes)
    library = Library(settings) if settings.data_source_folders else None
    if library is not None:
        tools.add(library.tool())
    for tool in extra_tools:
        tools.add(tool)
    return tools, library


def _lifespan(
    parts: _Parts, windows: ContextWindows
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """Learn the models' context `windows`; open the store, start the MCP
    servers, the data sources, the service and the blob collector; close
    them all in reverse."""
    settings, store, llm, tools = parts.settings, parts.store, parts.llm, parts.tools
    mcp_servers = _mcp_servers(settings, tools.names)  # a bad config stops it now

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        log.info("loopwire: model %s (%s)", llm.model, llm.provider)
        await _learn_windows(settings, windows)
        await store.open()
        try:
            async with mcp_servers as mcp:
                if mcp is not None:
                    app.state.mcp = mcp
                    _add_mcp_tools(tools, mcp)
                library = parts.library
                documents = library.running() if library else contextlib.nullcontext()
                async with documents, parts.service, parts.collector:
                    yield
        finally:
            await store.close()
            await llm.aclose()
            await asyncio.to_thread(parts.service.telemetry.tracing.close)

    return lifespan


async def _learn_windows(settings: Settings, windows: ContextWindows) -> None:
    """The models' context windows, asked of their server once (unless
    `LOOPWIRE_LLM_CONTEXT_TOKENS` is set): `openai_compat.context_window`."""
    url, key = settings.llm_base_url, settings.llm_api_key
    if settings.provider == "openai" and url and not settings.llm_context_tokens:
        from backend.llm.openai_compat.context_window import discover

        found = await discover(
            url, settings.models, api_key=key, profile=settings.llm_profile
        )
        windows.learn(found)


def _middleware(
    settings: Settings, service: ChatService, identities: Identities, guesses: Guesses
) -> list[Middleware]:
    return [
        Middleware(InstanceHeader, instance_id=service.bus.instance_id),
        *([Middleware(TraceContext)] if service.telemetry.tracing.enabled else []),
        Middleware(Incidents),
        Middleware(Guard, settings=settings),
        *cors_middleware(settings),
        Middleware(
            Authenticate,
            identities=identities,
            guesses=guesses,
            metrics_public=settings.metrics_public,
        ),
    ]


def _set_state(
    app: Starlette, parts: _Parts, identities: Identities, guesses: Guesses
) -> None:
    """What the endpoints find on `app.state`."""
    settings, users = parts.settings, identities.users
    app.state.chat = parts.service
    app.state.settings = settings
    app.state.users = users
    app.state.identities = identities
    app.state.signins = identities.signins
    app.state.guesses = guesses
    app.state.limits = ClientLimits(settings, signed_in=users.enabled)
    service, metrics = parts.service, parts.service.telemetry.metrics
    app.state.limits.metrics = metrics
    if isinstance(parts.store, SqlStore):
        parts.store.metrics = metrics
    metrics.read_levels(lambda: levels_of(service.sessions, service.bus))
    app.state.store = parts.store
    app.state.files = parts.shelf
    app.state.blob_collector = parts.collector
    app.state.library = parts.library
