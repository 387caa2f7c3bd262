"""Protected-file matching, pure (UBQ-AI-02, EVD-AI-01; DESIGN.md security model)."""

from __future__ import annotations

import pytest

from gbr_node.sandbox import MACOS, POSIX, WINDOWS, ProtectedMatcher


@pytest.mark.parametrize(
    "relative",
    [".git", ".git/config", ".git/hooks/pre-commit", ".gbr_envs", ".gbr_envs/default.toml"],
)
def test_git_and_gbr_envs_are_protected_whatever_the_profile_says(relative):
    assert ProtectedMatcher([], POSIX).matches(relative)


@pytest.mark.parametrize("relative", [".gitignore", ".github/workflows/ci.yml", "a/.git", "x.git"])
def test_names_that_merely_start_like_git_are_not_protected(relative):
    assert not ProtectedMatcher([], POSIX).matches(relative)


def test_patterns_are_anchored_at_the_root():
    matcher = ProtectedMatcher(["pyproject.toml", "*.lock"], POSIX)
    assert matcher.matches("pyproject.toml")
    assert matcher.matches("poetry.lock")
    assert not matcher.matches("sub/pyproject.toml")
    assert not matcher.matches("sub/poetry.lock")


def test_double_star_matches_zero_or_more_names():
    matcher = ProtectedMatcher(["**/*.lock", "docs/**/conf.py", "build/**"], POSIX)
    assert matcher.matches("poetry.lock")
    assert matcher.matches("a/b/c/uv.lock")
    assert matcher.matches("docs/conf.py")
    assert matcher.matches("docs/en/source/conf.py")
    assert not matcher.matches("docs/en/source/conf.pyc")
    assert matcher.matches("build")
    assert matcher.matches("build/out/x.o")
    assert not matcher.matches("builder/x")


def test_a_protected_folder_protects_everything_below_it():
    matcher = ProtectedMatcher(["secrets"], POSIX)
    assert matcher.matches("secrets/deploy/key.pem")
    assert not matcher.matches("secrets.txt")


def test_single_star_and_question_mark_stay_inside_one_name():
    matcher = ProtectedMatcher(["conf/*.toml", "v?.txt"], POSIX)
    assert matcher.matches("conf/app.toml")
    assert not matcher.matches("conf/sub/app.toml.bak")
    assert matcher.matches("v1.txt")
    assert not matcher.matches("v10.txt")
    assert not matcher.matches("v/.txt")


def test_character_classes_and_negated_classes():
    matcher = ProtectedMatcher(["key[0-9].pem", "[!a-c]x", "[]]y", "[z"], POSIX)
    assert matcher.matches("key7.pem")
    assert not matcher.matches("keyA.pem")
    assert matcher.matches("dx")
    assert not matcher.matches("bx")
    assert matcher.matches("]y")
    assert matcher.matches("[z")


def test_regex_metacharacters_in_patterns_are_literal():
    matcher = ProtectedMatcher(["a+b(1).txt"], POSIX)
    assert matcher.matches("a+b(1).txt")
    assert not matcher.matches("aab1.txt")


def test_case_insensitive_flavours_match_any_case_and_posix_does_not():
    for flavour in (MACOS, WINDOWS, POSIX.with_case_sensitive(False)):
        matcher = ProtectedMatcher(["pyproject.toml"], flavour)
        assert matcher.matches("PYPROJECT.TOML"), flavour
        assert matcher.matches(".GIT/HOOKS/pre-commit"), flavour
    assert not ProtectedMatcher(["pyproject.toml"], POSIX).matches("PYPROJECT.TOML")


def test_macos_matches_across_unicode_forms_and_hfs_ignorable_code_points():
    matcher = ProtectedMatcher(["caf\u00e9.toml"], MACOS)
    assert matcher.matches("cafe\u0301.toml")
    assert matcher.matches(".g\u200cit/config")
    assert not ProtectedMatcher([], POSIX).matches(".g\u200cit/config")


def test_windows_patterns_may_use_backslashes():
    assert ProtectedMatcher(["config\\*.toml"], WINDOWS).matches("Config/App.TOML")


def test_the_root_itself_is_never_a_protected_file():
    assert not ProtectedMatcher(["*", "**"], POSIX).matches(".")


@pytest.mark.parametrize("pattern", ["", "/", "./", "../x", "a/../b"])
def test_empty_patterns_and_patterns_climbing_with_dotdot_are_refused(pattern):
    with pytest.raises(ValueError, match="pattern"):
        ProtectedMatcher([pattern], POSIX)


def test_leading_dot_slash_and_trailing_slash_in_patterns_are_ignored():
    matcher = ProtectedMatcher(["./tools/", "/Makefile"], POSIX)
    assert matcher.matches("tools/run.sh")
    assert matcher.matches("Makefile")
    assert matcher.patterns[:4] == (".gbr_envs", ".gbr_envs/**", ".git", ".git/**")
