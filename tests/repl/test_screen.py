"""The screen's input thread and the node's stop: a node that stopped on a defect
before its input line had started left the input running for ever (in a real
terminal), with sys.stderr still its sink, so the one-line defect report never
reached the terminal and the process did not end (seen once in CI)."""

from __future__ import annotations

import sys

import pexpect

SCRIPT = """
import sys, threading
from gbr_node.repl.screen import Screen
from gbr_node.repl.view import View
screen = Screen(View(color=False, live=True))
screen.stop(lambda view, width, now: "")
ready = threading.Event()
before = sys.stdout, sys.stderr
worker = threading.Thread(
    target=screen.run_input, args=(lambda kind, text: None, lambda text: [], ready), daemon=True
)
worker.start()
worker.join(timeout=5)
ended = not worker.is_alive() and (sys.stdout, sys.stderr) == before
print("ENDED" if ended else "STILL RUNNING", file=sys.__stderr__, flush=True)
"""


def test_a_stop_before_the_input_starts_means_no_input_runs() -> None:
    child = pexpect.spawn(sys.executable, ["-c", SCRIPT], encoding="utf-8", timeout=30)
    child.expect(["ENDED", "STILL RUNNING"])
    said = child.after
    child.expect(pexpect.EOF)
    assert said == "ENDED"


DEFECT = """
import sys
from gbr_node.cli import _internal_error

class Closing:  # the input's line sink while its prompt closes: its lines go nowhere
    def write(self, text):
        return len(text)
    def flush(self):
        pass

sys.stdout = sys.stderr = Closing()
sys.exit(_internal_error(RuntimeError("injected defect")))
"""


def test_a_defect_is_reported_on_the_terminal_whatever_sys_stderr_is_then() -> None:
    """The node stopped on a defect while its input line, slow to end on a busy machine,
    still had its line sink as sys.stderr: the one-line report went into it and never
    reached the terminal (CI, test_cli_messages). It goes to the process's stderr."""
    child = pexpect.spawn(sys.executable, ["-c", DEFECT], encoding="utf-8", timeout=30)
    child.expect(pexpect.EOF)
    child.close()
    said = child.before or ""
    assert "stopped on an internal error: RuntimeError: injected defect" in said
    assert "the traceback is above" in said and child.exitstatus != 0
