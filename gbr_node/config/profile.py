"""Environment profile models (UBQ-AI-02): pure, frozen, `extra="forbid"`.

A profile is `.gbr_envs/NAME.toml`. These models only validate values (`[node]` and
`[peers]` are `config.network`'s, their patterns `config.patterns`'); reading
the file, resolving `allowed_root` against the project folder and turning
pydantic errors into `ProfileError`s with file/line/key is `config.loader`'s job.

Shape (every key optional; defaults below):

    system_prompt = "..."              # or system_prompt_file = "prompts/agent.md"
    allowed_root = "."                 # relative to the folder holding .gbr_envs/
    protected_files = ["pyproject.toml", "*.lock"]   # globs, root-relative
    [tools]      enabled, read_max_bytes, [tools.run_command] ...
    max_steps = 25                     # model requests per turn (default: 8 for small models)
    [model]      base_url, model, api_key_env, temperature, headers, stream_tools,
                 context_tokens, prices
    [local]      model (the embedded model to run when nothing else is configured)
    [node]       listen multiaddrs, RPC limits, announce, relays, relay role, mdns
    [peers.ALIAS] peer_id, addrs, tools, chat ("off" | "show" | "reply")
    [chat]       limits of agent-to-agent messages (/gbr/chat/1.0.0)
    [mcp_servers.NAME] command (argv) and env, or url; tools; timeout_s
    [watch]      poll_interval_s
    [library]    environments, sources, prelookup, context_tokens
    [checks.NAME] files, formatter, formatter_mode, check, timeout_s, max_retries
    [checks]     builtin = true (the built-in parse check of .py/.json/.toml/.ini writes)
"""

from __future__ import annotations

import shlex
from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema, field_validator, model_validator

from gbr_node.config.network import Frozen, NodeConfig, PeerAlias, TrustedPeer
from gbr_node.config.patterns import ABSOLUTE_PATH, LOOPBACK_URL, MCP_SERVER_NAME, TABLE_NAME
from gbr_node.sandbox.protected import glob_to_regex

DEFAULT_SYSTEM_PROMPT = (
    "You are gbr-node's agent, a careful software engineer working inside a sandboxed "
    "project folder. Requests are about the project's own files unless they say otherwise. "
    "Do the work with the tools, not in words: read a file before you change it, change it "
    "with edit_file (old_string copied exactly from what you read) or create one with "
    "write_file, keep changes small, and never say you changed something you did not. When "
    "a call fails, correct it and call again. Then say plainly what you did."
)

ALL_LOCAL_TOOLS = (
    "read_file",
    "write_file",
    "edit_file",
    "move_path",
    "delete_path",
    "list_dir",
    "search_text",
    "run_command",
    "search_library",
    "read_library",
)


MCP_SERVER_NAME_MAX = 32
"""Most characters of an `[mcp_servers.NAME]` name (`patterns.MCP_SERVER_NAME`)."""


class CommandRule(Frozen):
    """One allow-list entry of `run_command`.

    `name` is what the model puts in argv[0] (a bare program name such as
    "git"). `path` pins the executable; when omitted it is looked up on PATH
    once, when the profile loads. `subcommands`, when given, lists the only
    values the subcommand may take: argv[1], or for git the first argument
    after its global options (`git -C sub status` runs `status`). `deny_args`
    are arguments refused in argv[1:] up to `--` (after it come operands),
    matched exactly or as a prefix (`"-c"` also refuses `-cfoo`, `"--exec"`
    also refuses `--exec=...`), and a long option also in any abbreviation
    (`"--output"` refuses `--outp`).
    """

    name: Annotated[str, Field(min_length=1, pattern=r"^[^/\\\x00]+$")]
    path: str | None = None
    subcommands: tuple[str, ...] | None = None
    deny_args: tuple[str, ...] = ()


