"""A fleet repository is untrusted: a base commit crafted with git's plumbing, a directory gpuc cannot read, CRD
paths that lead out of the fleet and oversized files are clean errors, and nothing is written or read outside."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import cluster_doc, gpuc, workload_doc, write_fleet

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, input=stdin, capture_output=True, check=True).stdout.decode().strip()


@pytest.fixture
def repo(tmp_path):
    fleet = write_fleet(tmp_path / "repo" / "fleet", [cluster_doc("a")],
                        {"a.yaml": [workload_doc("wa", clusters=["a"], gpu={"count": 1})]})
    git(fleet.parent, "init", "-q", "-b", "main")
    git(fleet.parent, "add", "-A")
    git(fleet.parent, "commit", "-qm", "base")
    return fleet


def graft(repo: Path, where: tuple[str, ...], entries: bytes) -> None:
    """Commit a tree whose directory `where` gains `entries` (mktree -z records), as a hostile author could."""
    def rebuild(tree: str, path: tuple[str, ...]) -> str:
        listing = subprocess.run(["git", "ls-tree", "-z", tree], cwd=repo, capture_output=True, check=True).stdout
        records = [r for r in listing.split(b"\0") if r]
        if not path:
            return git(repo, "mktree", "-z", stdin=b"\0".join(records + [entries]) + b"\0")
        out = []
        for r in records:
            meta, _, name = r.partition(b"\t")
            if name.decode() == path[0]:
                r = meta.rsplit(b" ", 1)[0] + b" " + rebuild(meta.split()[2].decode(), path[1:]).encode() + b"\t" + name
            out.append(r)
        return git(repo, "mktree", "-z", stdin=b"\0".join(out) + b"\0")

    tree = rebuild(git(repo, "rev-parse", "HEAD^{tree}"), where)
    commit = git(repo, "commit-tree", tree, "-p", "HEAD", "-m", "hostile")
    git(repo, "update-ref", "refs/heads/main", commit)


def blob(repo: Path, text: bytes) -> str:
    return git(repo, "hash-object", "-w", "--stdin", stdin=text)


def nested(repo: Path, names: list[str], leaf: bytes) -> bytes:
    """A chain of trees named `names` ending in the record `leaf`: the record to graft."""
    record = leaf
    for name in reversed(names):
        tree = git(repo, "mktree", "-z", stdin=record + b"\0")
        record = f"040000 tree {tree}\t{name}".encode()
    return record


def test_a_base_with_dot_dot_entries_writes_nothing_outside(repo, tmp_path):
    top = repo.parent
    name = f"pwned-{uuid.uuid4().hex}.yaml"
    leaf = f"100644 blob {blob(top, b'kind: Pwned')}\t{name}".encode()
    graft(top, ("fleet", "workloads"), nested(top, ["..", "..", "..", "..", ".."], leaf))
    result = gpuc("diff", repo, "--base", "HEAD")
    assert result.code == 2 and "is not a path a checkout would write" in result.err and "Traceback" not in result.err
    assert not list(Path("/tmp").glob(name)) and not list(tmp_path.rglob(name)) and not list(Path("/").glob(name))


def test_a_base_with_a_newline_in_a_name_and_a_submodule_is_read_as_a_checkout(repo):
    top = repo.parent
    text = (top / "fleet" / "workloads" / "a.yaml").read_text().replace("name: wa", "name: wb")
    odd = f"100644 blob {blob(top, text.encode())}\tb\nc.yaml".encode()
    sub = git(top, "commit-tree", git(top, "mktree", stdin=b""), "-m", "sub")
    graft(top, ("fleet", "workloads"), odd + b"\0" + f"160000 commit {sub}\tvendored".encode())
    (repo / "workloads" / "b\nc.yaml").write_text(text)  # the head as a checkout of the base has it
    (repo / "workloads" / "vendored").mkdir()
    for args in [(), ("--no-cache",)]:
        result = gpuc("diff", repo, "--base", "HEAD", *args)
        assert result.code == 0, result.err
        assert "No change to any cluster" in result.out


def test_an_unreadable_workloads_subdirectory_is_an_error(repo, monkeypatch):
    (repo / "workloads" / "team").mkdir()
    (repo / "workloads" / "team" / "w.yaml").write_text("kind: GpuWorkload\n")
    real = os.scandir

    def scandir(path=".", *a, **k):  # the tests run as root, which chmod cannot keep out
        if str(path).endswith("team"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "scandir", scandir)
    for args in [("validate",), ("render", "-o", repo.parent / "out")]:
        result = gpuc(args[0], repo, *args[1:])
        assert result.code == 2 and "workloads/team: error: (directory): cannot read directory: Permission denied" in result.err


def test_crds_leading_out_of_the_fleet_are_refused_before_they_are_opened(repo, tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "crd.yaml").write_text("kind: CustomResourceDefinition\n")
    (repo / "crds").mkdir()
    os.symlink(outside / "crd.yaml", repo / "crds" / "linked.yaml")
    opened: list[str] = []
    real = Path.read_bytes

    def read_bytes(self):
        opened.append(str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    for spec in ("crds", "outside-link"):
        if spec == "outside-link":
            os.symlink(outside, repo / "outside-link")
        (repo / "clusters" / "a.yaml").write_text((repo / "clusters" / "a.yaml").read_text().split("  crds:")[0]
                                                  + f"  crds: {spec}\n")
        result = gpuc("render", repo, "-o", tmp_path / "out")
        assert result.code == 2 and ("outside the fleet" in result.err), result.err
        assert not [p for p in opened if "outside" in p and "crd.yaml" in p]
    (repo / "clusters" / "a.yaml").write_text((repo / "clusters" / "a.yaml").read_text().split("  crds:")[0])
    result = gpuc("render", repo, "-o", tmp_path / "out", "--crds", repo / "crds")
    assert result.code == 2 and "linked.yaml" in result.err and "outside" in result.err


def test_the_size_limit_holds_before_the_cache_parses_anything(repo, tmp_path, monkeypatch):
    import compiler.cache.keys as keys
    from compiler.cache.plan import Settings, safe_plan
    from compiler.cache.store import CacheStore

    big = repo / "workloads" / "big.yaml"
    big.write_bytes(b"# " + b"x" * (4 * 1024 * 1024) + b"\n")
    parsed: list[int] = []
    real = keys.scan
    monkeypatch.setattr(keys, "scan", lambda data: parsed.append(len(data)) or real(data))
    import compiler.cache.plan as plan

    monkeypatch.setattr(plan, "scan", keys.scan)
    assert safe_plan(repo, Settings(), CacheStore(tmp_path / "cache"), None) is None  # the full build says why
    assert all(n <= 4 * 1024 * 1024 for n in parsed)
    result = gpuc("render", repo, "-o", tmp_path / "out")
    assert result.code == 2 and "big.yaml: error: (document): file is 4.0 MiB" in result.err
