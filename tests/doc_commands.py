"""Run the shell commands of a docs page in order, as a reader would, and compare what each prints with what the page
shows; with --write, put what they print into the page where it shows something else.

A page's ```console blocks hold `$ command` lines, each followed by its output as shown; ```sh blocks hold commands
alone (each must succeed). An HTML comment on the line before a fenced block (GitHub shows nothing of it) says what
else the reader does there:

    <!-- file: PATH -->       the block is the whole of PATH: the reader writes it
    <!-- append: PATH -->     the block is added at the end of PATH
    <!-- shows: PATH -->      the block is what PATH holds at that point (checked)
    <!-- not run: REASON -->  the block's commands need what a test machine does not have (REASON starts with one of NOT_RUN)

Commands run in a fresh git repository that holds a copy of the example fleet (`intents/`), committed, with
`origin/main` at that commit as in a clone; `cd` carries over, `&&` chains.
A gpuc command without shell syntax runs in this process (compiler.cli.main, both streams into one buffer, in the
order gpuc writes them); anything else runs under bash with gpuc on PATH. Git gets a fixed identity and fixed dates,
so commit ids are the same in every run. In a shown output a line `...` stands for any lines the page leaves out, and
a line ending in `...` for the rest of that line.

    python tests/doc_commands.py [--write] docs/tutorial.md ...
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What keeps a block's commands off a test machine; a marker's reason starts with one of these.
NOT_RUN = ("needs a cluster", "needs network access", "needs the Pulumi CLI", "needs the components harness/build.sh builds",
           "runs the test suite")
SHELL_SYNTAX = re.compile(r"[|<>;$`*?&(){}\[\]~]")
_BLOCK = re.compile(r"(?:^<!-- (file|append|shows|not run): (.+?) -->\n)?^```([\w-]*)\n(.*?)^```$", re.M | re.S)
GIT_ENV = {"GIT_AUTHOR_NAME": "Platform Team", "GIT_AUTHOR_EMAIL": "platform@example.com", "GIT_COMMITTER_NAME": "Platform Team",
           "GIT_COMMITTER_EMAIL": "platform@example.com", "GIT_AUTHOR_DATE": "2026-11-30T12:00:00Z",
           "GIT_COMMITTER_DATE": "2026-11-30T12:00:00Z", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}


@dataclass
class Command:
    text: str
    shown: str | None  # the output the page shows (console blocks), None for a command alone
    start: int  # where the shown output starts and ends in the page
    end: int


@dataclass
class Block:
    lang: str
    marker: str  # file | append | shows | not run | ""
    argument: str
    body: str
    line: int
    commands: list[Command] = field(default_factory=list)


def blocks(text: str) -> list[Block]:
    out = []
    for m in _BLOCK.finditer(text):
        marker, argument, lang, body = m.group(1) or "", m.group(2) or "", m.group(3), m.group(4)
        block = Block(lang, marker, argument, body, text[:m.start(3)].count("\n") + 1)
        if lang == "console":
            block.commands = _console(body, m.start(4))
        elif lang in ("sh", "bash", "shell"):
            block.commands = [Command(line.strip(), None, 0, 0) for line in body.splitlines()
                              if line.strip() and not line.lstrip().startswith("#")]
        out.append(block)
    return out


def _console(body: str, offset: int) -> list[Command]:
    commands: list[Command] = []
    position = 0
    for line in body.splitlines(keepends=True):
        if line.startswith("$ "):
            commands.append(Command(line[2:].rstrip("\n"), "", offset + position + len(line), offset + position + len(line)))
        elif commands:
            commands[-1].shown = (commands[-1].shown or "") + line
            commands[-1].end = offset + position + len(line)
        else:
            raise ValueError(f"a console block starts with output, not a `$ ` command: {line!r}")
        position += len(line)
    return commands


def matches(shown: str, actual: str) -> bool:
    """`shown` is `actual` with some lines (`...`) or line ends (`text...`) left out."""
    pattern = ""
    for line in shown.splitlines(keepends=True):
        bare = line.rstrip("\n")
        if bare == "...":
            pattern += r"(?:[^\n]*\n)*?"
        elif bare.endswith("..."):
            pattern += re.escape(bare[:-3]) + r"[^\n]*\n"
        else:
            pattern += re.escape(bare) + r"\n"
    return re.fullmatch(pattern, actual if actual.endswith("\n") or not actual else actual + "\n") is not None


class Session:
    """A reader's shell: a working directory and the environment, across a page's commands."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd = root
        self.env = {**os.environ, **GIT_ENV, "GPUC_CACHE_DIR": str(root.parent / "cache"),
                    "GIT_CONFIG_GLOBAL": str(root.parent / "gitconfig"),
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.ready = False

    def prepare(self) -> Session:
        """The reader's directory, made on first use (most pages run nothing): a clone's checkout of the example fleet,
        one commit, `origin/main` at it."""
        if not self.ready:
            self.ready = True
            self.root.mkdir(parents=True)
            (self.root.parent / "gitconfig").write_text("")
            shutil.copytree(REPO / "intents", self.root / "intents")
            for command in ("git init -q -b main", "git add -A", "git commit -qm 'The example fleet'",
                            "git update-ref refs/remotes/origin/main HEAD"):
                code, output = self._bash(command)
                assert code == 0, output
        return self

    def pushed(self) -> None:
        """Where a page's prose assumes the repository was pushed: `origin/main` at HEAD, unless there is one."""
        self.prepare()
        if self._bash("git rev-parse -q --verify refs/remotes/origin/main")[0]:
            self._bash("git update-ref refs/remotes/origin/main HEAD")

    def run(self, command: str) -> tuple[int, str]:
        self.prepare()
        output, code = "", 0
        for part in (p.strip() for p in command.split(" && ")):
            if part.startswith("cd ") and not SHELL_SYNTAX.search(part[3:]):
                self.cwd = (self.cwd / shlex.split(part[3:])[0]).resolve()
                continue
            code, printed = self._gpuc(part) if self._in_process(part) else self._bash(part)
            output += printed
            if code:
                break
        return code, output

    @staticmethod
    def _in_process(part: str) -> bool:
        words = shlex.split(part, comments=True)
        return bool(words) and words[0] == "gpuc" and not SHELL_SYNTAX.search(part.split(" #")[0])

    def _gpuc(self, part: str) -> tuple[int, str]:
        from compiler.cli import main
        from compiler.diagnostics import show_paths_from

        buffer = io.StringIO()
        with self._environment(), contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            try:
                code = main(shlex.split(part, comments=True)[1:])
            except SystemExit as exc:  # argparse
                code = int(exc.code or 0)
            finally:
                show_paths_from(None)
        return code, buffer.getvalue()

    def _bash(self, part: str) -> tuple[int, str]:
        result = subprocess.run(["bash", "-c", part], cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, check=False)
        return result.returncode, result.stdout

    @contextlib.contextmanager
    def _environment(self) -> Iterator[None]:
        saved_env, saved_cwd = dict(os.environ), os.getcwd()
        os.environ.update(self.env)
        os.chdir(self.cwd)
        try:
            yield
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)


