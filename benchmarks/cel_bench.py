"""CEL selector evaluation over a 5,000-node inventory: the memoising engine against plain cel-python.

`python -m benchmarks.cel_bench FLEET` prints one JSON line. Three selectors the benchmark fleet
compiles to, one of each shape gpuc emits (the chart's GPU class, an attribute test, a capacity
comparison), are evaluated on every device of the synthesized inventory: first plainly, device by
device (the reference), then through the engine with an empty memo, which must give the same answer
(or the same error) for every device. Plain cel-python costs about 0.3 ms a device, hence only three.
"""

from __future__ import annotations

import json
import sys
import time

from compiler.cel import CelEvaluationError, compile_selector
from compiler.pipeline import compile_fleet
from compiler.place import dra_values, synthesize_for
from compiler.place.allocator.pods import cluster_pods, device_classes

SELECTORS = ["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
             "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'",
             "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"]


def _selectors(compiled) -> list[str]:
    texts = {s for cls in device_classes(compiled, dra_values(compiled)).values() for s in cls.selectors}
    for pod in cluster_pods(compiled):
        for claim in pod.claims:
            if claim.spec is not None:
                texts |= {s for request in claim.spec.requests for option in request.options for s in option.selectors}
    return sorted(texts)


def _outcome(fn, device):
    try:
        return fn(device)
    except CelEvaluationError as exc:
        return ("error", str(exc))


def main() -> None:
    compiled = next(iter(compile_fleet(sys.argv[1]).compiled.values()))
    devices = synthesize_for(compiled).devices
    missing = set(SELECTORS) - set(_selectors(compiled))
    if missing:
        raise SystemExit(f"the fleet does not compile to {sorted(missing)}: use benchmarks.fleetgen --plan-nodes")
    texts = SELECTORS
    plain = cached = 0.0
    for text in texts:
        selector = compile_selector(text)
        start = time.perf_counter()
        expected = [_outcome(selector.matches_uncached, d) for d in devices]
        plain += time.perf_counter() - start
        selector.forget()  # a cold memo: what one `gpuc plan` run pays
        start = time.perf_counter()
        got = [_outcome(selector.matches, d) for d in devices]
        cached += time.perf_counter() - start
        if got != expected:
            raise SystemExit(f"the memoised engine disagrees with plain evaluation on {text!r}")
    print(json.dumps({"devices": len(devices), "selectors": len(texts), "plain_s": plain, "cached_s": cached,
                      "speedup": plain / cached, "texts": texts}))


if __name__ == "__main__":
    main()
