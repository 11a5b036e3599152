"""Docs kept true by running them (issue 46): every shell command of the README and docs/ runs, in order, in a fresh git
repository, and prints what the page shows, or is marked as needing what a test machine lacks; every `gpuc` command
in the prose names real commands and options, and runs where it is complete. The runner: tests/doc_commands.py."""

from __future__ import annotations

import pytest
import yaml

from conftest import REPO
from doc_commands import NOT_RUN, blocks, run_page

PAGES = [REPO / "README.md", REPO / "SECURITY.md", *sorted((REPO / "docs").rglob("*.md"))]


def _name(page):
    return page.relative_to(REPO).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_command_of_a_page_runs_and_prints_what_the_page_shows(page, tmp_path):
    findings, _ = run_page(page, tmp_path)
    assert not findings, "\n".join(f"{_name(page)}:{f.line}: {f.what}" for f in findings) + \
        f"\n(where a shown output is stale: python tests/doc_commands.py --write {_name(page)})"


def test_every_shell_block_of_the_docs_is_run_or_says_why_not():
    """A block of shell commands is a console block (commands with their output), an sh block (commands that must
    succeed), or marked `not run` with a reason from a short list: nothing is left unchecked in silence."""
    unchecked, marked = [], 0
    for page in PAGES:
        for block in blocks(page.read_text()):
            shell = block.lang in ("console", "sh", "bash", "shell") or any(line.startswith("$ ") for line in block.body.splitlines())
            if shell and block.lang not in ("console", "sh", "bash", "shell"):
                unchecked.append(f"{_name(page)}:{block.line}: shell commands in a ```{block.lang} block")
            marked += block.marker == "not run"
    assert unchecked == []
    assert 5 <= marked <= 12, "most commands run; only what needs a cluster, the network, Pulumi or the build is marked"
    assert all(reason.startswith("needs") or reason == "runs the test suite" for reason in NOT_RUN)


def test_the_tutorial_and_the_fleet_repository_page_run_end_to_end_in_a_fresh_git_repository(tmp_path):
    """The issue's path: README -> tutorial -> fleet repository page, every command in order, none failing unless the page
    shows it failing on purpose, and the repository ends committed with rendered/ in it (no `.gitignore` in the way)."""
    findings, session = run_page(REPO / "docs" / "tutorial.md", tmp_path / "tutorial")
    assert findings == []
    assert session.cwd.name == "my-fleet" and (session.cwd / ".git").is_dir()
    code, tracked = session.run("git ls-files rendered")
    assert code == 0 and "rendered/prod-east/kustomization.yaml" in tracked.splitlines()
    assert session.run("git status --porcelain") == (0, "")
    findings, session = run_page(REPO / "docs" / "how-to" / "fleet-repository.md", tmp_path / "repository")
    assert findings == []
    assert session.run("git status --porcelain") == (0, "")
    assert {".github/workflows/gpuc-diff.yaml", "rendered/prod-east/argocd/kustomization.yaml", "stacks/__main__.py"} \
        <= set(session.run("git ls-files")[1].splitlines())


def test_the_fleet_repositorys_pulumi_stack_registers_what_it_renders(tmp_path):
    """Pulumi with the fleet in its own repository: the page's project and program, run under Pulumi's mocks, register
    exactly the objects `rendered/` holds."""
    from pulumi_harness import registered_objects, rendered_objects, run_stack

    findings, session = run_page(REPO / "docs" / "how-to" / "fleet-repository.md", tmp_path)
    assert findings == []
    root = session.cwd
    config = {k: str(v) for k, v in yaml.safe_load((root / "stacks" / "Pulumi.prod-east.yaml").read_text())["config"].items()}
    run = run_stack("prod-east", config, program=root / "stacks" / "__main__.py")
    assert registered_objects(run) == rendered_objects(root / "rendered" / "prod-east")
