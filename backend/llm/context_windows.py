"""`ContextWindows`: the context windows models' servers reported.

Filled once, at start-up (`openai_compat.context_window.discover`), for the
models a server offers; a model whose server did not say has no entry. The
setting `LOOPWIRE_LLM_CONTEXT_TOKENS` comes first when it is set
(`LoopConfig.context_window`).
"""

from __future__ import annotations

from collections.abc import Mapping


class ContextWindows:
    def __init__(self, found: Mapping[str, int | None] | None = None) -> None:
        self._found: dict[str, int] = {}
        """Model → its context window in tokens, as its server said."""
        self.learn(found or {})

    def tokens(self, model: str) -> int | None:
        """`model`'s context window in tokens; None when its server did not say."""
        return self._found.get(model)

    def learn(self, found: Mapping[str, int | None]) -> None:
        """Keep what the servers said (model → window; None: it did not say)."""
        for model, tokens in found.items():
            if tokens is not None and tokens > 0:
                self._found[model] = tokens
