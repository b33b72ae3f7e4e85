"""Tool definitions and the registry.

A tool is a name, a description, a pydantic model for its arguments (whose
JSON Schema is what the model sees), an async function, and one `ToolEffect`
that every policy reads; optionally, an offline skill that teaches the
embedded offline model when and how to use it (`backend/llm/offline_skill.py`).

Registering is one call::

    registry = ToolRegistry()

    class AddArgs(BaseModel):
        a: float
        b: float

    @registry.tool("add", "Add two numbers.", effect=ToolEffect(read_only=True))
    async def add(args: AddArgs, ctx: ToolContext) -> float:
        return args.a + args.b
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel

from backend.errors import ConfigError
from backend.llm.base import ToolSpec
from backend.llm.offline_skill import OfflineSkill, Skill

A = TypeVar("A", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ToolEffect:
    """What a tool does to the world; drives every executor policy."""

    read_only: bool = False
    idempotent: bool = False
    requires_approval: bool = False
    finalize: bool = False
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may know about the call it serves."""

    session_id: str
    run_id: str | None = None
    step: int = 0
    owner: str = "local"
    """Whose conversation the call serves (per-owner data such as notes)."""


ToolFunction = Callable[[A, ToolContext], Awaitable[Any]]
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
    _spec: ToolSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        schema = self.parameters or self.args_model.model_json_schema()
        schema.pop("title", None)
        spec = ToolSpec(name=self.name, description=self.description, parameters=schema)
        object.__setattr__(self, "_spec", spec)  # computed once: schemas are costly

    def spec(self) -> ToolSpec:
        """What the model sees: name, description, the arguments' JSON Schema."""
        return self._spec

    async def __call__(self, args: A, ctx: ToolContext) -> Any:
        return await self.fn(args, ctx)


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


def _args_model_of(fn: Callable[..., Any]) -> type[BaseModel]:
    import inspect
    import typing

    hints = typing.get_type_hints(fn)
    first = next(iter(inspect.signature(fn).parameters), None)
    model = hints.get(first) if first else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ConfigError(
            f"tool function {fn.__name__} must take a pydantic model first"
        )
    return model
