"""What no tool may reach: the node's own state and the person's secrets (GBR-PRIV-01) [pure].

One rule for every tool, local or a peer's, and for the commands the node
starts (`confine.policy` takes its secret list from here):

- private to everyone who calls a tool (the local model, a peer, an MCP
  client, `gbr-node tool`): the node's state folder `.gbr/` (journals, logs,
  approval, chat, library and checkpoint stores), the identity key and
  gbr-node's config folder, the built-in secrets of the home folder
  (`HOME_SECRETS`) and of the system (`SYSTEM_SECRETS`), and the profile's
  `secret_paths`. Reading, listing, searching and changing them is refused
  outright (never turned into an approval);
- private to callers from elsewhere (a peer, an MCP client) only: the
  profiles (`.gbr_envs/`) and every file the active profile was read from.
  The local agent may read them; its writes there stay approvals.

Patterns are absolute globs (`*`, `?`, `[...]`, `**` as in `protected.py`);
a pattern hides what it matches and everything below it. Matching goes
through the flavour's key, so `.GBR/x` is `.gbr/x` on a case-insensitive
filesystem. No I/O here: `Sandbox` resolves the paths and the patterns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gbr_node.sandbox.flavours import Flavour, WindowsFlavour
from gbr_node.sandbox.protected import glob_to_regex

NODE_STATE = ".gbr"
"""The node's own state inside the project folder (and the root): private to all."""
PROFILE_DIR = ".gbr_envs"
"""The profiles: private to peers and MCP clients."""
CONFIG_DIR = "gbr-node"
"""gbr-node's folder under `$XDG_CONFIG_HOME` (or `~/.config`): the identity key."""

SYSTEM_SECRETS = (
    "/etc/shadow*",
    "/etc/gshadow*",
    "/etc/sudoers*",
    "/etc/ssh/ssh_host_*key",
    "/etc/ssl/private",
    "/etc/security/opasswd",
    "/etc/krb5.keytab",
    "/etc/credstore*",
    "/etc/NetworkManager/system-connections",
    "/etc/wireguard",
    "/etc/ipsec.secrets",
    "/etc/ppp/*-secrets",
)
"""System secrets: never readable by a tool or a command (absolute globs)."""

HOME_SECRETS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config",
    ".gnupg",
    ".docker",
    ".kube",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".password-store",
    ".local/share/keyrings",
    "Library/Keychains",
)
"""Home-relative secrets: `.config` holds gbr-node's identity key and most programs'
tokens (gh, gcloud, ...). They matter where the root is, or holds, the home folder;
such a root is accepted, with these still closed (docs/guide/sandbox.md)."""

PRIVATE = "is the node's own state or one of the person's secrets, never reached by a tool"
_DRIVE = re.compile(r"[A-Za-z]:/")
PEER_PRIVATE = "is a profile of this node, never reached by a peer or an MCP client"


def absolute_glob_regex(pattern: str, flavour: Flavour) -> str:
    """Regex source (no anchors) for an absolute glob `pattern` (`/...`, or `C:/...` on
    WINDOWS), matching the keyed form (`flavour.key`) of an absolute path written with
    `/`. Raises ValueError for a pattern that is not absolute or that `glob_to_regex`
    refuses (`..` in it)."""
    windows = isinstance(flavour, WindowsFlavour)
    text = pattern.replace("\\", "/") if windows else pattern
    if text.startswith("/"):
        head, rest = "", text[1:]
    elif windows and _DRIVE.match(text):
        head, rest = text[:2], text[3:]
    else:
        raise ValueError(f"private pattern must be absolute: {pattern!r}")
    body = glob_to_regex(flavour.key(rest)) if rest.strip("/") else ""
    return re.escape(flavour.key(head)) + "/" + body


class PrivateMatcher:
    """Tells whether an absolute path is private, and to whom (GBR-PRIV-01).

    `everyone`: absolute globs private to every caller; `remote`: absolute
    globs private to peers and MCP clients only. Raises ValueError naming a
    bad pattern.
    """

    def __init__(self, everyone: Iterable[str], remote: Iterable[str], flavour: Flavour) -> None:
        self.flavour = flavour
        self.everyone = tuple(dict.fromkeys(everyone))
        self.remote = tuple(dict.fromkeys(remote))
        self._all = self._compile(self.everyone)
        self._remote = self._compile(self.remote)

    def _compile(self, patterns: tuple[str, ...]) -> re.Pattern[str] | None:
        if not patterns:
            return None
        sources = [absolute_glob_regex(p, self.flavour) for p in patterns]
        return re.compile(f"(?:{'|'.join(sources)})(?:/.*)?", re.DOTALL)

    def reason(self, absolute: str, *, remote: bool) -> str | None:
        """Why `absolute` (a normalised absolute path) is out of reach for a caller
        (`remote`: a peer or an MCP client), or None when it is not private."""
        text = absolute.replace("\\", "/") if isinstance(self.flavour, WindowsFlavour) else absolute
        key = self.flavour.key(text)
        if self._all is not None and self._all.fullmatch(key):
            return PRIVATE
        if remote and self._remote is not None and self._remote.fullmatch(key):
            return PEER_PRIVATE
        return None
