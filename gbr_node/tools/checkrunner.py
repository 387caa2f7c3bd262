"""Run a profile's formatters and checks (UBQ-DEV-02, UNW-AI-01 / STD-DEV-01) [I/O].

`CheckRunner` is built with the registry on every profile load: each
`[checks.NAME]` command's program is looked up once then (PATH filtered as
for run_command: no relative entries, no folders inside the root), and the
commands run like run_command's: no shell, cwd the root, the scrubbed
environment, the output cap of `[tools.run_command]`, confined by the same
OS policy (GBR-CONF-01), killed with what they started at `timeout_s` or
when a `Stop` is stopped (`/s`, Ctrl-C).

- `format(relative, before, content)`: the text to save (`FormatOutcome`).
  Only new files and files the formatter already leaves as they are get
  formatted, so a one-line edit never restyles a file nobody formatted.
- `run(targets, stop)`: one `CheckRun` per target.
- `peer_check(relative)`: for a peer's write through our RPC (and an
  approved write, `approvals.apply`), the baseline before it and the verdict
  after it, for the tool result (or the approval's outcome).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shlex
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gbr_node.checks.diagnostics import failure_diagnostics, strip_ansi
from gbr_node.checks.plan import (
    CheckRun,
    CheckSpec,
    CheckTarget,
    FormatOutcome,
    FormatStatus,
    targets,
)
from gbr_node.checks.verdict import Verdict, judge
from gbr_node.config.profile import PATH_PLACEHOLDER, CheckSet, Profile, RunCommandConfig
from gbr_node.confine import for_commands
from gbr_node.errors import GbrError
from gbr_node.sandbox import Sandbox
from gbr_node.tools.commands import locate_program, trusted_search_path
from gbr_node.tools.guards import scrubbed_environment
from gbr_node.tools.process import Completed, Stop, run_bounded

CLEAN_CACHE_SIZE = 256
"""How many (file, SHA-256) pairs known to be formatted are remembered, so that an
edit of a file the node formatted costs one formatter run, not two."""
FORMATTER_SLACK_BYTES = 64 * 1024
"""A stdin formatter may print up to twice its input plus this many bytes (its
messages included) before its output counts as cut (then nothing is formatted)."""


@dataclass(frozen=True)
class _Resolved:
    """One check set with its programs fixed: `formatter`/`check` are argv with an
    absolute argv[0], or None (not set, or `missing` says which program was not found)."""

    name: str
    config: CheckSet
    spec: CheckSpec
    formatter: tuple[str, ...] | None
    check: tuple[str, ...] | None
    missing: tuple[str, ...]


def _expand(argv: Sequence[str], relative: str | None) -> list[str]:
    """`argv` with `{path}` replaced by `relative` (a per-file command), or as is."""
    if relative is None:
        return list(argv)
    return [arg.replace(PATH_PLACEHOLDER, relative) for arg in argv]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CheckRunner:
    """The formatters and checks of one profile (`[checks]`), bound to its sandbox.

    Args:
        checks: the profile's `[checks.NAME]` sets, in profile order.
        sandbox: the root the commands run in and the files they see.
        commands: `[tools.run_command]`: its output cap, confinement mode,
            network, read_paths and secret_paths apply to check commands too.
        search_path: PATH (os.pathsep-joined) to look the programs up on.
    """

    def __init__(
        self,
        checks: dict[str, CheckSet],
        sandbox: Sandbox,
        commands: RunCommandConfig,
        search_path: str,
    ) -> None:
        self._sandbox = sandbox
        self._cap = commands.max_output_bytes
        trusted = trusted_search_path(search_path, sandbox.root)
        self.sets: list[_Resolved] = []
        for name, config in checks.items():
            found: dict[str, tuple[str, ...] | None] = {}
            missing = []
            for key in ("formatter", "check"):
                argv = getattr(config, key)
                program = None if argv is None else self._locate(argv[0], trusted)
                if argv is not None and program is None:
                    missing.append(argv[0])
                found[key] = None if program is None else (program, *argv[1:])
            spec = CheckSpec(
                name, config.files, config.per_file, config.max_retries if found["check"] else 0
            )
            self.sets.append(
                _Resolved(name, config, spec, found["formatter"], found["check"], tuple(missing))
            )
        programs = tuple(
            argv[0] for s in self.sets for argv in (s.formatter, s.check) if argv is not None
        )
        self._policy = for_commands(commands, sandbox, programs)
        self._env = scrubbed_environment(os.environ)
        self._env["PATH"] = trusted
        self._clean: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()
        self.last: tuple[CheckRun, ...] = ()
        """The runs of the last check (for `/check`)."""

    @classmethod
    def of_profile(cls, profile: Profile, sandbox: Sandbox) -> CheckRunner:
        """The checks of `profile` over `sandbox`, programs looked up on $PATH now."""
        path = os.environ.get("PATH", os.defpath)
        return cls(profile.checks, sandbox, profile.tools.run_command, path)

    def _locate(self, program: str, search_path: str) -> str | None:
        pinned = program if "/" in program else None
        found = locate_program(os.path.basename(program), pinned, self._sandbox.root, search_path)
        return None if found is None else os.path.abspath(found)

    # -- what the agent's machine needs ---------------------------------------

    def specs(self) -> tuple[CheckSpec, ...]:
        """The check sets that have a check command found on PATH (others never block)."""
        return tuple(s.spec for s in self.sets if s.check is not None)

    def describe(self) -> list[str]:
        """`gbr-node env check`: one line per check set in force, and what is missing."""
        lines = []
        for s in self.sets:
            parts = [f"files {', '.join(s.config.files)}"]
            if s.formatter is not None:
                parts.append(f"format: {' '.join(s.config.formatter or ())} ({s.formatter[0]})")
            if s.check is not None:
                scope = "per file" if s.spec.per_file else "project-wide"
                parts.append(f"check ({scope}): {' '.join(s.config.check or ())} ({s.check[0]})")
            parts.append(f"timeout {s.config.timeout_s:g} s, max_retries {s.config.max_retries}")
            if s.missing:
                parts.append(f"NOT FOUND on PATH (left out): {', '.join(s.missing)}")
            lines.append(f"  {s.name}: " + "; ".join(parts))
        return lines

    # -- format on save (UBQ-DEV-02) -----------------------------------------

    def format(self, relative: str, before: str | None, content: str) -> FormatOutcome:
        """What to save for the root-relative file `relative`, whose text is now `before`
        (None: a new file) and is to become `content`.

        The first set covering the file with a formatter decides. The file is
        formatted when it is new or its formatter leaves `before` unchanged;
        otherwise `content` is saved as given ("skipped"), as it is when the
        formatter fails or times out ("failed": often the code does not
        parse; the check then says why). Blocking (runs the formatter).
        """
        chosen = next(
            (s for s in self.sets if s.formatter is not None and s.spec.covers(relative)), None
        )
        if chosen is None:
            return FormatOutcome("none", content)
        if before is not None and not self._is_clean(chosen, relative, before):
            return FormatOutcome(
                "skipped",
                content,
                chosen.name,
                "the file was not formatted before this change; formatting it would "
                "restyle lines the change did not touch",
            )
        formatted, error = self._run_formatter(chosen, relative, content)
        if formatted is None:
            return FormatOutcome("failed", content, chosen.name, error)
        self._remember_clean(relative, formatted)
        status: FormatStatus = "unchanged" if formatted == content else "formatted"
        return FormatOutcome(status, formatted, chosen.name)

    def _is_clean(self, chosen: _Resolved, relative: str, text: str) -> bool:
        with self._lock:
            if (relative, _sha(text)) in self._clean:
                return True
        formatted, _ = self._run_formatter(chosen, relative, text)
        if formatted == text:
            self._remember_clean(relative, text)
            return True
        return False

    def _remember_clean(self, relative: str, text: str) -> None:
        with self._lock:
            self._clean[(relative, _sha(text))] = None
            while len(self._clean) > CLEAN_CACHE_SIZE:
                self._clean.popitem(last=False)

    def _run_formatter(self, chosen: _Resolved, relative: str, text: str) -> tuple[str | None, str]:
        """The formatter's output for `text` as file `relative`, or (None, why it failed)."""
        assert chosen.formatter is not None
        timeout = chosen.config.timeout_s
        if chosen.config.formatter_mode == "stdin":
            data = text.encode("utf-8")
            # the formatted text may be longer than run_command's output cap
            cap = max(self._cap, 2 * len(data) + FORMATTER_SLACK_BYTES)
            done = self._bounded(_expand(chosen.formatter, relative), timeout, data, cap=cap)
            if done.timed_out:
                return None, f"the formatter timed out after {timeout:g} s"
            if done.exit_code != 0 or done.dropped_bytes:
                return None, _first_line(done.stderr or done.stdout, done.exit_code)
            try:
                return done.stdout.decode("utf-8"), ""
            except UnicodeDecodeError:
                return None, "the formatter's output is not UTF-8"
        return self._format_copy(chosen, relative, text)

    def _format_copy(self, chosen: _Resolved, relative: str, text: str) -> tuple[str | None, str]:
        """`formatter_mode = "in_place"`: format a copy next to the file (same folder, so
        the formatter finds the same settings), never the file itself."""
        assert chosen.formatter is not None
        folder = self._sandbox.resolve(relative).path.parent
        while not folder.is_dir():
            folder = folder.parent
        copy = folder / f".gbr-format-{secrets.token_hex(4)}-{Path(relative).name}"
        copy_relative = copy.relative_to(self._sandbox.root).as_posix()
        try:
            copy.write_text(text, encoding="utf-8")
            done = self._bounded(_expand(chosen.formatter, copy_relative), chosen.config.timeout_s)
            if done.timed_out:
                return None, f"the formatter timed out after {chosen.config.timeout_s:g} s"
            if done.exit_code != 0:
                return None, _first_line(done.stderr or done.stdout, done.exit_code)
            return copy.read_text(encoding="utf-8"), ""
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"the formatter's copy could not be used: {exc}"
        finally:
            copy.unlink(missing_ok=True)

    # -- checks (UNW-AI-01 / STD-DEV-01) -------------------------------------

    def run(self, wanted: Sequence[CheckTarget], stop: Stop | None = None) -> tuple[CheckRun, ...]:
        """Run each target's check, in order; a stopped `stop` ends them all. Blocking.
        The runs are also kept as `last` (for `/check`)."""
        by_name = {s.name: s for s in self.sets}
        runs = []
        for target in wanted:
            chosen = by_name.get(target.name)
            if chosen is None or chosen.check is None:
                runs.append(CheckRun(target, "not_run", reason="no such check in the profile"))
                continue
            runs.append(self._run_one(chosen, target, stop))
        self.last = tuple(runs)
        return self.last

    def _run_one(self, chosen: _Resolved, target: CheckTarget, stop: Stop | None) -> CheckRun:
        assert chosen.check is not None
        argv = _expand(chosen.check, target.path)
        command = shlex.join(_expand(chosen.config.check or (), target.path))
        timeout = chosen.config.timeout_s
        if target.path is not None and not (self._sandbox.root / target.path).exists():
            return CheckRun(target, "ok", command, "(the file does not exist)", timeout_s=timeout)
        started = time.monotonic()
        try:
            done = self._bounded(argv, timeout, stop=stop)
        except GbrError as exc:
            return CheckRun(target, "not_run", command, reason=str(exc), timeout_s=timeout)
        elapsed = time.monotonic() - started
        output = strip_ansi(
            done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")
        )
        common: dict[str, Any] = {"command": command, "output": output, "elapsed_s": elapsed}
        if done.stopped:
            return CheckRun(target, "stopped", reason="stopped", timeout_s=timeout, **common)
        if done.timed_out:
            return CheckRun(target, "timed_out", timeout_s=timeout, **common)
        if done.exit_code == 0:
            return CheckRun(target, "ok", timeout_s=timeout, **common)
        found = tuple(failure_diagnostics(output))
        return CheckRun(target, "failed", diagnostics=found, timeout_s=timeout, **common)

    def peer_check(self, relative: str) -> Callable[[], list[Verdict]] | None:
        """For a peer's write of `relative` (its agent self-corrects from the result),
        or an approved one:
        runs the baseline now and returns what to call once the file is written, which
        runs the checks again and judges them; None when no check covers the file.
        Blocking."""
        wanted = targets(self.specs(), [relative])
        if not wanted:
            return None
        baseline = {run.target: run for run in self.run(wanted)}
        return lambda: judge(self.run(wanted), baseline)

    def _bounded(
        self,
        argv: list[str],
        timeout: float,
        stdin: bytes | None = None,
        stop: Stop | None = None,
        cap: int | None = None,
    ) -> Completed:
        return run_bounded(
            argv,
            cwd=self._sandbox.root,
            env=self._env,
            timeout_s=timeout,
            max_output_bytes=cap or self._cap,
            policy=self._policy,
            stdin=stdin,
            stop=stop,
        )


def _first_line(data: bytes, exit_code: int) -> str:
    """A failed formatter's reason: the first non-empty line it printed, or its status."""
    for line in strip_ansi(data.decode("utf-8", "replace")).splitlines():
        if line.strip():
            return f"the formatter failed: {line.strip()[:200]}"
    return f"the formatter failed (exit status {exit_code})"
