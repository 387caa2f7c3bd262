"""Never silently open (GBR-CONF-01, GBR-FAIL-01): a command the sandbox cannot be
applied to does not run and says why; `confine = "required"` refuses where the OS
offers nothing; the probe tells an enforcing sandbox from one that only looks so."""

from __future__ import annotations

import logging
import os
import tempfile
import time

import pytest

from gbr_node.confine import in_force, plan
from gbr_node.confine.support import Support, self_test, support
from gbr_node.errors import SecurityViolation
from gbr_node.sandbox.private import PRIVATE
from gbr_node.tools import process
from tests.confine.conftest import build_world
from tests.tools.helpers import text_of

MARKER_SCRIPT = "open('work/ran.txt', 'w').write('ran')\n"


@pytest.fixture(params=["namespaces", "landlock"])
def mode(request) -> str:
    return request.param


def _break_plan(monkeypatch, step: str) -> None:
    """Make one confinement step of the next commands fail, as a kernel would."""
    original = plan.build_plan

    def broken(*args, **kwargs):
        made = original(*args, **kwargs)
        if step == "mount":
            made["mounts"].append(("bind", "/nonexistent-gbr-source", "ro", "/mnt/x"))
        else:
            made["landlock"]["paths"].append(("/nonexistent-gbr-rule", 1, 1))
        return made

    monkeypatch.setattr("gbr_node.confine.spawn.build_plan", broken)


@pytest.mark.parametrize(
    ("mode", "step"),
    [("namespaces", "mount"), ("namespaces", "landlock"), ("landlock", "landlock")],
)
def test_a_command_the_sandbox_cannot_be_applied_to_does_not_run_and_says_why(
    tmp_path, monkeypatch, caplog, mode, step
):
    world = build_world(tmp_path, monkeypatch, mode)
    (world.root / "attack.py").write_text(MARKER_SCRIPT)
    _break_plan(monkeypatch, step)
    with caplog.at_level(logging.WARNING):
        result = world.run("python3", "attack.py")
    assert result.is_error
    text = text_of(result)
    assert text.startswith("not run: the OS sandbox could not be applied to this command")
    assert "nonexistent-gbr" in text and "nothing was started" in text
    assert not (world.root / "work" / "ran.txt").exists()
    assert "confinement failed" in caplog.text
    monkeypatch.undo()  # the next command, with a sound plan, runs again


def test_required_refuses_every_command_where_the_os_offers_no_sandbox(tmp_path, monkeypatch):
    world = build_world(tmp_path, monkeypatch, "namespaces")  # confine = "required"
    (world.root / "attack.py").write_text(MARKER_SCRIPT)
    nothing = Support(0, None, "this kernel has no Landlock (test)")
    monkeypatch.setattr(process, "support", lambda: nothing)
    result = world.run("python3", "attack.py")
    assert result.is_error
    assert text_of(result).startswith(
        'not run: the profile requires confinement (confine = "required")'
    )
    assert "this system offers none: this kernel has no Landlock (test)" in text_of(result)
    assert not (world.root / "work" / "ran.txt").exists()


def test_auto_runs_unconfined_where_the_os_offers_no_sandbox(tmp_path, monkeypatch):
    from gbr_node.config.profile import ToolsConfig
    from gbr_node.sandbox import Sandbox
    from gbr_node.tools import build_registry
    from tests.confine.conftest import SYSTEM_PATH

    world = build_world(tmp_path, monkeypatch, "off")
    monkeypatch.setattr(process, "support", lambda: Support(0, None, "none here (test)"))
    tools = ToolsConfig.model_validate({"run_command": {"allow": ["python3"]}})  # auto
    registry = build_registry(tools, Sandbox(world.root), search_path=SYSTEM_PATH)
    (world.root / "attack.py").write_text(MARKER_SCRIPT)
    result = registry.call("run_command", {"argv": ["python3", "attack.py"]})
    assert not result.is_error, text_of(result)
    assert (world.root / "work" / "ran.txt").exists()


@pytest.mark.parametrize(
    ("mode", "found", "expected"),
    [
        ("auto", Support(7, "namespaces"), "commands run confined: Landlock ABI 7 + user"),
        ("auto", Support(7, "landlock", "namespaces unusable: EPERM"), "Landlock ABI 7 only"),
        ("auto", Support(0, None, "no Landlock"), "commands run unconfined: no Landlock"),
        ("required", Support(0, None, "no Landlock"), 'no command runs: confine = "required"'),
        ("off", Support(7, "namespaces"), 'commands run unconfined: confine = "off"'),
    ],
)
def test_what_is_in_force_is_said_in_one_line(mode, found, expected):
    assert expected in in_force(mode, found)


def test_the_probe_fails_a_sandbox_that_lets_a_secret_be_read(monkeypatch, mode):
    """The probe runs a real confined process: a plan that grants too much (here: the
    folder above the probe's root, which holds its secret) is caught, as an inert "best
    effort" Landlock would be."""
    found = support()
    if mode == "namespaces" and found.mode != "namespaces":
        pytest.skip("no namespaces here")
    real = plan.readable_trees

    def too_much(policy, secrets, extra=()):
        return [str(policy.root.parent), *real(policy, secrets, extra)]

    monkeypatch.setattr(plan, "readable_trees", too_much)
    failed = self_test(found.abi, namespaces=mode == "namespaces")
    assert failed is not None and "unreadable" in failed


def test_the_probe_passes_the_real_plan(mode):
    found = support()
    if mode == "namespaces" and found.mode != "namespaces":
        pytest.skip("no namespaces here")
    assert self_test(found.abi, namespaces=mode == "namespaces") is None


def _mounts_under(folder: str) -> list[str]:
    """Lines of every process's mount table that name a path under `folder` (matched
    by its last two names: a mount's source is shown relative to its filesystem)."""
    folder = os.path.join(*folder.split(os.sep)[-2:])
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/mountinfo", encoding="utf-8", errors="replace") as table:
                found += [f"{pid}: {line}" for line in table if folder in line]
        except OSError:  # gone, or not ours to read
            continue
    return found


def test_the_probe_leaves_no_launcher_building_in_its_folder(tmp_path, monkeypatch):
    """The start-up probe once took the zygote's common path, which warms a spare
    launcher for the request's root: the spare built its mountpoints in the probe's
    folder while the probe removed it, and `gbr-node run` died at start with
    "Directory not empty". The probe's folder is removed whole and no process mounts
    anything from it afterwards (a spare is built within milliseconds; 3 s of looking)."""
    found = support()
    if found.mode != "namespaces":
        pytest.skip("no namespaces here")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert self_test(found.abi, namespaces=True) is None
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert _mounts_under(str(tmp_path)) == []
        time.sleep(0.05)
    assert list(tmp_path.iterdir()) == []


def test_a_working_folder_the_command_may_not_enter_is_said_so(tmp_path, monkeypatch, mode):
    """cwd `.gbr` is refused before anything starts: the node's state is private to
    every tool (GBR-PRIV-01), so the path check names the rule and nothing runs."""
    world = build_world(tmp_path, monkeypatch, mode)
    (world.root / "attack.py").write_text("print(open('approvals.db').read())\n")
    with pytest.raises(SecurityViolation) as refused:
        world.run("python3", "../attack.py", cwd=".gbr")
    assert refused.value.reason == PRIVATE