@dataclass
class Finding:
    line: int
    what: str


# Commands other tests run already (each compares its output with a page): parsed here, not run twice.
COVERED = {"gpuc catalog --matrix": "tests/test_reference_pages.py", "gpuc catalog --new-cluster": "tests/test_reference_pages.py",
           "gpuc schema --markdown": "tests/test_reference_pages.py"}
_SPAN = re.compile(r"`(gpuc(?: [^`]*)?)`")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*$|[\[\]|<>]|\.\.\.")


def inline_commands(text: str) -> list[tuple[int, str]]:
    """The `gpuc ...` code spans of the prose (not of fenced blocks), with their lines."""
    prose = re.sub(r"^```.*?^```$", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.M | re.S)
    return [(prose[:m.start()].count("\n") + 1, m.group(1)) for m in _SPAN.finditer(prose)]


def check_inline(session: Session, spans: list[tuple[int, str]]) -> list[Finding]:
    """A complete command (one the parser takes, with no placeholder such as FLEET or [--cluster C]) runs where the page
    leaves the reader and must succeed; a mention (`gpuc plan --state`) must name a real command and real options."""
    from compiler.cli import build_parser

    parser = build_parser()
    commands = {name: sub for action in parser._subparsers._group_actions for name, sub in action.choices.items()}  # type: ignore[union-attr]
    findings, done = [], set()
    for line, span in spans:
        words = shlex.split(span.split(" > ")[0], comments=True)
        if len(words) > 1 and PLACEHOLDER.search(words[1]):
            continue  # `gpuc COMMAND --help`: a form, not a command
        options = {"-h", "--help", *(commands[words[1]]._option_string_actions if len(words) > 1 and words[1] in commands else {})}
        unknown = ([words[1]] if len(words) > 1 and not words[1].startswith("-") and words[1] not in commands else []) + \
            [w.split("=")[0] for w in words[2:] if w.startswith("-") and w.split("=")[0] not in options]
        if unknown:
            findings.append(Finding(line, f"`{span}` names what gpuc does not have: {', '.join(unknown)}"))
            continue
        if any(PLACEHOLDER.search(w) for w in words[1:]) or not _parses(parser, words[1:]) or span in done \
                or " ".join(words) in COVERED:
            continue
        done.add(span)
        if "origin/" in span:
            session.pushed()
        code, output = session.run(" ".join(shlex.quote(w) for w in words))
        if code:
            findings.append(Finding(line, f"`{span}` exited {code} where the page leaves the reader:\n{output}"))
    return findings


