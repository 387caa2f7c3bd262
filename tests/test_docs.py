"""Every command shown in docs/ runs as written (issue 21, "What must hold").

The rules for a page of docs/ (docs/README.md says them to writers too):

- Every fenced block names its language. Commands are in `sh` or `console`
  blocks only; `bash`, `shell` and friends are refused, so that no command
  can hide in a block the test does not run.
- A `sh` block is run with `bash -e -o pipefail` and must exit 0.
- A `console` block is a terminal capture: each `$ ` line is a command, the
  lines after it what it prints (stdout and stderr together). `...` on a
  line of its own stands for any number of lines, inside a line for any
  text. A command must exit 0 unless its capture ends with `[exit N]`.
- A `repl` block is a capture of `gbr-node run` in a real pseudo-terminal
  (pexpect, rendered by pyte): its first line is the `$ gbr-node run ...`
  command, then the screen from the top as it is when the person leaves
  (the status line last). A line `› LINE` is what the person types, typed
  once the capture above it is on the screen (the live part under it, the
  status line, may differ meanwhile) and the input line is drawn; the node
  echoes it there. `TEXT› LINE` types LINE mid-answer, once TEXT shows, and
  stands for TEXT on the screen; the node's echo `› LINE` comes later where
  the capture shows it. A line the terminal wrapped is shown whole. The
  model is the scripted test server (tests/support/model_server.py) on
  127.0.0.1, answering with the replies of a `<!-- model replies: [...] -->`
  comment right before the block (`reply_from_json` forms). The node listens
  on a free port (`--listen /ip4/127.0.0.1/tcp/0` is added): tests never bind
  a fixed port.
- The blocks of one page run in order, each from the project folder
  `~/gbr-demo` of a fresh HOME (the path is shown as `~` in captures), so a
  page can build on what its earlier blocks did. No model is configured
  (but in `repl` blocks) and the embedded one is off (`GBR_LOCAL_MODEL=0`).

README.md's own two commands install the package; they are held by CI,
which runs them (.ci/run), and here only their place on the first screen is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pyte
import pytest

from tests.support.model_server import ModelServer
from tests.support.replies import reply_from_json

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
RUN_LANGUAGES = {"sh", "console", "repl"}
SHELL_LANGUAGES = {"bash", "shell", "zsh", "shell-session", "sh-session", "terminal", "fish"}
COMMAND_TIMEOUT_S = 120
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
EXIT_LINE = re.compile(r"^\[exit (\d+)\]$")
REPLIES = re.compile(r"<!--\s*model replies:(.*?)-->\s*\Z", re.DOTALL)
TYPED = "› "
REPL_ROWS, REPL_COLS = 100, 200
"""Wide enough that the node's own lines (banner, notices, /help), which it wraps at
word boundaries itself (issue 34), stay one line each, as the captures show them."""
REPL_TIMEOUT_S = 60
SETTLED_S = 3.0
"""A screen that has not changed for this long while the node is settled (started,
idle, every scripted reply taken) will not change any more: a capture it does not
match is wrong now, not in REPL_TIMEOUT_S (a state, not a time, ends the wait)."""


@dataclass(frozen=True)
class Block:
    language: str
    body: str
    line: int
    before: str  # the page's text between the previous block and this one


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown page, with the line each opens on."""
    found, end = [], 0
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        found.append(Block(m.group(1).strip(), m.group(2), line, text[end : m.start()]))
        end = m.end()
    return found


