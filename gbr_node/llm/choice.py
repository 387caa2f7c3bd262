"""Which model endpoint to use, pure: profile, environment and flags merged.

Order (STYLE.md "Configuration"): built-in defaults < profile `[model]` <
environment variables < command-line flags. The environment variables are
the OpenAI SDK's usual ones, so an existing setup works as is:
`OPENAI_BASE_URL`, `OPENAI_MODEL` (ours: `GBR_MODEL`), and the API key from
the variable the profile names in `api_key_env` (default `OPENAI_API_KEY`).
With no base URL anywhere, the node probes a local Ollama at its usual
address, `OLLAMA_BASE_URL`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from gbr_node.config.profile import ModelConfig

OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"


@dataclass(frozen=True)
class ModelChoice:
    """The endpoint chosen and why.

    `base_url` / `model` are None when nothing configured them; `api_key` is
    the key's value or None; `sources` names where each setting came from,
    e.g. `{"base_url": "flag --base-url", "model": "profile [model]"}`.
    """

    config: ModelConfig
    api_key: str | None
    sources: dict[str, str]

    @property
    def configured(self) -> bool:
        """True when a base URL was given somewhere (no probe needed)."""
        return self.config.base_url is not None

    def describe(self) -> str:
        """One line: model, URL, and where they came from."""
        model = self.config.model or "(no model name)"
        url = self.config.base_url or "(none)"
        why = ", ".join(f"{k} from {v}" for k, v in self.sources.items()) or "nothing configured"
        key = "key set" if self.api_key else "no API key"
        return f"{model} at {url} ({why}; {key})"


def choose_model(
    config: ModelConfig,
    environ: Mapping[str, str],
    *,
    base_url: str | None = None,
    model: str | None = None,
) -> ModelChoice:
    """Merge the profile's `[model]` with environment variables and flags."""
    sources: dict[str, str] = {}
    if config.base_url:
        sources["base_url"] = "profile [model]"
    if config.model:
        sources["model"] = "profile [model]"
    overrides: dict[str, str] = {}
    for key, value, source in (
        ("base_url", environ.get("OPENAI_BASE_URL"), "$OPENAI_BASE_URL"),
        ("model", environ.get("OPENAI_MODEL"), "$OPENAI_MODEL"),
        ("model", environ.get("GBR_MODEL"), "$GBR_MODEL"),
        ("base_url", base_url, "flag --base-url"),
        ("model", model, "flag --model"),
    ):
        if value:
            overrides[key] = value
            sources[key] = source
    api_key = environ.get(config.api_key_env) or None
    return ModelChoice(replace_config(config, **overrides), api_key, sources)


def with_ollama(choice: ModelChoice, model: str) -> ModelChoice:
    """The choice pointed at a local Ollama that answered the probe with `model`."""
    sources = dict(choice.sources, base_url="local Ollama probe")
    if not choice.config.model:
        sources["model"] = "first model Ollama lists"
    config = replace_config(
        choice.config, base_url=OLLAMA_BASE_URL, model=choice.config.model or model
    )
    return replace(choice, config=config, sources=sources)


def replace_config(config: ModelConfig, **changes: object) -> ModelConfig:
    """A copy of a frozen `ModelConfig` with `changes` applied (validated)."""
    return ModelConfig.model_validate({**config.model_dump(), **changes})
