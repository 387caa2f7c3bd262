"""The agent service: the agent's runtime as the node runs it, the tools it is
offered (`/tools`), and the context a person's prompt is given as the turn
starts (the project's files, the library lookup; issues 18, 32, 33).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from gbr_node.agent.dispatch import Dispatcher, LocalTools
from gbr_node.agent.messages import UserPrompt
from gbr_node.agent.project import project_note
from gbr_node.agent.runtime import AgentRuntime
from gbr_node.config.events import UpdateEnv
from gbr_node.config.loader import LoadedProfile
from gbr_node.config.profile import ALL_LOCAL_TOOLS
from gbr_node.library.lookup import Prelookup
from gbr_node.library.mention import project_names
from gbr_node.llm.window import DEFAULT_CONTEXT_TOKENS
from gbr_node.sandbox import Sandbox
from gbr_node.slash import Command
from gbr_node.textcells import DIM, RESET, one_line
from gbr_node.tools.workspace import workspace_view

PROJECT_SHARE = 0.05  # of the window, at most, for the project's files (agent.project)
Lookup = Callable[[str, "int | None", frozenset[str]], Awaitable["Prelookup | None"]]
"""The library lookup of a message for a window of so many tokens, leaving out the
project's own names (`library.service`)."""


async def _no_lookup(text: str, window: int | None, local: frozenset[str]) -> Prelookup | None:
    return None


class AgentService:
    """The agent's runtime (`runtime`, set by the node that runs an agent; None in
    `serve` and `mcp`), its dispatcher, and what it is offered.

    `registry` gives the tools in force, `loaded` the profile in force, `sandbox`
    the sandbox in force, `lookup` the library lookup.
    """

    commands = (Command("tools", "", "list the tools the model can call (local and from peers)"),)

    def __init__(
        self,
        registry: Callable[[], LocalTools],
        loaded: Callable[[], LoadedProfile],
        sandbox: Callable[[], Sandbox],
        lookup: Lookup = _no_lookup,
    ) -> None:
        self._loaded = loaded
        self._sandbox = sandbox
        self._lookup = lookup
        self.dispatcher = Dispatcher(registry)
        self.runtime: AgentRuntime | None = None

    def chat_tools(self) -> list[dict[str, Any]]:
        """The tools offered to the model, the embedded one too (issue 32): all of them;
        what the window holds of them is `agent.context.ContextManager.fit_tools`'s
        to decide (short forms, then fewer), for every model alike."""
        return self.dispatcher.chat_tools()

    def window_tokens(self) -> int | None:
        """The model's window in tokens, as the agent knows it; None without an agent."""
        return None if self.runtime is None else self.runtime.machine.context.window.tokens

    def turn_running(self) -> bool:
        """True while the agent's turn runs."""
        return self.runtime is not None and self.runtime.machine.prompt_id is not None

    def tell_model(self, note: str) -> None:
        """Add `note` to the model's history as the person's (no-op without an agent)."""
        if self.runtime is not None:
            self.runtime.machine.session.append({"role": "user", "content": note})

    async def profile_changed(self, update: UpdateEnv, previous: LoadedProfile) -> None:
        """The agent's system message follows the profile put in force."""
        if self.runtime is not None:
            await self.runtime.inbox.send(update)

    async def with_turn_context(self, prompt: UserPrompt) -> UserPrompt:
        """The person's prompt as the model gets it: the project's files as the turn
        starts (`agent.project`, at most `PROJECT_SHARE` of the window), then the
        library lookup (`with_library_context`). Neither depends on the words of
        the request beyond the lookup's own code mentions (issue 32, 33)."""
        view = await trio.to_thread.run_sync(workspace_view, self._sandbox())
        files = None if view is None else view[0]
        prompt = await self.with_library_context(prompt, project_names(files or {}))
        window = self.window_tokens()
        budget = int((window or DEFAULT_CONTEXT_TOKENS) * PROJECT_SHARE)
        note = project_note(files, budget)
        if not note:
            return prompt
        context = f"{note}\n\n{prompt.context}" if prompt.context else note
        return UserPrompt(prompt.text, context=context)

    async def with_library_context(
        self, prompt: UserPrompt, local: frozenset[str] = frozenset()
    ) -> UserPrompt:
        """The prompt with the node's own library lookup added (`library.service`,
        `[library] prelookup`), for a name that is not one of the project's own,
        `local`. The block rides on this one message only: it is not
        added again after tool results; the embedded model's grammar takes no word
        of any message (issue 32), so never the block's (issue 33). A lookup that
        fails or takes too long leaves the prompt as it is."""
        found = await self._lookup(prompt.text, self.window_tokens(), local)
        if found is None:
            return prompt
        return UserPrompt(prompt.text, context=found.context)

    async def command(self, name: str, args: str) -> str:
        """`/tools`."""
        return "\n".join(self.tools_lines()) or "no tools"

    def tools_lines(self) -> list[str]:
        """`/tools`: one line per tool the model is offered now (what its window holds),
        then, dimmed, what is withheld and why (issue 34): tools left out for the
        window, local tools the profile's `[tools] enabled` does not grant, trusted
        peers not connected, mounted MCP servers not running."""
        offered = self.chat_tools()
        if self.runtime is not None:
            offered = self.runtime.machine.context.fit_tools(offered)
        lines = []
        for tool in offered:
            fn = tool["function"]
            first = (fn.get("description") or "").strip().splitlines()[:1]
            lines.append(f"  {fn['name']:<20} {first[0] if first else ''}")
        sent = {tool["function"]["name"] for tool in offered}
        withheld = [
            f"{name}: left out for the model's window"
            for name in (t["function"]["name"] for t in self.chat_tools())
            if name not in sent
        ]
        profile = self._loaded().profile
        enabled = profile.tools.is_enabled
        off = [name for name in ALL_LOCAL_TOOLS if not enabled(name)]
        if off:
            withheld.append(f"{', '.join(off)}: not granted by the profile's [tools] enabled")
        known = {t["function"]["name"].split("__", 1)[0] for t in self.chat_tools()}
        withheld += [
            f"{alias}__*: peer not connected (its tools come when it is: /dial {alias})"
            for alias in profile.peers
            if alias not in known
        ]
        withheld += [
            f"{name}__*: MCP server not running (starting, or failed: see .gbr/node.log)"
            for name in profile.mcp_servers
            if name not in known
        ]
        if withheld:
            lines.append(f"{DIM}withheld:{RESET}")
            lines += [f"{DIM}  {one_line(line)}{RESET}" for line in withheld]
        return lines