def console_commands(body: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for each `$ ` line of a console block."""
    commands: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line.rstrip())
        elif line.strip():
            raise ValueError(f"output before the first command: {line!r}")
    while commands and commands[-1][1] and not commands[-1][1][-1]:
        commands[-1][1].pop()
    return commands


def capture_matches(expected: list[str], actual: str) -> bool:
    """Whether `actual` output fits the `expected` capture lines (see the module doc)."""
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    lines = [line.rstrip() for line in actual.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    text = "".join(line + "\n" for line in lines)
    return re.fullmatch("".join(parts), text, re.DOTALL) is not None


class Runner:
    """Runs one page's commands in a fresh HOME with a project folder `~/gbr-demo`.

    The HOME's path has one length wherever the suite runs (`/tmp/gbr-docs-XXXXXXXX`):
    a screen row holding it must never fill the width by chance, which the screen
    reader would take for a wrapped line. `close()` removes it."""

    def __init__(self, tmp: Path) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="gbr-docs-", dir="/tmp"))
        self.project = self.home / "gbr-demo"
        self.project.mkdir(parents=True)
        self.env = {
            "HOME": str(self.home),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "GBR_LOCAL_MODEL": "0",
            "TMPDIR": str(tmp),
        }

    def close(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)

    def run(self, command: str) -> tuple[int, str]:
        out = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", command],
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        return out.returncode, out.stdout.replace(str(self.home), "~")


def screen_text(screen: pyte.Screen, home: Path) -> str:
    """The screen's lines (a row that fills the width goes on into the next), without
    trailing blanks and without the empty input line (`›` on a row of its own, or
    right after a partly streamed answer line)."""
    rows: list[str] = []
    wrapped = False  # the previous row filled the width: this one goes on the same line
    for raw in screen.display:
        if wrapped:
            rows[-1] += raw.rstrip()
        else:
            rows.append(raw.rstrip())
        wrapped = raw[-1:] not in ("", " ")
    while rows and not rows[-1]:
        rows.pop()
    if rows and rows[-1].endswith(TYPED.strip()):
        rows[-1] = rows[-1].removesuffix(TYPED.strip()).rstrip()
        if not rows[-1]:
            rows.pop()
    return "\n".join(rows).replace(str(home), "~") + "\n"


def settled(text: str, server: ModelServer) -> bool:
    """True when the node has started (its banner's last line is shown), is idle (the
    status line says so) and the model server has no scripted reply left to give."""
    rows = text.splitlines()
    started = any("/help for commands" in row for row in rows)
    idle = any(row.startswith("idle · ") for row in rows)
    return started and idle and server.replies_left == 0


def input_line_ready(screen: pyte.Screen) -> bool:
    """True when the empty input line is drawn (the REPL takes a line): `›` ends
    the last row written, alone or after a partly streamed answer line."""
    rows = [row.rstrip() for row in screen.display if row.strip()]
    return bool(rows) and rows[-1].endswith(TYPED.strip())


def repl_steps(capture: list[str]) -> tuple[list[str], list[tuple[int, str]]]:
    """A repl capture as (the screen's lines, [(lines shown before typing, the line
    typed)]). `› LINE` is typed there and is its own echo; `TEXT› LINE` types LINE
    once TEXT shows (mid-answer) and stands for TEXT on the screen, the node drawing
    `› LINE` later where the capture shows it (that line is not typed again)."""
    lines: list[str] = []
    steps: list[tuple[int, str]] = []
    echoes: list[str] = []
    for line in capture:
        if TYPED not in line:
            lines.append(line)
            continue
        shown, _, typed = line.rpartition(TYPED)
        if not shown and typed in echoes:
            echoes.remove(typed)
            lines.append(line)
        elif shown:
            lines.append(shown)
            steps.append((len(lines), typed))
            echoes.append(typed)
        else:
            steps.append((len(lines), typed))
            lines.append(line)
    return lines, steps


def run_repl(runner: Runner, body: str, replies: list[dict]) -> str | None:
    """Drive `gbr-node run` as a `repl` block says; None when the screen matched, else
    what went wrong (with the screen)."""
    command, *capture = [line.rstrip() for line in body.splitlines()]
    if not command.startswith("$ gbr-node run"):
        return f"a repl block starts with `$ gbr-node run`, not {command!r}"
    screen = pyte.Screen(REPL_COLS, REPL_ROWS)
    stream = pyte.Stream(screen)
    with ModelServer(model="test-model") as server:
        server.enqueue(*[reply_from_json(reply) for reply in replies])
        env = {**runner.env, "TERM": "xterm", "OPENAI_BASE_URL": server.base_url}
        env["OPENAI_MODEL"] = "test-model"
        child = pexpect.spawn(
            "bash",
            ["-c", f"{command[2:]} --listen /ip4/127.0.0.1/tcp/0"],
            cwd=str(runner.project),
            env=env,
            encoding="utf-8",
            dimensions=(REPL_ROWS, REPL_COLS),
        )
        try:
            screen_lines, steps = repl_steps(capture)
            for stop, line in [*steps, (len(screen_lines), None)]:
                # before typing, the capture so far must be on the screen, and whatever is
                # below it (the live part: the line being written, the status) may differ
                expected = screen_lines[:stop] + (["..."] if line is not None else [])
                deadline = time.monotonic() + REPL_TIMEOUT_S
                ready = line is None or input_line_ready(screen)
                shown, since = "", time.monotonic()
                while not (ready and capture_matches(expected, screen_text(screen, runner.home))):
                    text = screen_text(screen, runner.home)
                    if text != shown:
                        shown, since = text, time.monotonic()
                    still = time.monotonic() - since > SETTLED_S and settled(text, server)
                    if still or time.monotonic() > deadline or not child.isalive():
                        wanted = "\n".join(expected)
                        return f"screen\n{screen_text(screen, runner.home)}\nnot\n{wanted}"
                    try:
                        stream.feed(child.read_nonblocking(65536, timeout=0.05))
                    except pexpect.TIMEOUT:
                        pass
                    except pexpect.EOF:
                        time.sleep(0.05)
                    ready = line is None or input_line_ready(screen)
                if line is not None:
                    child.send(line + "\r")
            child.sendeof()
            child.expect(pexpect.EOF, timeout=REPL_TIMEOUT_S)
        finally:
            child.terminate(force=True)
    return None


def check_page(text: str, tmp: Path) -> tuple[list[str], int]:
    """Run a page's commands; (the problems found, the number of commands run)."""
    runner = Runner(tmp)
    try:
        return run_blocks(text, runner)
    finally:
        runner.close()


