"""The command line: exit codes, JSON output, schema, and the README/CI contract."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import jsonschema
import yaml

from conftest import EXAMPLES, REPO, gpuc, workload_doc


def test_validate_ok_and_json():
    result = gpuc("validate", EXAMPLES, "--output", "json")
    assert result.code == 0
    data = json.loads(result.out)
    assert data["ok"] is True and data["clusters"] == ["lab", "prod-east", "staging", "west"]
    assert data["warnings"] == []  # the example acknowledges the two warnings it would give (test_first_hour)


def test_validate_writes_nothing(fleet, tmp_path):
    path = fleet()
    before = sorted(p.relative_to(path) for p in path.rglob("*"))
    assert gpuc("validate", path).code == 0
    assert sorted(p.relative_to(path) for p in path.rglob("*")) == before


def test_json_errors_carry_file_line_and_path(fleet, monkeypatch):
    monkeypatch.chdir(fleet(workloads={"w.yaml": [workload_doc(gpu={"sharng": "MPS"})]}))
    result = gpuc("validate", ".", "--output", "json")
    assert result.code == 2
    diag = json.loads(result.out)["diagnostics"][0]
    assert diag == {"file": "workloads/w.yaml", "line": 8, "path": "spec.gpu.sharng", "severity": "error",
                    "message": "unknown field 'sharng'", "hint": "did you mean 'sharing'?", "rule": "schema"}


def test_unknown_cluster_for_render(tmp_path):
    result = gpuc("render", EXAMPLES, "-o", tmp_path / "out", "--cluster", "prod-west")
    assert result.code == 2 and "no cluster named 'prod-west'" in result.err
    assert not (tmp_path / "out").exists()


def test_schema_validates_the_example_fleet():
    result = gpuc("schema")
    assert result.code == 0
    schema = json.loads(result.out)
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            errors = list(validator.iter_errors(doc))
            assert not errors, (path, [e.message for e in errors])


def test_schema_rejects_unknown_fields_and_wrong_kinds():
    validator = jsonschema.Draft202012Validator(json.loads(gpuc("schema").out))
    bad = workload_doc(gpu={"sharng": "MPS"})
    assert not validator.is_valid(bad)
    assert not validator.is_valid(dict(workload_doc(), kind="Workload"))


def test_help_starts_without_importing_heavy_modules():
    code = ("import sys; from compiler.cli import build_parser; build_parser().format_help(); "
            "heavy = [m for m in ('pydantic', 'yaml', 'celpy', 'pulumi') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Set up and try it", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_ci_runs_exactly_the_readme_commands():
    commands = _readme_commands()
    assert len(commands) == 2, "the README has one set-up command and one test command"
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines() if line.strip() and not line.startswith("#")]
    for command in commands:
        assert command in ci, f"README command not run by .ci/run: {command}"
    assert "render intents" in commands[0] and "pytest" in commands[1]


def test_a_reader_that_leaves_early_is_not_an_internal_error():
    """`gpuc inventory ... | head`: the pipe closes under gpuc; it stops quietly with 128 + SIGPIPE, as cat does."""
    proc = subprocess.Popen([sys.executable, "-m", "compiler", "inventory", str(EXAMPLES), "--cluster", "prod-east", "--output", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10) == b'{\n  "apiVe'
    proc.stdout.close()  # the inventory is 190 KB: far more than the pipe holds, so gpuc writes into a closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""
