"""The model service: which model the agent talks to, its client, its context
window and step limit (GBR-CTX-01), and what to say when there is none.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

import trio

from gbr_node.agent.context import DEFAULT_WINDOW, SMALL_WINDOW_TOKENS, Window
from gbr_node.agent.machine import DEFAULT_MAX_STEPS, SMALL_MODEL_MAX_STEPS
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.config.events import UpdateEnv
from gbr_node.config.loader import LoadedProfile
from gbr_node.errors import ModelError
from gbr_node.llm.choice import ModelChoice, choose_model
from gbr_node.llm.client import ModelClient
from gbr_node.llm.grammar import Workspace
from gbr_node.llm.local import CATALOGUE, DEFAULT_LOCAL_MODEL, INSTALL_HINT
from gbr_node.llm.settings import ClientSettings
from gbr_node.sandbox import Sandbox
from gbr_node.tools.workspace import workspace_view

EMBEDDED_MISSING = (
    "the embedded model is not installed (in gbr-node's folder: "
    f"{INSTALL_HINT} && {CATALOGUE[DEFAULT_LOCAL_MODEL].install})"
)
EMBEDDED_OFF = "GBR_LOCAL_MODEL=0 keeps the embedded model off"
EMBEDDED_FAILED = "the embedded model did not start (.gbr/node.log says why)"
SET_A_MODEL = (
    "Set one, for example:\n"
    "  export OPENAI_BASE_URL=https://api.openai.com/v1\n"
    "  export OPENAI_MODEL=gpt-4o-mini\n"
    "  export OPENAI_API_KEY=sk-...\n"
    "or [model] base_url / model in the profile, or --base-url / --model"
)


def missing_model_help(choice: ModelChoice | None, embedded: str = EMBEDDED_MISSING) -> str:
    """Why there is no model client and how to set one (each `export` line can be
    pasted as it is). `embedded` says why the embedded model is not running
    (EMBEDDED_MISSING, EMBEDDED_OFF or EMBEDDED_FAILED). When a server URL is
    set without a model name (requests need one), says just that."""
    if choice is None or not choice.config.base_url or choice.config.model:
        return (
            "no model configured, no local Ollama answered at http://127.0.0.1:11434, "
            f"and {embedded}.\n{SET_A_MODEL}"
        )
    where = choice.sources.get("base_url", "the profile")
    return (
        f"a model server is set ({choice.config.base_url}, base_url from {where}) but no "
        'model name:\n  export OPENAI_MODEL=NAME\nor [model] model = "NAME" in the profile, '
        "or --model NAME (llama.cpp's server takes any name; Ollama and vLLM want a served one)"
    )


class ModelService:
    """The model in use (`choice`, `client`; `embedded` when it is the embedded one,
    `llm.local`) for the profile in force (`loaded`); `sandbox` gives the sandbox
    in force, `runtime` the agent's runtime (None where no agent runs)."""

    def __init__(
        self,
        loaded: Callable[[], LoadedProfile],
        sandbox: Callable[[], Sandbox],
        runtime: Callable[[], AgentRuntime | None] = lambda: None,
    ) -> None:
        self._loaded = loaded
        self._sandbox = sandbox
        self._runtime = runtime
        self.choice: ModelChoice | None = None
        self.client: ModelClient | None = None
        self.retired_clients: list[ModelClient] = []
        self.embedded = False  # the model is the embedded one (llm.local)
        self.no_model_reason = EMBEDDED_MISSING

    async def learn_window(self) -> Window:
        """Give the agent the model's context window and its step limit (GBR-CTX-01).

        The window is `[model] context_tokens` when set, else what the server
        reports (`ModelClient.context_tokens`), else the conservative default;
        the step limit is the profile's `max_steps`, else `SMALL_MODEL_MAX_STEPS`
        for a small model (embedded, or a known window of at most
        `SMALL_WINDOW_TOKENS`), else `DEFAULT_MAX_STEPS`.
        """
        profile = self._loaded().profile
        config = self.choice.config if self.choice else profile.model
        window = DEFAULT_WINDOW
        if config.context_tokens:
            window = Window(config.context_tokens, "profile [model] context_tokens")
        elif self.client is not None:
            reported = await self.client.context_tokens()
            if reported is not None:
                window = Window(*reported)
        # The conservative default says nothing about the model: only a known window counts.
        known = window is not DEFAULT_WINDOW
        small = self.embedded or (known and window.tokens <= SMALL_WINDOW_TOKENS)
        steps = profile.max_steps or (SMALL_MODEL_MAX_STEPS if small else DEFAULT_MAX_STEPS)
        runtime = self._runtime()
        if runtime is not None:
            runtime.machine.context.window = window
            runtime.machine.max_steps = steps
        return window

    def client_settings(self, choice: ModelChoice) -> ClientSettings:
        """The client settings of `choice`; for the embedded model, tool calls are
        grammar-constrained (`llm.grammar`), bounded by what the project holds
        (`grammar_workspace`). ValueError when base_url or model is unset."""
        settings = ClientSettings.from_model_config(choice.config, api_key=choice.api_key)
        if not self.embedded:
            return settings
        return replace(settings, tool_grammar=True, grammar_workspace=self.grammar_workspace)

    def grammar_workspace(self) -> Workspace | None:
        """What the project holds now, for the embedded model's grammar (`llm.grammar`):
        its files (with small texts) and folders; None (paths free) past
        `tools.workspace.MAX_ENTRIES`."""
        view = workspace_view(self._sandbox())
        return None if view is None else Workspace(*view)

    def model(self) -> ModelClient:
        """The current model client; ModelError when none is configured."""
        if self.client is None:
            raise ModelError(missing_model_help(self.choice, self.no_model_reason))
        return self.client

    def prices(self) -> tuple[str | None, float | None, float | None]:
        """`/usage`: the model in use and the profile's US$ per million tokens in and out."""
        config = self._loaded().profile.model
        model = self.choice.config.model if self.choice else config.model
        return model, config.input_price_per_mtok, config.output_price_per_mtok

    async def profile_changed(self, update: UpdateEnv, previous: LoadedProfile) -> None:
        """A reload that changed `[model]` replaces the client; one that changed it or
        `max_steps` learns the window again."""
        before, after = previous.profile, update.snapshot.profile
        if after.model != before.model and self.client:
            self._replace_client()
        if after.model != before.model or after.max_steps != before.max_steps:
            await self.learn_window()

    def _replace_client(self) -> None:
        choice = choose_model(self._loaded().profile.model, os.environ)
        if not (choice.config.base_url and choice.config.model):
            return
        if self.client is not None:
            self.retired_clients.append(self.client)
        self.choice = choice
        self.embedded = False  # a configured model replaces the embedded one
        self.client = ModelClient(self.client_settings(choice))

    async def aclose(self) -> None:
        """Close every client this service opened (shielded: runs while leaving)."""
        with trio.CancelScope(shield=True):
            for client in [self.client, *self.retired_clients]:
                if client is not None:
                    await client.aclose()
