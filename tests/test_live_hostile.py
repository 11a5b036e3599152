"""A live read of a server that misbehaves, or of a kubeconfig that is not one: a clean exit 2 naming the source,
within the stated timeout, never a hang or a traceback."""

from __future__ import annotations

import threading
import time

import kubectl
import pytest

from compiler.diagnostics import InputError

from conftest import cluster_doc, gpuc, workload_doc, write_fleet

APIS = ["apis"]


def core(parts):
    return bool(parts) and parts[0] == "api"


@pytest.fixture
def fleet(tmp_path):
    return write_fleet(tmp_path / "f", [cluster_doc()], {"w.yaml": [workload_doc(gpu={"count": 1})]})


def plan_live(fleet, tmp_path, hostile):
    with kubectl.ApiServer([], hostile=hostile) as server:
        return gpuc("plan", fleet, "--cluster", "c1", "--kubeconfig", server.kubeconfig(tmp_path / "kc"))


def test_a_server_that_never_answers_is_given_up_after_the_timeout(fleet, tmp_path, monkeypatch):
    import compiler.load.live as live

    monkeypatch.setattr(live, "TIMEOUT", 1)
    release = threading.Event()

    def hang(parts, query):
        release.wait(10)
        return 200, b"{}"

    with kubectl.ApiServer([], hostile=hang) as server:
        kubeconfig = server.kubeconfig(tmp_path / "kc")
        started = time.monotonic()
        with pytest.raises(InputError) as err:
            live.read_live(str(kubeconfig), None)
        took = time.monotonic() - started
        result = gpuc("plan", fleet, "--cluster", "c1", "--kubeconfig", kubeconfig)
        release.set()
    assert "the API server did not answer within 1 s" in err.value.diagnostics[0].message
    assert took < 2.5  # one request, not one per retry (urllib3 would retry three times)
    assert result.code == 2 and "the API server did not answer within 1 s" in result.err


@pytest.mark.parametrize("answer,message", [
    (lambda p, q: (200, b'{"items": [], "metadata": {"continue": "again"}}') if core(p) else None,
     "v1/nodes: the `continue` token 'again' repeats"),
    (lambda p, q: (200, b"<html>sign in</html>") if p == APIS else None, "/apis: the body is not JSON"),
    (lambda p, q: (200, b"[1, 2]") if core(p) else None, "v1/nodes: the body is a JSON list, not an object"),
    (lambda p, q: (200, b'{"items": [1, "x"]}') if core(p) else None, "v1/nodes: `items` is not a list of objects"),
    (lambda p, q: (200, b'{"groups": [{"versions": [{"version": "v1"}]}]}') if p == APIS else None,
     "/apis: an API group without a name"),
    (lambda p, q: (200, b'{"items": [{"metadata": {"name": "n", "labels": ["a=b"]}}]}') if core(p) else None,
     "v1/nodes: an item is not a Kubernetes object: metadata.labels is a list, not a mapping"),
])
def test_a_server_answering_what_no_api_server_does_is_a_clean_error(fleet, tmp_path, answer, message):
    result = plan_live(fleet, tmp_path, answer)
    assert result.code == 2 and "the API server's answer is not the Kubernetes API's: " + message in result.err, result.err
    assert "internal error" not in result.err


@pytest.mark.parametrize("content,what", [
    (b"clusters: [\n", "is not valid YAML"),
    (b"\x00\x01\xff\xfe\x80binary", "is not a kubeconfig"),
    (b"- a\n- b\n", "is not a kubeconfig"),
    (b"clusters: 5\ncontexts: {a: 1}\n", "is not a kubeconfig"),
])
def test_a_broken_kubeconfig_is_a_clean_error_naming_the_file(fleet, tmp_path, content, what):
    path = tmp_path / "kubeconfig"
    path.write_bytes(content)
    result = gpuc("plan", fleet, "--cluster", "c1", "--kubeconfig", path)
    assert result.code == 2 and f"{path}: error: --kubeconfig: cannot use the kubeconfig: the file {what}" in result.err, result.err
