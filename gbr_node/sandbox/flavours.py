"""Path flavours per operating system (UBQ-AI-01): pure, no filesystem calls.

A `Flavour` knows how one OS spells a path: its separators and anchors
(`/`, `C:\\`, `\\\\server\\share`), which single names it refuses, how long a
path may be, and the comparison key that tells whether two names denote the
same directory entry (case folding, Unicode normalisation).

    POSIX    Linux and other Unixes: `/` only, case-sensitive, names compared
             byte for byte; PATH_MAX 4096 bytes, NAME_MAX 255 bytes (UTF-8).
    MACOS    `/` only, case-insensitive by default (APFS/HFS+), names compared
             after Unicode NFD and without the code points HFS+ ignores
             (the git CVE-2014-9390 `.g\\u200cit` trick); PATH_MAX 1024 bytes.
    WINDOWS  `\\` and `/`, case-insensitive, drive letters and UNC shares;
             refuses drive-relative `C:x`, verbatim and device prefixes
             (`\\\\?\\`, `\\\\.\\`, `\\??\\`), reserved device names (`CON`,
             `nul.txt`), trailing dots and spaces, alternate data streams
             (`name:stream`), 8.3 short names (`PROGRA~1`) and the characters
             `<>"|?*` and controls; 32767 UTF-16 units, 255 per name.

The flavour is chosen by `detect_flavour()` from `sys.platform` / `os.name`
(the seeds' `os:type()`), and is injectable so that every flavour is tested
on Linux. Refusals raise `SecurityViolation(reason, subject)`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import unicodedata
from dataclasses import dataclass
from typing import ClassVar

from gbr_node.errors import SecurityViolation

# Code points HFS+ ignores when comparing names (Apple TN1150; git's is_hfs_dotgit).
_HFS_IGNORABLE = dict.fromkeys(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)
_WINDOWS_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
    + [f"{dev}{n}" for dev in ("COM", "LPT") for n in "0123456789\u00b9\u00b2\u00b3"]
)
_WINDOWS_BAD_CHARS = re.compile(r'[<>"|?*\x01-\x1f]')
_SHORT_NAME = re.compile(r"[^.~]{1,6}~[0-9]+(?:\.[^.]{1,3})?")
_VERBATIM_PREFIXES = ("\\\\?\\", "\\\\.\\", "\\??\\")


@dataclass(frozen=True)
class Flavour:
    """How one OS spells and compares paths (UBQ-AI-01). Immutable.

    Attributes: `name` ("posix", "macos" or "windows"); `case_sensitive`,
    the flavour's guess, which `Sandbox` may replace with a probe of the real
    filesystem through `with_case_sensitive`.
    """

    name: str
    case_sensitive: bool

    max_path: ClassVar[int] = 4096
    max_name: ClassVar[int] = 255
    length_unit: ClassVar[str] = "bytes"

    def with_case_sensitive(self, case_sensitive: bool) -> Flavour:
        """The same flavour with another case rule (after a real probe)."""
        return dataclasses.replace(self, case_sensitive=case_sensitive)

    def length(self, text: str) -> int:
        """Length of `text` in this flavour's unit (UTF-8 bytes here)."""
        return len(text.encode("utf-8"))

    def split(self, path: str) -> tuple[str | None, list[str]]:
        """Split `path` into (anchor, raw names); anchor is None when relative.

        Names may still be "", "." or ".."; the policy folds those. Raises
        SecurityViolation for spellings the flavour refuses outright.
        """
        if path.startswith("/"):
            return "/", path.split("/")
        return None, path.split("/")

    def check_name(self, name: str, subject: str) -> None:
        """Refuse one path name (never "", "." or "..") this flavour cannot hold safely.

        Raises SecurityViolation naming the rule and the whole `subject` path.
        """
        if len(name) * 4 > self.max_name and self.length(name) > self.max_name:
            raise SecurityViolation(
                f"path name longer than {self.max_name} {self.length_unit}", subject
            )

    def key(self, name: str) -> str:
        """Comparison key: two names with equal keys denote the same entry."""
        if self.case_sensitive:
            return name
        if name.isascii():
            return name.lower()
        return unicodedata.normalize("NFD", name.casefold())