def run_blocks(text: str, runner: Runner) -> tuple[list[str], int]:
    """Run the blocks of a page with `runner`, in order: (problems, commands run)."""
    problems: list[str] = []
    ran = 0
    for block in blocks(text):
        where = f"block at line {block.line}"
        if not block.language:
            problems.append(f"{where}: a fenced block must name its language")
            continue
        language = block.language.split()[0]
        if language in SHELL_LANGUAGES:
            problems.append(f"{where}: commands go in `sh` or `console` blocks, not {language}")
        if language not in RUN_LANGUAGES:
            continue
        if language == "repl":
            replies = REPLIES.search(block.before)
            ran += 1
            try:
                problem = run_repl(
                    runner, block.body, json.loads(replies.group(1)) if replies else []
                )
            except (ValueError, TypeError) as exc:
                problem = f"bad model replies: {exc}"
            if problem:
                problems.append(f"{where}: {problem}")
            continue
        if language == "sh":
            status, output = runner.run(block.body)
            ran += 1
            if status != 0:
                problems.append(f"{where}: exit status {status}:\n{block.body}\n{output}")
            continue
        try:
            commands = console_commands(block.body)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if not commands:
            problems.append(f"{where}: a console block with no `$ ` command")
        for command, expected in commands:
            wanted = 0
            if expected and (m := EXIT_LINE.match(expected[-1])):
                wanted, expected = int(m.group(1)), expected[:-1]
            status, output = runner.run(command)
            ran += 1
            if status != wanted:
                problems.append(f"{where}: `{command}` exited {status}, not {wanted}:\n{output}")
            elif not capture_matches(expected, output):
                shown = "\n".join(expected)
                problems.append(f"{where}: `{command}` printed\n{output}\nnot\n{shown}")
    return problems, ran


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_command_on_the_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    problems, _ = check_page(page.read_text(encoding="utf-8"), tmp_path)
    assert problems == [], "\n\n".join(problems)


