"""run_command with real processes: allow-list, argument rules, sandboxed paths,
scrubbed environment, time limit and output cap (issue 2; UBQ-DEV-01, UNW-DEV-01)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
import trio

from gbr_node.errors import InvalidArguments, SecurityViolation
from tests.tools.conftest import SYSTEM_PATH
from tests.tools.helpers import make_program, text_of, unique_nap, wait_no_process_with

ECHO_ARGS = 'for a in "$@"; do echo "arg:$a"; done'


def rule(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, **fields}


def commands(*rules: object, **limits: object) -> dict[str, object]:
    return {"run_command": {"allow": list(rules), **limits}}


def read_pid(path: Path, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n"):
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


@pytest.fixture
def echo(bin_dir):
    make_program(bin_dir, "echoargs", ECHO_ARGS)
    return f"{bin_dir}:{SYSTEM_PATH}"


def test_allowed_program_runs_in_the_root_and_reports_exit_code_and_output(make_registry, root):
    (root / "hello.txt").write_text("hi\n")
    registry = make_registry(**commands("ls"))
    result = registry.call("run_command", {"argv": ["ls"]})
    assert not result.is_error
    assert text_of(result) == "$ ls\nexit code 0\n--- stdout ---\nhello.txt\n"
    assert result.structured == {"exit_code": 0, "timed_out": False, "output_truncated": False}


def test_non_zero_exit_is_an_error_result_with_stderr(make_registry, bin_dir):
    make_program(bin_dir, "fails", "echo oops >&2; exit 3")
    registry = make_registry(search_path=str(bin_dir), **commands("fails"))
    result = registry.call("run_command", {"argv": ["fails"]})
    assert result.is_error
    assert text_of(result) == "$ fails\nexit code 3\n--- stderr ---\noops\n"


def test_program_not_on_the_allow_list_is_refused(make_registry):
    registry = make_registry(**commands("ls"))
    with pytest.raises(SecurityViolation, match="allow-list"):
        registry.call("run_command", {"argv": ["rm", "-rf", "."]})
    with pytest.raises(SecurityViolation):
        registry.call("run_command", {"argv": ["/usr/bin/ls"]})


def test_empty_argv_is_invalid(make_registry):
    with pytest.raises(InvalidArguments, match="argv"):
        make_registry(**commands("ls")).call("run_command", {"argv": []})


def test_missing_program_is_left_out_with_a_warning(make_registry, caplog):
    with caplog.at_level(logging.WARNING, logger="gbr_node.tools.commands"):
        registry = make_registry(**commands("ls", "no-such-program-xyz"))
    assert "no-such-program-xyz" in caplog.text
    with pytest.raises(SecurityViolation):
        registry.call("run_command", {"argv": ["no-such-program-xyz"]})
    assert "Allowed programs: ls." in registry.specs(["run_command"])[0]["description"]


def test_executable_planted_in_the_root_is_not_used(make_registry, root, bin_dir):
    make_program(bin_dir, "tool", "echo trusted")
    make_program(root / "bin", "tool", "echo planted")
    search_path = f"{root / 'bin'}:bin:.:{bin_dir}"
    registry = make_registry(search_path=search_path, **commands("tool"))
    assert "trusted" in text_of(registry.call("run_command", {"argv": ["tool"]}))


def test_executable_only_in_the_root_is_not_allowed_at_all(make_registry, root):
    make_program(root / "bin", "tool", "echo planted")
    registry = make_registry(search_path=str(root / "bin"), **commands("tool"))
    with pytest.raises(SecurityViolation):
        registry.call("run_command", {"argv": ["tool"]})


def test_path_change_after_build_is_not_used(make_registry, tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    make_program(first, "tool", "echo first")
    make_program(second, "tool", "echo second")
    monkeypatch.setenv("PATH", f"{first}:{SYSTEM_PATH}")
    registry = make_registry(search_path=None, **commands("tool"))
    monkeypatch.setenv("PATH", f"{second}:{SYSTEM_PATH}")
    assert "first" in text_of(registry.call("run_command", {"argv": ["tool"]}))


def test_subcommands_restrict_the_first_argument(make_registry, echo):
    registry = make_registry(search_path=echo, **commands(rule("echoargs", subcommands=["ok"])))
    assert "arg:ok" in text_of(registry.call("run_command", {"argv": ["echoargs", "ok"]}))
    for argv in (["echoargs", "push"], ["echoargs"], ["echoargs", "-x", "ok"]):
        with pytest.raises(SecurityViolation, match="subcommands"):
            registry.call("run_command", {"argv": argv})


@pytest.mark.parametrize("arg", ["-c", "-cfoo", "--exec", "--exec=x"])
def test_deny_args_refuse_exact_and_prefixed_arguments(make_registry, echo, arg):
    registry = make_registry(
        search_path=echo, **commands(rule("echoargs", deny_args=["-c", "--exec"]))
    )
    with pytest.raises(SecurityViolation, match="rule"):
        registry.call("run_command", {"argv": ["echoargs", "ok", arg]})


def test_deny_args_leave_other_arguments_alone(make_registry, echo):
    registry = make_registry(search_path=echo, **commands(rule("echoargs", deny_args=["-c"])))
    assert "arg:-x" in text_of(registry.call("run_command", {"argv": ["echoargs", "-x"]}))


def test_builtin_refusals_apply_to_a_program_by_its_name(make_registry, bin_dir):
    make_program(bin_dir, "find", ECHO_ARGS)
    registry = make_registry(search_path=str(bin_dir), **commands("find"))
    with pytest.raises(SecurityViolation, match="runs another program"):
        registry.call("run_command", {"argv": ["find", ".", "-exec", "sh", ";"]})
    assert "arg:-name" in text_of(registry.call("run_command", {"argv": ["find", "-name", "x"]}))


@pytest.mark.parametrize(
    "arg",
    [
        "/etc/passwd",
        "../outside/secret.txt",
        "sub/../../outside",
        "--file=/etc/passwd",
        "-I/etc",
        "file:///etc/passwd",
        "escape",
        "escape/secret.txt",
        "escape/../outside/secret.txt",  # the kernel follows escape, then climbs
        "escape/..",
        "--file=escape/../outside",
        # the kernel's own links to a process's root, folder and open files
        "/proc/self/root/etc/passwd",
        "/proc/self/cwd/escape/secret.txt",
        "/proc/thread-self/root/etc",
        "/dev/fd/3",
        "/dev/stdin",
    ],
)
def test_path_arguments_outside_the_root_are_refused_before_running(
    make_registry, echo, root, outside, arg
):
    (root / "sub").mkdir()
    (root / "escape").symlink_to(outside)
    registry = make_registry(search_path=echo, **commands("echoargs"))
    with pytest.raises(SecurityViolation) as caught:
        registry.call("run_command", {"argv": ["echoargs", arg]})
    assert caught.value.subject == arg


def test_path_arguments_inside_the_root_are_fine(make_registry, echo, root):
    (root / "sub").mkdir()
    (root / "a.txt").write_text("")
    registry = make_registry(search_path=echo, **commands("echoargs"))
    args = [str(root / "a.txt"), "sub/../a.txt", "--out=sub/x", "s/a/b/", "https://example.org/x"]
    text = text_of(registry.call("run_command", {"argv": ["echoargs", *args]}))
    assert all(f"arg:{a}" in text for a in args)


def test_cwd_is_inside_the_root_and_relative_paths_start_there(make_registry, echo, root):
    (root / "sub").mkdir()
    (root / "a.txt").write_text("")
    registry = make_registry(search_path=echo, **commands("echoargs", "pwd"))
    assert text_of(registry.call("run_command", {"argv": ["pwd"], "cwd": "sub"})).endswith(
        f"{root / 'sub'}\n"
    )
    registry.call("run_command", {"argv": ["echoargs", "../a.txt"], "cwd": "sub"})
    with pytest.raises(SecurityViolation):
        registry.call("run_command", {"argv": ["echoargs", "../a.txt"]})
    with pytest.raises(SecurityViolation):
        registry.call("run_command", {"argv": ["pwd"], "cwd": ".."})


def test_environment_is_scrubbed_of_secrets_and_injection_variables(make_registry, monkeypatch):
    planted = {
        "OPENAI_API_KEY": "sk-secret",
        "GITHUB_TOKEN": "ghp-secret",
        "DB_PASSWORD": "pw",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "LD_PRELOAD": "/nonexistent/evil.so",
        "PYTHONSTARTUP": "evil.py",
        "GIT_CONFIG_GLOBAL": "evil",
        "BASH_ENV": "evil.sh",
        "NODE_OPTIONS": "--require evil",
    }
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GBR_TEST_HARMLESS", "kept")
    registry = make_registry(**commands("env"))
    text = text_of(registry.call("run_command", {"argv": ["env"]}))
    assert "GBR_TEST_HARMLESS=kept" in text
    for name in planted:
        assert f"{name}=" not in text


@pytest.mark.parametrize("confine", ["off", "auto"])
def test_timeout_kills_the_whole_process_group(make_registry, bin_dir, root, confine):
    nap = unique_nap()
    make_program(bin_dir, "spawner", f"sleep {nap} &\necho $! > grand.pid\nwait")
    registry = make_registry(
        search_path=f"{bin_dir}:{SYSTEM_PATH}", **commands("spawner", confine=confine)
    )
    result = registry.call("run_command", {"argv": ["spawner"], "timeout_s": 0.5})
    assert result.is_error and result.structured["timed_out"]
    assert "timed out after 0.5 s; the process group was killed" in text_of(result)
    read_pid(root / "grand.pid")
    assert wait_no_process_with(nap)


def test_timeout_is_capped_by_the_profile_limit(make_registry, bin_dir):
    make_program(bin_dir, "sleeper", "sleep 300")
    registry = make_registry(
        search_path=f"{bin_dir}:{SYSTEM_PATH}", **commands("sleeper", timeout_s=0.3)
    )
    result = registry.call("run_command", {"argv": ["sleeper"], "timeout_s": 1000})
    assert "timed out after 0.3 s" in text_of(result)


@pytest.mark.parametrize("confine", ["off", "auto"])
def test_background_children_do_not_outlive_a_finished_command(
    make_registry, bin_dir, root, confine
):
    nap = unique_nap()
    make_program(bin_dir, "leaver", f"sleep {nap} &\necho $! > grand.pid\necho done")
    registry = make_registry(
        search_path=f"{bin_dir}:{SYSTEM_PATH}", **commands("leaver", confine=confine)
    )
    result = registry.call("run_command", {"argv": ["leaver"]})
    assert not result.is_error and "done" in text_of(result)
    read_pid(root / "grand.pid")
    assert wait_no_process_with(nap)


def test_output_cap_counts_stdout_and_stderr_together_and_says_what_was_dropped(
    make_registry, bin_dir
):
    make_program(bin_dir, "chatty", "yes 0123456789 | head -c 300000\necho tail >&2")
    registry = make_registry(
        search_path=f"{bin_dir}:{SYSTEM_PATH}", **commands("chatty", max_output_bytes=1000)
    )
    result = registry.call("run_command", {"argv": ["chatty"]})
    text = text_of(result)
    assert (
        "[output cut at 1000 bytes (stdout and stderr together); 299005 more bytes dropped]" in text
    )
    assert result.structured["output_truncated"]
    assert "tail" not in text


def test_endless_output_is_bounded_until_the_time_limit(make_registry):
    registry = make_registry(**commands("yes", max_output_bytes=4096))
    result = registry.call("run_command", {"argv": ["yes"], "timeout_s": 0.5})
    assert result.structured["timed_out"] and result.structured["output_truncated"]
    assert text_of(result).count("y\n") == 2048


@pytest.mark.parametrize("confine", ["off", "auto"])
@pytest.mark.parametrize(
    "redirect", ["", "exec >/dev/null 2>&1\n"], ids=["output-pipes-open", "output-pipes-closed"]
)
async def test_a_cancelled_call_kills_the_command_and_what_it_started_at_once(
    make_registry, bin_dir, root, redirect, confine
):
    """The caller stops waiting (its peer went away, issue 13): nothing it started lives on."""
    nap = unique_nap()
    spawner = make_program(
        bin_dir, "spawner", f"{redirect}sleep {nap} &\necho $! > grand.pid\nwait"
    )
    registry = make_registry(
        search_path=f"{bin_dir}:{SYSTEM_PATH}", **commands("spawner", confine=confine)
    )
    with trio.move_on_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(registry.run, "run_command", {"argv": ["spawner"]})
            await trio.to_thread.run_sync(read_pid, root / "grand.pid")
            cancelled = time.monotonic()
            nursery.cancel_scope.cancel()
    assert await trio.to_thread.run_sync(wait_no_process_with, nap, 2.0)
    assert await trio.to_thread.run_sync(wait_no_process_with, str(spawner), 2.0)
    assert time.monotonic() - cancelled < 2.0