@dataclass(frozen=True)
class PosixFlavour(Flavour):
    """Linux and other Unixes: `/` only, case-sensitive by default."""


@dataclass(frozen=True)
class MacFlavour(Flavour):
    """macOS: `/` only, case-insensitive by default, Unicode-normalising."""

    max_path: ClassVar[int] = 1024

    def key(self, name: str) -> str:
        """NFD form without HFS+-ignorable code points; case-folded unless case-sensitive."""
        if name.isascii():
            return name if self.case_sensitive else name.lower()
        folded = unicodedata.normalize("NFD", name).translate(_HFS_IGNORABLE)
        if self.case_sensitive:
            return folded
        return unicodedata.normalize("NFD", folded.casefold())


@dataclass(frozen=True)
class WindowsFlavour(Flavour):
    """Windows (Win32 path rules): `\\` and `/`, drives, UNC, case-insensitive."""

    max_path: ClassVar[int] = 32767
    length_unit: ClassVar[str] = "UTF-16 units"

    def length(self, text: str) -> int:
        """Length of `text` in UTF-16 code units."""
        return len(text.encode("utf-16-le")) // 2

    def split(self, path: str) -> tuple[str | None, list[str]]:
        """Anchors: `C:\\`, `\\\\server\\share`, or `\\` (rooted, drive-less).

        Raises SecurityViolation for verbatim/device prefixes, drive-relative
        paths (`C:x`, `C:`) and UNC paths without a share.
        """
        text = path.replace("/", "\\")
        if text.startswith(_VERBATIM_PREFIXES):
            raise SecurityViolation(
                "verbatim or device path prefix (\\\\?\\, \\\\.\\, \\??\\) refused", path
            )
        if text.startswith("\\\\"):
            server, _, rest = text[2:].partition("\\")
            share, _, rest = rest.partition("\\")
            if not server or not share:
                raise SecurityViolation("UNC path without a server and a share", path)
            return f"\\\\{server}\\{share}", rest.split("\\")
        if len(text) >= 2 and text[1] == ":" and text[0].isascii() and text[0].isalpha():
            if text[2:3] != "\\":
                raise SecurityViolation("drive-relative path (C:x) refused", path)
            return text[:3], text[3:].split("\\")
        if text.startswith("\\"):
            return "\\", text.split("\\")
        return None, text.split("\\")

    def check_name(self, name: str, subject: str) -> None:
        """Refuse streams, bad characters, trailing dots/spaces, devices, 8.3 names.

        Rules from Microsoft's "Naming Files, Paths, and Namespaces".
        """
        super().check_name(name, subject)
        if ":" in name:
            raise SecurityViolation("alternate data stream (name:stream) refused", subject)
        if _WINDOWS_BAD_CHARS.search(name):
            raise SecurityViolation("character not allowed in a Windows name", subject)
        if name[-1] in ". ":
            raise SecurityViolation("Windows name ending in a dot or a space refused", subject)
        if name.split(".", 1)[0].rstrip(" ").upper() in _WINDOWS_RESERVED:
            raise SecurityViolation("reserved Windows device name refused", subject)
        if "~" in name and _SHORT_NAME.fullmatch(name) and len(name.split(".", 1)[0]) <= 8:
            raise SecurityViolation("8.3 short name (PROGRA~1) refused", subject)


POSIX = PosixFlavour("posix", case_sensitive=True)
MACOS = MacFlavour("macos", case_sensitive=False)
WINDOWS = WindowsFlavour("windows", case_sensitive=False)


def detect_flavour(platform: str = sys.platform, os_name: str = os.name) -> Flavour:
    """The flavour of the running OS (UBQ-AI-01): "win32"/"nt" → WINDOWS,
    "darwin" → MACOS, anything else → POSIX. Arguments default to this process's.
    """
    if platform == "win32" or os_name == "nt":
        return WINDOWS
    if platform == "darwin":
        return MACOS
    return POSIX
