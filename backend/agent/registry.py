"""`StrategyRegistry`: the strategies a server offers, by name.

`app.py` registers them; `ChatService` looks them up and never imports one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from backend.agent.loop import AgentLoop
from backend.errors import ConfigError


class StrategyRegistry:
    def __init__(self, strategies: Iterable[AgentLoop] = ()) -> None:
        self._strategies: dict[str, AgentLoop] = {}
        for strategy in strategies:
            self.add(strategy)

    def add(self, strategy: AgentLoop) -> None:
        if strategy.name in self._strategies:
            raise ConfigError(f"strategy {strategy.name!r} is registered twice")
        self._strategies[strategy.name] = strategy

    def get(self, name: str) -> AgentLoop | None:
        return self._strategies.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._strategies

    def __iter__(self) -> Iterator[AgentLoop]:
        return iter(self._strategies.values())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._strategies)
