"""The sandbox (UBQ-AI-01, UBQ-DEV-01, UNW-DEV-01): path policy per OS flavour,
protected-file matching (both pure) and `Sandbox`, which does the filesystem side."""

from gbr_node.sandbox.flavours import MACOS, POSIX, WINDOWS, Flavour, detect_flavour
from gbr_node.sandbox.paths import PathPolicy
from gbr_node.sandbox.protected import ALWAYS_PROTECTED, ProtectedMatcher
from gbr_node.sandbox.sandbox import Resolved, Sandbox

__all__ = [
    "ALWAYS_PROTECTED",
    "MACOS",
    "POSIX",
    "WINDOWS",
    "Flavour",
    "PathPolicy",
    "ProtectedMatcher",
    "Resolved",
    "Sandbox",
    "detect_flavour",
]