class RunCommandConfig(Frozen):
    """`[tools.run_command]`: allow-list, time limit (seconds), output cap (bytes), and
    the OS confinement of commands (GBR-CONF-01).

    `confine`: "auto" confines commands where the OS can and otherwise runs
    them unconfined, saying so; "required" refuses to run a command it cannot
    confine; "off" never confines. `network`: commands may open network
    connections. `read_paths`: extra folders or files commands may read and
    execute (`~` allowed). `secret_paths`: paths commands may never read, on
    top of the built-in list (globs, `~` allowed).
    """

    allow: tuple[CommandRule, ...] = ()
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    max_output_bytes: Annotated[int, Field(gt=0, le=64 * 1024 * 1024)] = 64 * 1024
    confine: Literal["auto", "required", "off"] = "auto"
    network: bool = False
    read_paths: tuple[Annotated[str, Field(pattern=ABSOLUTE_PATH)], ...] = ()
    secret_paths: tuple[Annotated[str, Field(pattern=ABSOLUTE_PATH)], ...] = ()

    @field_validator("allow", mode="before")
    @classmethod
    def _strings_are_rules(cls, value: object) -> object:
        if isinstance(value, list | tuple):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value


class ToolsConfig(Frozen):
    """`[tools]`: which local tools exist and their limits.

    `allow_hardlinks = true` lets the tools read a regular file that has more
    than one hard link; by default such a file is refused, since its other
    name may be a file outside the root (issue 12, "Paths").
    """

    enabled: tuple[str, ...] | Literal["*"] = "*"
    read_max_bytes: Annotated[int, Field(gt=0, le=256 * 1024 * 1024)] = 1024 * 1024
    allow_hardlinks: bool = False
    run_command: RunCommandConfig = RunCommandConfig()

    @field_validator("enabled")
    @classmethod
    def _known_tools(cls, value: tuple[str, ...] | Literal["*"]) -> tuple[str, ...] | Literal["*"]:
        if value == "*":
            return value
        unknown = [name for name in value if name not in ALL_LOCAL_TOOLS]
        if unknown:
            raise ValueError(
                f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(ALL_LOCAL_TOOLS)}"
            )
        return value

    def is_enabled(self, name: str) -> bool:
        """True when tool `name` is enabled by this profile."""
        return self.enabled == "*" or name in self.enabled


class ModelConfig(Frozen):
    """`[model]`: an OpenAI-compatible chat-completions endpoint.

    `api_key_env` names the environment variable that holds the key; the key
    itself never appears in a profile. `stream_tools = false` sends requests
    that carry tools without streaming (for servers that cannot stream them).
    `context_tokens` is the model's context window in tokens; unset, the node
    asks the server and else assumes a conservative size (GBR-CTX-01).
    `input_price_per_mtok` / `output_price_per_mtok`: US dollars per million
    prompt / completion tokens, for the cost in the REPL's `/usage`.
    """

    base_url: str | None = None
    model: str | None = None
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = "OPENAI_API_KEY"
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    headers: dict[str, str] = {}
    stream_tools: bool = True
    context_tokens: Annotated[int, Field(ge=512, le=100_000_000)] | None = None
    input_price_per_mtok: Annotated[float, Field(ge=0)] | None = None
    output_price_per_mtok: Annotated[float, Field(ge=0)] | None = None


class LocalConfig(Frozen):
    """`[local]`: which embedded model `gbr-node run` starts when nothing else is configured.
    None (not set): Qwen2.5-Coder-1.5B, or SmolLM2-135M when less than 3 GB of memory is
    free (`llm.local.pick_local_model`)."""

    model: Literal["qwen2.5-coder-1.5b", "smollm2-135m", "gemma3-270m"] | None = None


class McpServerConfig(Frozen):
    """`[mcp_servers.NAME]`: an MCP server the node starts (or reaches) and offers as tools.

    Either `command` (argv of a stdio server, started as the node's child in
    `allowed_root`, with `env` added to a minimal environment) or `url` (a
    streamable-HTTP server on loopback). `tools` picks which of its tools to
    take (default all); `timeout_s` bounds one call (seconds). The server runs
    with the person's rights, outside the sandbox (GBR-MCP-01).
    """

    command: (
        Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1)] | None
    ) = None
    env: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str] = {}
    url: Annotated[str, Field(pattern=LOOPBACK_URL)] | None = None
    tools: tuple[Annotated[str, Field(min_length=1)], ...] | Literal["*"] = "*"
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server's argv) or url, not both")
        if self.url is not None and self.env:
            raise ValueError("env applies to a command the node starts, not to a url")
        return self

    def takes(self, tool: str) -> bool:
        """True when the server's tool `tool` is to be offered (`tools` is "*" or names it)."""
        return self.tools == "*" or tool in self.tools