def test_the_docs_show_commands_at_all() -> None:
    """A floor, so that the test above cannot pass by finding nothing to run."""
    count = 0
    for page in PAGES:
        for block in blocks(page.read_text(encoding="utf-8")):
            if block.language == "sh":
                count += 1
            elif block.language == "console":
                count += len(console_commands(block.body))
            elif block.language == "repl":
                count += sum(TYPED in line for line in block.body.splitlines())
    assert count >= 15
    guides = {p.stem for p in (DOCS / "guide").glob("*.md")}
    assert {"profiles", "approvals", "peers", "hot-reload", "models", "checks"} <= guides


# --- the runner itself can fail ----------------------------------------------------------

CASES = [
    ("```sh\nfalse\n```\n", "exit status 1"),
    ("```sh\ngbr-node no-such-command\n```\n", "exit status 2"),
    ("```console\n$ echo hello\nhullo\n```\n", "printed"),
    ("```console\n$ echo hello\n```\n", "printed"),
    ("```console\n$ false\n```\n", "exited 1, not 0"),
    ("```console\n$ true\n[exit 1]\n```\n", "exited 0, not 1"),
    ("```\ngbr-node init\n```\n", "must name its language"),
    ("```bash\ngbr-node init\n```\n", "not bash"),
    ("```console\nhello\n$ true\n```\n", "output before the first command"),
    ("```console\n```\n", "no `$ ` command"),
    ("```repl\n$ ls\n```\n", "starts with `$ gbr-node run`"),
    (
        "```sh\ngbr-node init\n```\n"
        '<!-- model replies: [{"text": "Hello."}] -->\n'
        "```repl\n$ gbr-node run\n...\n› hi\nGoodbye.\n```\n",
        "› hi\nHello.\n(",  # the real screen is shown: the model did answer
    ),
    (
        "```sh\ngbr-node init\n```\n"
        '<!-- model replies: [{"text": "Hello."}] -->\n'
        "```repl\n$ gbr-node run\n...\n› hi\nGoodbye.\n› bye\n...\n```\n",
        "not\n...\n› hi\nGoodbye.\n...",  # a capture before a typed line is checked too
    ),
]


def test_a_repl_capture_types_each_line_once_where_it_says() -> None:
    capture = ["...", "› hi", "Hello.", "Long answer...› /s short", "(interrupted)", "› /s short"]
    lines, steps = repl_steps(capture)
    assert lines == ["...", "› hi", "Hello.", "Long answer...", "(interrupted)", "› /s short"]
    assert steps == [(1, "hi"), (4, "/s short")]  # the echo of /s is not typed again


@pytest.mark.parametrize(("page", "problem"), CASES)
def test_the_doc_runner_reports_a_page_that_is_wrong(
    page: str, problem: str, tmp_path: Path
) -> None:
    problems, _ = check_page(page, tmp_path)
    assert len(problems) == 1 and problem in problems[0], problems


def test_the_doc_runner_passes_a_page_that_is_right(tmp_path: Path) -> None:
    page = (
        "```sh\nprintf 'hi\\n' > notes.txt\n```\n\n"
        "```console\n$ cat notes.txt\nhi\n$ pwd\n~/gbr-demo\n$ ls /nonexistent\n...\n[exit 2]\n"
        "$ printf 'a\\nb\\nc\\nd\\n'\na\n...\nd\n$ echo 'one two three'\none ... three\n```\n"
        "```toml\n[model]\n```\n"
    )
    assert check_page(page, tmp_path) == ([], 6)


# --- links and the README's first screen -------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda p: p.name)
def test_relative_links_lead_to_files_that_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.exists():
            missing.append(target)
    assert missing == []


def test_paths_of_the_code_named_in_docs_exist() -> None:
    named = set()
    for page in PAGES:
        named |= set(
            re.findall(r"\b((?:gbr_node|tests|scripts|protocols)/[\w./-]*\w)", page.read_text())
        )
    assert len(named) > 20
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_the_readme_first_screen_holds_the_two_commands() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:30])
    commands = [b.body for b in blocks(first_screen) if b.language == "sh"]
    assert len(commands) == 2
    install, test = commands
    assert "pip install" in install and "gbr-node run" in install
    assert "-r requirements/test.txt" in test and "pytest" in test
