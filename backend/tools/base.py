"""Tool definitions and the registry.

A tool is a name, a description, a pydantic model for its arguments (whose
JSON Schema is what the model sees), a function, and one `ToolEffect` that
every policy reads; optionally, an offline skill that teaches the embedded
offline model when and how to use it (`backend/llm/offline_skill.py`).

Where the executor runs the function (`Tool.runs_in`) is decided once, when
the tool is made: an async function on the event loop; a plain function in a
worker thread (`backend/tools/threads.py`), so that blocking I/O never
freezes the loop; a plain module-level function whose effect says
`cpu_bound` in a worker process (`backend/tools/processes.py`), killed at its
timeout.

Registering is one call::

    registry = ToolRegistry()

    class AddArgs(BaseModel):
        a: float
        b: float

    pure = ToolEffect(read_only=True, untrusted_result=False)

    @registry.tool("add", "Add two numbers.", effect=pure)
    async def add(args: AddArgs, ctx: ToolContext) -> float:
        return args.a + args.b

    @registry.tool("lookup", "Look a word up.", effect=ToolEffect(read_only=True))
    def lookup(args: WordArgs, ctx: ToolContext) -> str:  # blocking: a thread
        return dictionary_file().definition(args.word)

    crunch = ToolEffect(read_only=True, untrusted_result=False, cpu_bound=True)

    @registry.tool("primes", "Count primes.", effect=crunch)
    def primes(args: CountArgs, ctx: ToolContext) -> int:  # top level: a process
        return sum(1 for k in range(2, args.below) if is_prime(k))
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar, cast

from pydantic import BaseModel, ValidationError

from backend.errors import ConfigError
from backend.llm.base import ToolSpec
from backend.llm.offline_skill import OfflineSkill, Skill
from backend.pauses import Pauses
from backend.protocol import ToolArguments
from backend.schema_check import schema_problem
from backend.tools.elicitation import Asker

A = TypeVar("A", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ToolEffect:
    """What a tool does to the world; drives every executor policy."""

    read_only: bool = False
    idempotent: bool = False
    requires_approval: bool | None = None
    """Whether a call waits for the user's approval (see `asks`): None, the
    default, asks when the tool changes something (not `read_only`); True
    always asks; False asks only once the run has read untrusted content."""
    untrusted_result: bool = True
    """Its result may carry text the user did not write (documents, files,
    web pages, other systems' replies), any instruction in which is not the
    user's. After reading one, a run's every approval request names it, and
    a tool that changes something asks even if it was set not to. False
    for results the server makes itself (arithmetic, the time, a saved
    note's id)."""
    finalize: bool = False
    timeout_s: float | None = None
    cpu_bound: bool = False
    """Run the (plain, module-level) function in a worker process, which is
    killed at the timeout; for computations that would hold the GIL."""

    def asks(self, untrusted_read: bool) -> bool:
        """Whether a call waits for approval, in a run that has
        (`untrusted_read`) or has not read untrusted content yet."""
        if self.requires_approval is None:
            return not self.read_only
        return self.requires_approval or (untrusted_read and not self.read_only)


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may know about the call it serves."""

    session_id: str
    run_id: str | None = None
    step: int = 0
    owner: str = "local"
    """Whose conversation the call serves (per-owner data such as notes)."""
    data_sources: tuple[str, ...] | None = None
    """The data sources the run may search (`chat.selected_data_sources`;
    None: all of them)."""
    idempotency_key: str | None = None
    """`<run id>:<tool call id>`: the same for every execution of this call,
    wherever and however often it runs. A tool that changes data records
    its effect under it, so that a second execution changes nothing and
    returns the first one's result (MCP servers get it in `_meta`)."""
    epoch: int | None = None
    """The fencing epoch the conversation is owned at by the instance
    running the call (None: no store): a store write that names it is
    refused once another instance has taken the conversation over."""
    ask: Asker | None = field(default=None, compare=False, repr=False)
    """Asks the person behind the run something mid-call (an MCP server's
    elicitation; `tools/elicitation.py`); None where nobody can be asked."""
    pauses: Pauses | None = field(default=None, compare=False, repr=False)
    """The run's waits for a person, which the call's timeout does not count."""

    def detached(self) -> ToolContext:
        """Without the run's live parts (for a worker process)."""
        return replace(self, ask=None, pauses=None)


@dataclass(frozen=True, slots=True)
class Reconciled:
    """A tool's answer to "did the call with this key take effect?" after
    the server running it stopped mid-call."""

    took_effect: bool
    result: Any = None
    """What the call returned, when it took effect (its `tool_complete`)."""


Reconcile = Callable[[ToolContext], Awaitable[Reconciled | None]]
"""`reconcile(ctx)` (the call's `ctx.idempotency_key`): whether the call took
effect, or None if the tool cannot tell (then the user is asked)."""


ToolFunction = Callable[[A, ToolContext], Any]
"""`fn(args, ctx)`: async, or plain (run in a worker thread or process)."""
RunsIn = Literal["loop", "thread", "process"]
SideEffect = Callable[[Any, Any, ToolContext], Awaitable[str | None]]
"""`hook(args, result, ctx)` runs once after each successful call; a returned
string is added to the conversation as a system note for the model."""


@dataclass(frozen=True, slots=True)
class Tool(Generic[A]):
    name: str
    description: str
    args_model: type[A]
    fn: ToolFunction[A]
    effect: ToolEffect = ToolEffect()
    parameters: dict[str, Any] | None = None
    """A JSON Schema to show the model instead of `args_model`'s (MCP tools)."""
    side_effects: tuple[SideEffect, ...] = ()
    offline: OfflineSkill | None = None
    """What this tool teaches the embedded offline model (optional)."""
    summary: str = ""
    """What it does, for people (the UI's tool list and approval dialog);
    empty: the first sentence of `description`, which is for the model."""
    reconcile: Reconcile | None = None
    """Tells whether a call cut off by a crash took effect (by its
    idempotency key), so the run goes on without asking the user."""
    origin: Callable[[Any], str | None] | None = None
    """`origin(result)`: where an untrusted result's text came from, for
    people (file names, document paths, a server), or None when this result
    carried none (a search that found nothing). Without it, every result of
    an `untrusted_result` tool counts, named by the tool alone."""
    cites: bool = False
    """Its result's `passages` ({source, path, location, score, text}) are
    what the run's answer rests on: the run collects them as its `sources`
    (`backend/agent/citations.py`), shown as citations under the answer."""
    _spec: ToolSpec = field(init=False, repr=False, compare=False)
    runs_in: RunsIn = field(init=False, compare=False)
    """Where the executor runs `fn`: the event loop, a thread or a process."""

    def __post_init__(self) -> None:
        schema = self.parameters or self.args_model.model_json_schema()
        schema.pop("title", None)
        spec = ToolSpec(name=self.name, description=self.description, parameters=schema)
        object.__setattr__(self, "_spec", spec)  # computed once: schemas are costly
        object.__setattr__(self, "runs_in", _runs_in(self))

    @property
    def people_summary(self) -> str:
        """`summary`, or the first sentence of the model's description."""
        if self.summary:
            return self.summary
        first, dot, _ = self.description.strip().partition(". ")
        return first + ("." if dot else "")

    def spec(self) -> ToolSpec:
        """What the model sees: name, description, the arguments' JSON Schema."""
        return self._spec

    def validate(self, arguments: ToolArguments, *, by_schema: bool = False) -> Any:
        """`arguments` as `args_model`, or what is wrong with them (a `str`
        naming each field). `by_schema`: checked against `parameters` too,
        when the tool has its own schema (an MCP server's) — for arguments a
        person wrote; a model's call is left to the server, which may take
        what its schema is too strict to say."""
        if isinstance(arguments, str):
            return (
                f"arguments for {self.name} are not a JSON object: {arguments[:200]!r}"
            )
        if by_schema and self.parameters is not None:
            problem = schema_problem(self.parameters, arguments)
            if problem is not None:
                return f"invalid arguments for {self.name}: {problem}"
        try:
            return self.args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors()
            )
            return f"invalid arguments for {self.name}: {problems}"

    async def __call__(self, args: A, ctx: ToolContext) -> Any:
        """Call `fn` directly (a plain one in a thread, never a process): the
        executor is what bounds and isolates calls."""
        if self.runs_in == "loop":
            return await self.fn(args, ctx)
        return await asyncio.to_thread(self.fn, args, ctx)


AnyTool = Tool[Any]


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self, tools: Iterable[AnyTool] = ()) -> None:
        self._tools: dict[str, AnyTool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: AnyTool) -> None:
        if not tool.name or not tool.name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"tool name {tool.name!r} must be [A-Za-z0-9_-]+")
        if tool.name in self._tools:
            raise ConfigError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool

    def tool(
        self,
        name: str,
        description: str,
        *,
        effect: ToolEffect = ToolEffect(),
        side_effects: tuple[SideEffect, ...] = (),
    ) -> Callable[[ToolFunction[A]], ToolFunction[A]]:
        """Decorator: register `fn`, taking its argument model from its annotation."""

        def register(fn: ToolFunction[A]) -> ToolFunction[A]:
            args_model = cast(type[A], _args_model_of(fn))
            tool = Tool(name, description, args_model, fn, effect, None, side_effects)
            self.add(tool)
            return fn

        return register

    def get(self, name: str) -> AnyTool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[AnyTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def available(
        self, selected: Sequence[str] | None, *, read_only: bool = False
    ) -> list[AnyTool]:
        """The tools offered for one request: selected (None = all), and only
        read-only ones in a read-only session. Cheap: call it every step."""
        chosen = self._tools.values() if selected is None else self._pick(selected)
        return [t for t in chosen if t.effect.read_only or not read_only]

    def offline_skills(self) -> list[Skill]:
        """The offline model's skills: those of the tools registered now."""
        return [Skill(t.name, t.offline) for t in self._tools.values() if t.offline]

    def _pick(self, selected: Sequence[str]) -> list[AnyTool]:
        wanted = set(selected)
        return [t for t in self._tools.values() if t.name in wanted]


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` gives a coroutine (async functions, and objects
    with an async `__call__`)."""
    call = getattr(fn, "__call__", None)  # noqa: B004 (the method itself)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def _runs_in(tool: Tool[Any]) -> RunsIn:
    if not tool.effect.cpu_bound:
        return "loop" if is_async(tool.fn) else "thread"
    where = f"cpu_bound tool {tool.name!r}"
    if is_async(tool.fn):
        raise ConfigError(f"{where}: its function must be a plain def, not async")
    if not (inspect.isfunction(tool.fn) and _importable(tool.fn)):
        raise ConfigError(
            f"{where}: its function must be defined at the top level of a module "
            f"(it is imported by name in a worker process), not {tool.fn!r}"
        )
    if not _importable(tool.args_model):
        raise ConfigError(
            f"{where}: its argument model {tool.args_model.__qualname__} must be "
            "defined at the top level of a module"
        )
    return "process"


def _importable(obj: Any) -> bool:
    """Whether a worker process (and pickle) can find `obj` by its module and
    qualified name: not nested in a function, not a lambda, not shadowed.

    A top-level name not bound yet passes: a decorator runs before its
    function's name is assigned."""
    qualname: str = getattr(obj, "__qualname__", "<none>")
    if "<" in qualname:  # <locals>, <lambda>
        return False
    try:
        found: Any = importlib.import_module(obj.__module__)
    except (ImportError, TypeError):
        return False
    *outer, last = qualname.split(".")
    for part in outer:
        found = getattr(found, part, None)
    found = getattr(found, last, _UNBOUND)
    return found is obj or (found is _UNBOUND and not outer)


_UNBOUND = object()


def _args_model_of(fn: Callable[..., Any]) -> type[BaseModel]:
    import typing

    hints = typing.get_type_hints(fn)
    first = next(iter(inspect.signature(fn).parameters), None)
    model = hints.get(first) if first else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ConfigError(
            f"tool function {fn.__name__} must take a pydantic model first"
        )
    return model