class ChatConfig(Frozen):
    """`[chat]`: limits of agent-to-agent messages (`/gbr/chat/1.0.0`, EVD-AI-02).

    `max_message_bytes`: cap on one message frame (bytes); a bigger one is
    refused "too_big" as soon as its length prefix is read. `messages_per_minute`:
    messages accepted from one peer in any 60 s window; more are refused
    "too_fast". `inbox_max_per_peer`: messages kept from one peer; more are
    refused "inbox_full" until the person clears the inbox. `replies_per_thread`:
    answers this node's agent sends in one thread (`chat = "reply"`) before the
    person must step in (a `/msg` of theirs in the thread starts the count
    again), so two agents on "reply" cannot loop forever. `ttl_s`: how long an
    outgoing message is retried before it is reported expired (seconds).
    `reply_system_prompt`: what the agent answering peers is told about this
    node, after the node's own frame; the profile's `system_prompt` (which may
    hold what only the person should know) is never given to it.
    """

    max_message_bytes: Annotated[int, Field(ge=1024, le=4 * 1024 * 1024)] = 64 * 1024
    messages_per_minute: Annotated[int, Field(ge=1, le=100_000)] = 60
    inbox_max_per_peer: Annotated[int, Field(ge=1, le=10_000_000)] = 10_000
    replies_per_thread: Annotated[int, Field(ge=0, le=1000)] = 5
    ttl_s: Annotated[float, Field(gt=0, le=30 * 86400)] = 86400.0
    reply_system_prompt: str = ""


class WatchConfig(Frozen):
    """`[watch]`: hot-reload polling (ADR-0012a); interval in seconds."""

    poll_interval_s: Annotated[float, Field(gt=0, le=3600)] = 2.0


class LibraryConfig(Frozen):
    """`[library]`: the library lookup (issue 18, STD-AI-01).

    `environments` are Python environments whose installed distributions are
    indexed: virtual environment folders, site-packages folders or
    interpreters, relative to the project folder; None means the project's
    `.venv` if it has one, else the node's own interpreter. `sources` are
    extra folders of plain-text packages (Gleam's `build/packages`,
    `node_modules`). `prelookup` looks the library up before the first
    inference when a message names an installed package; `context_tokens`
    bounds what that adds to the request (estimated tokens).
    """

    environments: tuple[Annotated[str, Field(min_length=1)], ...] | None = None
    sources: tuple[Annotated[str, Field(min_length=1)], ...] = ()
    prelookup: bool = True
    context_tokens: Annotated[int, Field(ge=100, le=32000)] = 1500


PATH_PLACEHOLDER = "{path}"
"""Stands for the root-relative path of the file in a check set's commands."""


def _command(value: object, key: str) -> object:
    """A command given as one string (split like a shell would, without running one)
    or as a list of strings, as a tuple of arguments."""
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"{key}: cannot split the command ({exc})") from exc
        if not value:
            raise ValueError(f"{key}: the command is empty")
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError(f"{key}: the command is empty")
        if not all(isinstance(arg, str) and arg and "\x00" not in arg for arg in value):
            raise ValueError(f"{key}: every argument must be a non-empty string")
        return tuple(value)
    return value


Command = Annotated[
    tuple[str, ...],
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
]
"""A program and its arguments: one string split like a shell would, or a list."""


