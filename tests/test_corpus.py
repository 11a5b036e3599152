"""The corpus of broken inputs (tests/corpus/cases): every realistic mistake exits 2 with file, line,
field and a message, never a traceback, and leaves the output directory untouched.

Each case file replaces (or adds) one file of the valid fleet in tests/corpus/base. Its header says
what the mistake is, which fleet file it becomes (`# target:`) and what the error must say
(`# expect: <field path> | <message fragment> | ...`); the line the error must point at carries the
comment `# <- here`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compiler.load.yaml_source import MAX_FILE_BYTES

from conftest import REPO, gpuc

CORPUS = REPO / "tests" / "corpus"
CASES = sorted((CORPUS / "cases").glob("*.yaml"))
MARKER = "# <- here"


def parse_case(path: Path) -> tuple[str, str, list[str], int]:
    text = path.read_text(encoding="utf-8")
    header = dict(line[2:].split(": ", 1) for line in text.splitlines() if line.startswith("# ") and ": " in line[:12])
    expect = [part.strip() for part in header["expect"].split("|")]
    line = next(i for i, l in enumerate(text.splitlines(), 1) if MARKER in l)
    return header["target"], text, expect, line


def prepare(tmp_path: Path) -> tuple[Path, Path, dict[str, bytes]]:
    fleet = tmp_path / "fleet"
    shutil.copytree(CORPUS / "base", fleet)
    out = tmp_path / "out"
    (out / "prod").mkdir(parents=True)
    (out / "prod" / "kept.yaml").write_text("previous render\n")
    return fleet, out, {p.as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def assert_rejected(fleet: Path, out: Path, before: dict[str, bytes], target: str, line: int, path: str, fragments: list[str]) -> None:
    result = gpuc("render", fleet, "-o", out)
    assert result.code == 2, result.err + result.out
    assert "Traceback" not in result.err
    location = f"{target}:{1 if path == '(file)' else line}: error: {path}: "
    assert location in result.err, f"expected {location!r} in:\n{result.err}"
    for fragment in fragments:
        assert fragment in result.err, f"expected {fragment!r} in:\n{result.err}"
    assert {p.as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before, "output directory changed"


def test_corpus_is_large_and_well_formed():
    assert len(CASES) >= 150
    for case in CASES:
        target, text, expect, _ = parse_case(case)
        assert text.count(MARKER) == 1, case.name
        assert target.startswith(("clusters/", "workloads/")) and len(expect) >= 2, case.name


def test_base_fleet_is_valid():
    assert gpuc("validate", CORPUS / "base").code == 0


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_broken_input(case, tmp_path):
    target, text, expect, line = parse_case(case)
    fleet, out, before = prepare(tmp_path)
    (fleet / target).parent.mkdir(parents=True, exist_ok=True)
    (fleet / target).write_text(text, encoding="utf-8")
    assert_rejected(fleet, out, before, target, line, expect[0], expect[1:])


def test_non_utf8_bytes(tmp_path):
    fleet, out, before = prepare(tmp_path)
    (fleet / "workloads" / "latin1.yaml").write_bytes("apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {name: caf\xe9}\n".encode("latin-1"))
    assert_rejected(fleet, out, before, "workloads/latin1.yaml", 3, "(document)", ["not UTF-8"])


def test_fifty_megabyte_file(tmp_path):
    fleet, out, before = prepare(tmp_path)
    big = fleet / "workloads" / "dump.yaml"
    with open(big, "wb") as fh:
        line = b"# " + b"x" * 1022 + b"\n"
        for _ in range(50 * 1024):
            fh.write(line)
    assert big.stat().st_size >= 50 * 1024 * 1024 > MAX_FILE_BYTES
    result = gpuc("render", fleet, "-o", out)
    assert result.code == 2 and "workloads/dump.yaml: error: (document): file is 50.0 MiB" in result.err


def test_credentials_never_reach_the_messages(tmp_path):
    key = "nvapi-Abc123def456GHI789jkl012MNO345pqr_Xyz7"
    fleet, out, before = prepare(tmp_path)
    app = fleet / "workloads" / "app.yaml"
    app.write_text(app.read_text().replace("ngcApiKey: ngc-api-secret", f"ngcApiKey: {key}"))
    result = gpuc("render", fleet, "-o", out)
    assert result.code == 2 and "looks like an NGC API key" in result.err
    assert key not in result.err + result.out, "a credential was echoed into the output"
    squash = lambda text: "".join(c for c in text.lower() if c.isalnum())
    assert squash(key)[5:25] not in squash(result.err + result.out), "a credential was echoed, changed, as a name suggestion"
