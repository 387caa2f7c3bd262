"""The check runner with real programs (ruff, sh, sleep) in a temporary root: format on
save's rules (UBQ-DEV-02), check runs, time limits, `Stop`, programs fixed at load."""

import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from gbr_node.checks.plan import CheckTarget
from gbr_node.config.profile import Profile
from gbr_node.sandbox import Sandbox
from gbr_node.tools.checkrunner import CheckRunner
from gbr_node.tools.process import Stop

RUFF = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
PATH = os.environ.get("PATH", os.defpath)


def runner(root: Path, **sets) -> CheckRunner:
    profile = Profile.model_validate({"checks": sets})
    return CheckRunner(profile.checks, Sandbox(root), profile.tools.run_command, PATH)


def ruff_set(**more):
    return {
        "files": ["**/*.py"],
        "formatter": [RUFF, "format", "--stdin-filename", "{path}", "-"],
        "check": [RUFF, "check", "--quiet", "--no-cache", "--output-format", "concise", "{path}"],
        **more,
    }


def test_new_and_already_formatted_files_are_formatted_others_written_as_given(tmp_path):
    checks = runner(tmp_path, ruff=ruff_set())
    new = checks.format("pkg/a.py", None, "x=1\n")
    assert (new.status, new.content) == ("formatted", "x = 1\n")
    clean = checks.format("b.py", "y = 2\n", "y = 2\nz=3\n")
    assert (clean.status, clean.content) == ("formatted", "y = 2\nz = 3\n")
    legacy = checks.format("c.py", "y=2\n", "y=3\n")
    assert (legacy.status, legacy.content) == ("skipped", "y=3\n")
    assert checks.format("notes.txt", None, "x=1\n").status == "none"


def test_a_formatter_that_fails_leaves_the_content_as_given_and_says_why(tmp_path):
    outcome = runner(tmp_path, ruff=ruff_set()).format("a.py", None, "def f(:\n")
    assert (outcome.status, outcome.content) == ("failed", "def f(:\n")
    assert outcome.reason.startswith("the formatter failed: ")


def test_in_place_formatters_get_a_copy_next_to_the_file(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("keep = 1\n")
    formatter = [RUFF, "format", "--quiet", "--no-cache", "{path}"]
    checks = runner(tmp_path, ruff=ruff_set(formatter=formatter, formatter_mode="in_place"))
    outcome = checks.format("pkg/a.py", "keep = 1\n", "keep=2\n")
    assert (outcome.status, outcome.content) == ("formatted", "keep = 2\n")
    assert (tmp_path / "pkg" / "a.py").read_text() == "keep = 1\n"  # the file itself untouched
    assert sorted(p.name for p in (tmp_path / "pkg").iterdir()) == ["a.py"]  # copy removed


def test_check_runs_per_file_and_a_missing_file_is_ok(tmp_path):
    (tmp_path / "a.py").write_text("import os\n")
    checks = runner(tmp_path, ruff=ruff_set())
    bad, gone = checks.run((CheckTarget("ruff", "a.py"), CheckTarget("ruff", "gone.py")))
    assert bad.status == "failed" and bad.diagnostics[0].text.startswith("a.py:1:8: F401")
    assert gone.status == "ok"


def test_a_hanging_check_is_killed_at_its_time_limit(tmp_path):
    checks = runner(
        tmp_path, slow={"files": ["*.py"], "check": [shutil.which("sleep"), "30"], "timeout_s": 0.5}
    )
    started = time.monotonic()
    (run,) = checks.run((CheckTarget("slow"),))
    assert run.status == "timed_out" and time.monotonic() - started < 10


def test_stop_kills_a_running_check(tmp_path):
    checks = runner(tmp_path, slow={"files": ["*.py"], "check": [shutil.which("sleep"), "30"]})
    stop = Stop()
    threading.Timer(0.3, stop.stop).start()
    (run,) = checks.run((CheckTarget("slow"),), stop)
    assert run.status == "stopped" and run.elapsed_s < 10


def test_programs_not_on_path_are_left_out_and_said(tmp_path):
    checks = runner(tmp_path, gone={"files": ["*.x"], "check": "no-such-checker-17 {path}"})
    assert checks.specs() == ()
    assert "NOT FOUND on PATH (left out): no-such-checker-17" in checks.describe()[0]


@pytest.mark.parametrize("where", ["root", "relative"])
def test_a_program_planted_in_the_root_never_stands_in_for_one_on_path(tmp_path, where):
    planted = tmp_path / "ruff"
    planted.write_text("#!/bin/sh\necho planted\n")
    planted.chmod(0o755)
    path = str(tmp_path) if where == "root" else "."
    profile = Profile.model_validate({"checks": {"r": {"files": ["*.py"], "check": "ruff {path}"}}})
    checks = CheckRunner(
        profile.checks, Sandbox(tmp_path), profile.tools.run_command, f"{path}{os.pathsep}{PATH}"
    )
    executable = checks.sets[0].check[0] if checks.sets[0].check else None
    assert executable != str(planted)


def test_a_protected_files_pending_approval_is_never_formatted(tmp_path):
    from gbr_node.errors import ApprovalRequired
    from gbr_node.tools.files import FileTools, WriteFileParams

    marker = tmp_path / "formatter-ran"
    shell = shutil.which("sh")
    profile = Profile.model_validate(
        {
            "checks": {
                "any": {"files": ["**/*.py"], "formatter": [shell, "-c", f"touch {marker}; cat"]}
            }
        }
    )
    sandbox = Sandbox(tmp_path, protected=["setup.py"])
    checks = CheckRunner(profile.checks, sandbox, profile.tools.run_command, PATH)
    tools = FileTools(sandbox, 1 << 20, checks)
    with pytest.raises(ApprovalRequired) as asked:
        tools.write_file(WriteFileParams(path="setup.py", content="x=1\n"))
    assert asked.value.content == "x=1\n" and not marker.exists()
    tools.write_file(WriteFileParams(path="free.py", content="x=1\n"))
    assert marker.exists()  # the same formatter does run on a file that is not protected
