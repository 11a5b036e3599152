"""The Pulumi CLI and Kubernetes provider built by harness/build.sh, running a stack program for real.

The engine is the built `pulumi` CLI, the provider the built `pulumi-resource-kubernetes`, installed in
PULUMI_HOME (in the harness cache) as the plugin version the pulumi-kubernetes Python package asks for;
plugin downloads are switched off, so a missing piece fails instead of being fetched. State lives in a
`file://` backend in the test's directory, secrets use a passphrase.

The Python language host (pulumi-language-python) cannot be built from the Go module proxy, so the
program runs through the Automation API's inline programs: the CLI's `--client` mode, where the Python
SDK itself serves the language runtime and the engine, the provider and the API server are the real ones.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto

from . import components

PASSPHRASE = "gpuc-harness-passphrase"


def home() -> Path:
    """PULUMI_HOME: build.sh links the CLI to bin/pulumi and installs the provider under plugins/."""
    return components.cache_dir() / "pulumi-home"


def plugin_version() -> str:
    return components.pins()["PULUMI_KUBERNETES_PLUGIN_VERSION"]


def check_built() -> None:
    """The CLI, the provider and the installed plugin, or ComponentMissing naming the build command."""
    pins = components.pins()
    components.binary(f"pulumi-{pins['PULUMI_CLI_VERSION']}")
    components.binary(f"pulumi-resource-kubernetes-{pins['PULUMI_KUBERNETES_PROVIDER_VERSION']}")
    plugin = home() / "plugins" / f"resource-kubernetes-v{plugin_version()}" / "pulumi-resource-kubernetes"
    if not plugin.is_file() or not (home() / "bin" / "pulumi").is_file():
        raise components.ComponentMissing(f"the Kubernetes provider is not installed as plugin {plugin_version()} in {home()}: "
                                          "run harness/build.sh")


@dataclass(frozen=True)
class Step:
    """One resource's step in a preview or an update, as the engine reported it."""

    op: str  # same, create, update, replace, create-replacement, delete-replaced, delete, ...
    type: str  # kubernetes:resource.k8s.io/v1:DeviceClass, gpuc:index:GpuWorkload, ...
    name: str  # the resource's logical name (the URN's last part)
    inputs: dict[str, Any]  # the planned inputs (new state), empty for deletes
    diffs: tuple[str, ...]  # the properties that changed
    keys: tuple[str, ...]  # the properties that force a replacement


@dataclass
class Run:
    steps: list[Step] = field(default_factory=list)
    summary: dict[str, int] = field(default_factory=dict)
    stdout: str = ""

    def ops(self, *, custom_only: bool = True) -> dict[tuple[str, str], set[str]]:
        """(type, name) -> the ops the engine took for it (a replacement has several)."""
        out: dict[tuple[str, str], set[str]] = {}
        for s in self.steps:
            if custom_only and (s.type.startswith("gpuc:") or s.type.startswith("pulumi:")):
                continue
            out.setdefault((s.type, s.name), set()).add(s.op)
        return out


class Stack:
    """One stack of a project, with its state in `workdir`/state and its workspace in `workdir`/work.

    `project_file` and `stack_file` are the project's own Pulumi.yaml and Pulumi.<stack>.yaml, copied into
    the workspace as they are (the stack file into the project's stackConfigDir); `config` adds to them.
    """

    def __init__(self, name: str, program: Callable[[], None], workdir: Path, project_file: Path, stack_file: Path,
                 config: dict[str, tuple[str, bool]]) -> None:
        check_built()
        work, state = workdir / "work", workdir / "state"
        work.mkdir(parents=True, exist_ok=True)
        state.mkdir(parents=True, exist_ok=True)
        shutil.copy(project_file, work / "Pulumi.yaml")
        config_dir = work / str(_yaml(project_file).get("stackConfigDir", "."))
        config_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(stack_file, config_dir / f"Pulumi.{name}.yaml")
        self.env = {
            "PULUMI_HOME": str(home()),
            "PULUMI_BACKEND_URL": f"file://{state}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
        }
        command = auto.PulumiCommand(root=str(home()), skip_version_check=True)
        opts = auto.LocalWorkspaceOptions(work_dir=str(work), pulumi_home=str(home()), env_vars=self.env,
                                          secrets_provider="passphrase", pulumi_command=command)
        self.stack = auto.create_or_select_stack(name, project_name=str(_yaml(project_file)["name"]), program=program, opts=opts)
        for key, (value, secret) in config.items():
            self.stack.set_config(key, auto.ConfigValue(value, secret=secret))

    def set_config(self, key: str, value: str) -> None:
        self.stack.set_config(key, auto.ConfigValue(value))

    def _run(self, verb: str, **kwargs: Any) -> Run:
        run = Run()

        def on_event(event: auto.EngineEvent) -> None:
            pre = event.resource_pre_event
            if pre is not None:
                m = pre.metadata
                run.steps.append(Step(op=_text(m.op), type=m.type, name=m.urn.rsplit("::", 1)[1],
                                      inputs=dict((m.new.inputs or {}) if m.new else {}), diffs=tuple(m.diffs or ()),
                                      keys=tuple(m.keys or ())))

        result = getattr(self.stack, verb)(on_event=on_event, color="never", **kwargs)
        run.stdout = result.stdout
        summary = getattr(result, "change_summary", None)
        if summary is None and getattr(result, "summary", None) is not None:
            summary = result.summary.resource_changes
        run.summary = {_text(k): v for k, v in (summary or {}).items()}
        return run

    def preview(self) -> Run:
        return self._run("preview", diff=True)

    def up(self) -> Run:
        return self._run("up")

    def destroy(self) -> Run:
        return self._run("destroy")

    def outputs(self) -> dict[str, Any]:
        return {k: v.value for k, v in self.stack.outputs().items()}


def _text(op: Any) -> str:
    """An OpType (or its string, as some SDK versions hand it over) as its text."""
    return str(getattr(op, "value", op))


def _yaml(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    return doc if isinstance(doc, dict) else {}