class CheckSet(Frozen):
    """`[checks.NAME]`: format on save and the check of one set of files (UBQ-DEV-02,
    UNW-AI-01 / STD-DEV-01). NAME is what the status lines say (`check NAME ok`).

    `files`: root-relative globs of the files the set covers (as in
    `protected_files`: `**/*.py` is any depth). `formatter`: the command
    that formats one file; with `formatter_mode = "stdin"` it reads the content
    on stdin and prints the formatted text (`ruff format --stdin-filename
    {path} -`), with "in_place" it rewrites the file `{path}` names (the node
    gives it a copy next to the file, never the file itself). `check`: the
    command that checks the code, per file when it holds `{path}` (`ruff check
    --quiet --output-format concise {path}`), else once for the project
    (`cargo check --message-format short`); exit status 0 means no errors.
    Commands are a string (split like a shell would, nothing expanded) or a list
    of arguments; the program is looked up on PATH once, when the profile
    loads (a path in argv[0] pins it; a relative one is taken from the root).
    `timeout_s`: time limit of one formatter or check run, in seconds.
    `max_retries`: how many times a turn's new errors are sent back to the model.
    """

    files: tuple[Annotated[str, Field(min_length=1)], ...] = Field(min_length=1)
    formatter: Command | None = None
    formatter_mode: Literal["stdin", "in_place"] = "stdin"
    check: Command | None = None
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    max_retries: Annotated[int, Field(ge=0, le=20)] = 3

    @field_validator("files")
    @classmethod
    def _globs_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            names = [n for n in pattern.split("/") if n not in ("", ".")]
            if not names or ".." in names:
                raise ValueError(f"{pattern!r} is not a root-relative glob (empty, or has '..')")
            glob_to_regex(pattern)
        return value

    @field_validator("formatter", "check", mode="before")
    @classmethod
    def _split_command(cls, value: object, info: object) -> object:
        return _command(value, getattr(info, "field_name", "command"))

    @model_validator(mode="after")
    def _in_place_names_the_file(self) -> CheckSet:
        if (
            self.formatter is not None
            and self.formatter_mode == "in_place"
            and not any(PATH_PLACEHOLDER in arg for arg in self.formatter)
        ):
            raise ValueError('formatter_mode = "in_place" needs {path} in the formatter command')
        return self

    @property
    def per_file(self) -> bool:
        """True when the check runs once per changed file (its command holds `{path}`)."""
        return self.check is not None and any(PATH_PLACEHOLDER in arg for arg in self.check)


class Profile(Frozen):
    """A whole environment profile, as validated from one TOML document."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    system_prompt_file: str | None = None
    max_steps: Annotated[int, Field(ge=1, le=1000)] | None = None
    allowed_root: Annotated[str, Field(min_length=1)] = "."
    protected_files: tuple[str, ...] = ()

    @field_validator("protected_files")
    @classmethod
    def _patterns_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            glob_to_regex(pattern)  # ValueError names the pattern
        return value

    tools: ToolsConfig = ToolsConfig()
    model: ModelConfig = ModelConfig()
    local: LocalConfig = LocalConfig()
    node: NodeConfig = NodeConfig()
    peers: dict[PeerAlias, TrustedPeer] = {}
    mcp_servers: dict[Annotated[str, Field(pattern=MCP_SERVER_NAME)], McpServerConfig] = {}
    chat: ChatConfig = ChatConfig()
    watch: WatchConfig = WatchConfig()
    library: LibraryConfig = LibraryConfig()
    checks: dict[Annotated[str, Field(pattern=TABLE_NAME)], CheckSet] = {}
    builtin_checks: bool = True
    """`[checks] builtin`: whether write_file and edit_file report a .py, .json, .toml
    or .ini file they leave unparsable as an error (`checks.builtin`, GBR-TRUTH-01)."""

    @model_validator(mode="before")
    @classmethod
    def _builtin_switch(cls, data: object) -> object:
        # `[checks] builtin = false` shares its table with the `[checks.NAME]` sets: it
        # is taken out here, so `checks` stays a table of sets and a misspelt key in
        # it is still an error (a set named `builtin` cannot exist).
        if not isinstance(data, dict) or not isinstance(data.get("checks"), dict):
            return data
        checks = dict(data["checks"])
        if "builtin" not in checks:
            return data
        switch = checks.pop("builtin")
        if not isinstance(switch, bool):
            raise ValueError("[checks] builtin must be true or false")
        if "builtin_checks" in data:
            raise ValueError("give [checks] builtin, not builtin_checks")
        return {**data, "checks": checks, "builtin_checks": switch}

    @field_validator("mcp_servers")
    @classmethod
    def _short_names(cls, value: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in value:
            if len(name) > MCP_SERVER_NAME_MAX:
                raise ValueError(
                    f"[mcp_servers.{name}]: a name has at most {MCP_SERVER_NAME_MAX} characters"
                )
        return value

    @model_validator(mode="after")
    def _mounts_apart_from_peers(self) -> Profile:
        # Both are called NAME__TOOL: one name for both would make a call ambiguous.
        shared = sorted(set(self.mcp_servers) & set(self.peers))
        if shared:
            raise ValueError(
                f"{', '.join(shared)} is both an [mcp_servers] and a [peers] name; their tools "
                "are both called NAME__TOOL, so rename one"
            )
        return self
