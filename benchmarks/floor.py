"""The naive serial floor of a render: what parsing the fleet and writing gpuc's output costs with libyaml alone.

`python -m benchmarks.floor FLEET RENDERED OUT` parses every YAML file under FLEET with yaml.CSafeLoader and
dumps every document of the tree gpuc rendered into RENDERED with yaml.CSafeDumper, one file each under OUT:
no compile, no checks, one process, one core. It prints one JSON line with the CPU seconds of those two
phases (the documents to dump are read from RENDERED before the clock starts, and the interpreter's start-up
is not counted, so this is a floor gpuc's whole process is measured against, not a rival to it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import yaml


def _yaml_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def main() -> None:
    fleet, rendered, out = (Path(a) for a in sys.argv[1:4])
    documents = [doc for path in _yaml_files(rendered) for doc in yaml.load_all(path.read_bytes(), Loader=yaml.CSafeLoader)
                 if doc is not None]
    inputs = _yaml_files(fleet)
    out.mkdir(parents=True, exist_ok=False)
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    parsed = 0
    for path in inputs:
        with path.open("rb") as fh:
            parsed += sum(1 for _ in yaml.load_all(fh, Loader=yaml.CSafeLoader))
    parse_cpu = time.process_time() - start_cpu
    for i, doc in enumerate(documents):
        fd = os.open(out / f"{i:06d}.yaml", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w") as fh:
            yaml.dump(doc, fh, Dumper=yaml.CSafeDumper, sort_keys=False)
    cpu = time.process_time() - start_cpu
    print(json.dumps({"cpu_s": cpu, "parse_cpu_s": parse_cpu, "dump_cpu_s": cpu - parse_cpu, "wall_s": time.perf_counter() - start_wall,
                      "input_files": len(inputs), "input_documents": parsed, "output_documents": len(documents)}))


if __name__ == "__main__":
    main()