def _parses(parser, words: list[str]) -> bool:
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(words)
        except SystemExit as exc:
            return exc.code == 0  # --help, --version
    return True


def run_page(page: Path, workdir: Path, write: bool = False) -> tuple[list[Finding], Session]:
    """Every block of `page` in order in a fresh directory under `workdir`; what differs from the page (with `write`, the
    page is rewritten with what the commands printed instead)."""
    text = page.read_text()
    session = Session(workdir / "reader")
    findings: list[Finding] = []
    replacements: list[tuple[int, int, str]] = []
    for block in blocks(text):
        if block.marker == "not run":
            if not block.argument.startswith(NOT_RUN):
                findings.append(Finding(block.line, f"`not run` needs one of these reasons: {', '.join(NOT_RUN)}"))
            continue
        if block.marker in ("file", "append"):
            target = session.prepare().cwd / block.argument
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "w" if block.marker == "file" else "a", encoding="utf-8") as fh:
                fh.write(block.body)
            continue
        if block.marker == "shows":
            session.prepare()
            held = (session.cwd / block.argument).read_text() if (session.cwd / block.argument).is_file() else "(no such file)"
            if held != block.body:
                findings.append(Finding(block.line, f"{block.argument} holds something else:\n{held}"))
            continue
        for command in block.commands:
            code, output = session.run(command.text)
            if command.shown is None:  # a command alone: it must succeed
                if code:
                    findings.append(Finding(block.line, f"`{command.text}` exited {code}:\n{output}"))
            elif not matches(command.shown, output):
                findings.append(Finding(block.line, f"`{command.text}` printed:\n{output}"))
                replacements.append((command.start, command.end, output))
    findings += check_inline(session, inline_commands(text))
    if write and replacements:
        for start, end, output in sorted(replacements, reverse=True):
            text = text[:start] + output + ("" if output.endswith("\n") else "\n") + text[end:]
        page.write_text(text)
    return findings, session


def main(argv: list[str]) -> int:
    write = "--write" in argv
    pages = [Path(a) for a in argv if a != "--write"]
    sys.path[:0] = [str(REPO)]
    failed = 0
    for page in pages:
        with tempfile.TemporaryDirectory(prefix="gpuc-docs-") as tmp:
            findings, _ = run_page(page.resolve(), Path(tmp), write)
        for f in findings:
            print(f"{page}:{f.line}: {f.what}", file=sys.stderr)
        failed += bool(findings)
    return 1 if failed and not write else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
