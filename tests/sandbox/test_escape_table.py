"""Table-driven escape cases for the pure path policy, all three flavours on Linux.

UBQ-AI-01 (flavours by pure logic), UBQ-DEV-01 (component-wise containment),
UNW-DEV-01 (`..` refused lexically, before any filesystem call). Each case:
setup (flavour and root), input path, expected outcome (the names below the
root, or a fragment of the refusal reason).
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from gbr_node.errors import SecurityViolation
from gbr_node.sandbox import MACOS, POSIX, WINDOWS, Flavour, PathPolicy, detect_flavour


class Case(NamedTuple):
    flavour: Flavour
    root: str
    path: str
    expected: tuple[str, ...] | str  # names when accepted, reason fragment when refused


P, PR = POSIX, "/srv/app"
M, MR = MACOS, "/Users/me/proj"
W, WR = WINDOWS, "C:\\code\\proj"
UNC = "\\\\srv\\share\\proj"
CLIMB, OUTSIDE = "climbs above", "outside the allowed root"

CASES = [
    # POSIX: case-sensitive, "/" only
    Case(P, PR, "a/b/c.txt", ("a", "b", "c.txt")),
    Case(P, PR, ".", ()),
    Case(P, PR, "./a/./b/", ("a", "b")),
    Case(P, PR, "a//b", ("a", "b")),
    Case(P, PR, "a/../b", ("b",)),
    Case(P, PR, "..", CLIMB),
    Case(P, PR, "../app/x", CLIMB),
    Case(P, PR, "a/../../x", CLIMB),
    Case(P, PR, "a/b/../../..", CLIMB),
    Case(P, PR, "/srv/app/x", ("x",)),
    Case(P, PR, "/srv/app", ()),
    Case(P, PR, "/srv/app/", ()),
    Case(P, PR, "//srv/./app/x", ("x",)),
    Case(P, PR, "/srv/app-evil/x", OUTSIDE),
    Case(P, PR, "/srv/ap", OUTSIDE),
    Case(P, PR, "/srv", OUTSIDE),
    Case(P, PR, "/", OUTSIDE),
    Case(P, PR, "/etc/passwd", OUTSIDE),
    Case(P, PR, "/srv/app/../app/x", CLIMB),
    Case(P, PR, "/srv/other/../app/x", OUTSIDE),
    Case(P, PR, "/SRV/APP/x", OUTSIDE),
    Case(P, PR, "", "empty path"),
    Case(P, PR, "a\x00/../../etc", "NUL byte"),
    Case(P, PR, "a/\ud800", "not valid Unicode"),
    Case(P, PR, "n" * 256, "name longer than 255 bytes"),
    Case(P, PR, "é" * 128, "name longer than 255 bytes"),
    Case(P, PR, "a/" * 2100, "path longer than 4096 bytes"),
    Case(P, PR, "a\\..\\..\\x", ("a\\..\\..\\x",)),
    Case(P, PR, "C:/x", ("C:", "x")),
    Case(P, PR, "~/x", ("~", "x")),
    Case(P, PR, "...", ("...",)),
    Case(P, PR, "nul.txt", ("nul.txt",)),
    Case(P, PR, "PROGRA~1/x", ("PROGRA~1", "x")),
    # macOS: case-insensitive, Unicode-normalising
    Case(M, MR, "/users/ME/Proj/a", ("a",)),
    Case(M, MR, "/Users/me/proj-evil/a", OUTSIDE),
    Case(M, MR, "../proj/a", CLIMB),
    Case(M, MR, "a/B/../../..", CLIMB),
    Case(M, "/Users/me/caf\u00e9", "/Users/me/cafe\u0301/x", ("x",)),
    Case(M, MR, "/Users/me/pro\u200cj/a", ("a",)),
    Case(M, MR, "a\\b", ("a\\b",)),
    Case(M, MR, "a/" * 520, "path longer than 1024 bytes"),
    Case(M, MR, "/Users/me/proj/../../me/proj/x", CLIMB),
    # Windows: case-insensitive, "\\" and "/", drives, UNC, device names
    Case(W, WR, "src\\main.py", ("src", "main.py")),
    Case(W, WR, "src/main.py", ("src", "main.py")),
    Case(W, WR, "c:\\CODE\\Proj\\x", ("x",)),
    Case(W, WR, "C:/code/proj/x", ("x",)),
    Case(W, WR, "C:\\code\\proj-evil\\x", OUTSIDE),
    Case(W, WR, "D:\\code\\proj\\x", OUTSIDE),
    Case(W, WR, "\\code\\proj\\x", OUTSIDE),
    Case(W, WR, "\\\\server\\share\\x", OUTSIDE),
    Case(W, WR, "C:x", "drive-relative"),
    Case(W, WR, "C:", "drive-relative"),
    Case(W, WR, "..\\proj\\x", CLIMB),
    Case(W, WR, "a\\..\\..\\x", CLIMB),
    Case(W, WR, "a/..\\../x", CLIMB),
    Case(W, WR, "\\\\?\\C:\\code\\proj\\x", "verbatim or device"),
    Case(W, WR, "//?/C:/code/proj/x", "verbatim or device"),
    Case(W, WR, "\\\\.\\PhysicalDrive0", "verbatim or device"),
    Case(W, WR, "\\??\\C:\\code\\proj\\x", "verbatim or device"),
    Case(W, WR, "\\\\server", "UNC path without"),
    Case(W, WR, "CON", "reserved Windows device"),
    Case(W, WR, "nul.txt", "reserved Windows device"),
    Case(W, WR, "src\\com1.log", "reserved Windows device"),
    Case(W, WR, "NUL .tar.gz", "reserved Windows device"),
    Case(W, WR, "lpt\u00b9", "reserved Windows device"),
    Case(W, WR, "conin$", "reserved Windows device"),
    Case(W, WR, "file.", "ending in a dot or a space"),
    Case(W, WR, "file ", "ending in a dot or a space"),
    Case(W, WR, ".git.\\config", "ending in a dot or a space"),
    Case(W, WR, "...", "ending in a dot or a space"),
    Case(W, WR, "file.txt:secret", "alternate data stream"),
    Case(W, WR, "file.txt::$DATA", "alternate data stream"),
    Case(W, WR, "a\\C:x", "alternate data stream"),
    Case(W, WR, "PROGRA~1\\x", "8.3 short name"),
    Case(W, WR, "docum~12.txt", "8.3 short name"),
    Case(W, WR, "documents~1.txt", ("documents~1.txt",)),
    Case(W, WR, "GIT~1\\hooks", "8.3 short name"),
    Case(W, WR, "a<b", "character not allowed"),
    Case(W, WR, "a?b", "character not allowed"),
    Case(W, WR, "a\x01b", "character not allowed"),
    Case(W, WR, "x" * 256, "name longer than 255 UTF-16 units"),
    Case(W, WR, "my~file.txt", ("my~file.txt",)),
    Case(W, WR, "connect.txt", ("connect.txt",)),
    Case(W, WR, "console\\com10", ("console", "com10")),
    Case(W, UNC, "\\\\SRV\\Share\\proj\\x", ("x",)),
    Case(W, UNC, "//srv/share/proj/a/../b", ("b",)),
    Case(W, UNC, "\\\\srv\\share\\other\\x", OUTSIDE),
    Case(W, UNC, "\\\\srv\\share-evil\\proj\\x", OUTSIDE),
]


def _case_id(case: Case) -> str:
    return f"{case.flavour.name}:{case.path[:40]!r}"


def test_table_covers_all_three_flavours_with_forty_cases_or_more():
    assert len(CASES) >= 40
    assert {c.flavour.name for c in CASES} == {"posix", "macos", "windows"}


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_escape_table(case: Case):
    policy = PathPolicy(case.root, case.flavour)
    if isinstance(case.expected, tuple):
        assert policy.relative_parts(case.path) == case.expected
    else:
        with pytest.raises(SecurityViolation) as caught:
            policy.relative_parts(case.path)
        assert case.expected in caught.value.reason
        assert caught.value.subject == case.path


def test_non_string_path_is_refused_with_its_repr():
    with pytest.raises(SecurityViolation, match="must be a string"):
        PathPolicy(PR, POSIX).relative_parts(b"a/b")


def test_relative_root_is_refused_at_construction():
    with pytest.raises(ValueError, match="absolute"):
        PathPolicy("srv/app", POSIX)
    with pytest.raises(ValueError, match="absolute"):
        PathPolicy("code\\proj", WINDOWS)


def test_root_plus_names_over_the_limit_is_refused_even_when_the_input_is_short():
    deep_root = "/" + "/".join(["d" * 200] * 19)  # 3819 bytes
    policy = PathPolicy(deep_root, POSIX)
    assert policy.relative_parts("x" * 200) == ("x" * 200,)
    with pytest.raises(SecurityViolation, match="4096 bytes"):
        policy.relative_parts("x" * 200 + "/" + "y" * 200)


def test_case_sensitive_macos_still_folds_unicode_forms_but_not_case():
    policy = PathPolicy("/Volumes/cs/caf\u00e9", MACOS.with_case_sensitive(True))
    assert policy.relative_parts("/Volumes/cs/cafe\u0301/x") == ("x",)
    with pytest.raises(SecurityViolation, match=OUTSIDE):
        policy.relative_parts("/volumes/cs/caf\u00e9/x")


def test_case_insensitive_posix_flavour_compares_root_names_casefolded():
    policy = PathPolicy("/srv/App", POSIX.with_case_sensitive(False))
    assert policy.relative_parts("/SRV/app/Stra\u00dfe") == ("Stra\u00dfe",)


@pytest.mark.parametrize(
    ("platform", "os_name", "expected"),
    [("win32", "nt", WINDOWS), ("darwin", "posix", MACOS), ("linux", "posix", POSIX)],
)
def test_flavour_is_detected_from_the_platform(platform, os_name, expected):
    assert detect_flavour(platform, os_name) is expected
