"""Hostile input and leaks: credentials, paths, YAML tricks, and a render killed mid-write."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from compiler.diagnostics import InputError
from compiler.emit.staging import TMP_PREFIX
from compiler.load.yaml_source import parse_documents
from compiler.validate.secrets import credential_kind

from conftest import EXAMPLES, REPO, cluster_doc, gpuc, nim_model, workload_doc
from pulumi_harness import run_stack, stack_config


def _strings(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


@pytest.mark.parametrize("text,kind", [
    ("nvapi-1234567890abcdefghijKLMNOPQRSTUV", "an NGC API key"),
    ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "a GitHub token"),
    ("AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
    ("https://bot:s3cretpass@git.example.com/f.git", "a password in a URL"),
    ("Q29mZmVlIGlzIGEgdmVyeSBnb29kIGRyaW5r7x9K", "a random token"),
])
def test_credentials_are_recognised(text, kind):
    assert credential_kind(text) == kind


@pytest.mark.parametrize("text", [
    "nvcr.io/nim/meta/llama-3.1-70b-instruct:1.8.3", "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
    "ngc-api-secret", "https://git.example.com/platform/gpu-fleet.git", "argocd.argoproj.io/sync-wave",
    "sha256:0123456789abcdef0123456789abcdef", "hopper-80g.gpuc.dev", "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED",
])
def test_ordinary_values_are_not_credentials(text):
    assert credential_kind(text) == ""


def test_rendered_example_fleet_holds_nothing_secret_looking(tmp_path):
    assert gpuc("render", EXAMPLES, "-o", tmp_path).code == 0
    files = [p for p in tmp_path.rglob("*.yaml")]
    assert len(files) > 40
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            for text in _strings(doc):
                assert not credential_kind(text), (path, text)


def test_pulumi_inputs_hold_nothing_secret_looking():
    run = run_stack("prod-east", stack_config("prod-east"))
    inputs = [r.inputs for r in run.resources]
    assert len(inputs) > 20
    for value in inputs:
        for text in _strings(value):
            assert not credential_kind(text), text


def test_secret_values_in_intents_are_refused_and_not_echoed(fleet):
    key = "nvapi-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp"
    w = workload_doc(model=nim_model(), secrets={"ngcApiKey": key})
    result = gpuc("validate", fleet(workloads={"w.yaml": [w]}), "--output", "json")
    assert result.code == 2
    assert key not in result.out and "looks like an NGC API key" in result.out


def test_yaml_cannot_construct_objects():
    with pytest.raises(InputError, match="not allowed"):
        parse_documents("a: !!python/object/apply:os.system ['touch /tmp/pwned']\n", "x.yaml")
    with pytest.raises(InputError, match="not allowed"):
        parse_documents("a: !custom {x: 1}\n", "x.yaml")


def test_crds_path_cannot_escape_the_fleet(fleet, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for path in ("../elsewhere", str(outside)):
        result = gpuc("validate", fleet(clusters=[cluster_doc(crds=path)]))
        assert result.code == 2 and "is outside the fleet directory" in result.err


def test_a_killed_render_leaves_the_previous_tree_and_is_cleaned_up_next_time(fleet, tmp_path):
    path = fleet(clusters=[cluster_doc("c1"), cluster_doc("c2")], workloads={"w.yaml": [workload_doc(gpu={"count": 1})]})
    out = tmp_path / "out"
    assert gpuc("render", path, "-o", out).code == 0
    before = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (path / "workloads" / "w.yaml").write_text(yaml.safe_dump(workload_doc(gpu={"count": 2})))
    # A real SIGKILL in the middle of writing files: no cleanup code can run.
    script = (
        "import os, signal, sys\n"
        "import compiler.emit.staging as staging\n"
        "calls = [0]\n"
        "real = staging.write_file\n"
        "def write_file(path, text):\n"
        "    calls[0] += 1\n"
        "    if calls[0] == 2:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real(path, text)\n"
        "staging.write_file = write_file\n"
        "from compiler.cli import main\n"
        f"sys.exit(main(['render', {str(path)!r}, '-o', {str(out)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True)
    assert done.returncode == -9
    after = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file() and TMP_PREFIX not in str(p)}
    assert after == before, "the previous tree must be intact after a kill"
    assert [p for p in out.iterdir() if p.name.startswith(TMP_PREFIX)], "the killed render left its staging directory"
    assert gpuc("render", path, "-o", out).code == 0
    assert not [p for p in out.iterdir() if p.name.startswith(TMP_PREFIX)], "the next render removes it"


PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n-----END RSA PRIVATE KEY-----\n"
GH_TOKEN = "ghp_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9"


@pytest.mark.parametrize("values,secret", [
    ({"webhook": {"caBundle": PRIVATE_KEY}}, "-----BEGIN RSA PRIVATE KEY-----"),  # public key name, private content
    ({"kubeletPlugin": {"tls": {"caBundle": GH_TOKEN}}}, GH_TOKEN),
    ({GH_TOKEN: "x"}, GH_TOKEN),  # a token as a mapping key
    ({"webhook": {"nvapi-AbCdEfGhIjKlMnOpQrStUvWx": True}}, "nvapi-AbCdEfGhIjKlMnOpQrStUvWx"),
])
def test_credentials_under_any_key_and_as_keys_are_refused_and_redacted(fleet, tmp_path, values, secret):
    path = fleet(clusters=[cluster_doc(draDriver={"values": values})])
    for args in [("validate",), ("render", "-o", tmp_path / "out"), ("validate", "--output", "json"), ("validate", "--output", "sarif")]:
        result = gpuc(args[0], path, *args[1:])
        assert result.code == 2 and "looks like" in result.out + result.err
        assert secret not in result.out + result.err and secret.lower() not in (result.out + result.err).lower()
    assert not (tmp_path / "out").exists()


def test_a_public_key_name_still_holds_certificates(fleet, tmp_path):
    cert = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJrVENCK3dJSkFLSEhJRzBHOGhoeE1BMEdDU3FHU0liM0RRRUJDd1VB"
    path = fleet(clusters=[cluster_doc(draDriver={"version": "25.12.0", "values": {"webhook": {"tls": {"mode": "secret", "secret": {"name": "tls", "caBundle": cert}}}}})])
    assert gpuc("render", path, "-o", tmp_path / "out").code == 0


def test_a_credential_quoted_by_a_yaml_error_is_redacted(fleet):
    text = f"apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {{name: w, namespace: t}}\nspec:\n  {GH_TOKEN}: 1\n  {GH_TOKEN}: 2\n"
    result = gpuc("validate", fleet(workloads={"w.yaml": text}))
    assert result.code == 2 and "duplicate key" in result.err and GH_TOKEN not in result.err
