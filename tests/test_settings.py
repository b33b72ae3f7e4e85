"""Settings: provider choice, key fallback, budgets."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.conftest import make_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "LOOPWIRE_LLM_API_KEY",
        "LOOPWIRE_LLM_BASE_URL",
        "LOOPWIRE_LLM_PROVIDER",
        "LOOPWIRE_AGENT_MAX_STEPS",
    ):
        monkeypatch.delenv(name, raising=False)


def test_offline_when_nothing_is_configured() -> None:
    """With nothing configured the provider is offline, serving on 127.0.0.1:8000."""
    settings = make_settings()
    assert settings.provider == "offline"
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)


def test_openai_when_a_base_url_or_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """A base URL or an `OPENAI_API_KEY` alone makes the provider `openai`."""
    assert make_settings(llm_base_url="http://127.0.0.1:11434/v1").provider == "openai"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = make_settings()
    assert (settings.provider, settings.llm_api_key) == ("openai", "sk-test")


def test_explicit_provider_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit `LOOPWIRE_LLM_PROVIDER` wins over an API key that implies OpenAI."""
    monkeypatch.setenv("LOOPWIRE_LLM_PROVIDER", "offline")
    monkeypatch.setenv("LOOPWIRE_LLM_API_KEY", "sk-test")
    assert make_settings().provider == "offline"


def test_step_budget_is_capped() -> None:
    """Requested steps are clamped to the cap, and the default drops to a lower cap."""
    settings = make_settings(agent_max_steps=5, agent_max_steps_cap=8)
    assert [settings.clamp_steps(n) for n in (None, 1, 8, 99)] == [5, 1, 8, 8]
    assert make_settings(agent_max_steps_cap=4).agent_max_steps == 4


def test_inconsistent_budget_is_refused() -> None:
    """An explicit default step budget above the cap is refused."""
    with pytest.raises(ValidationError, match="exceeds LOOPWIRE_AGENT_MAX_STEPS_CAP"):
        make_settings(agent_max_steps=20, agent_max_steps_cap=8)


def test_bad_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown `LOOPWIRE_LLM_PROVIDER` is refused, naming the field."""
    monkeypatch.setenv("LOOPWIRE_LLM_PROVIDER", "anthropic")
    with pytest.raises(ValidationError, match="llm_provider"):
        make_settings()
