"""MIG geometry: does a mix of MIG profiles fit on one physical GPU, and where does each instance sit?

A GPU has a fixed number of compute slices (7 on A100/H100/B200) and memory slices (8). Each profile
takes some of each, and a GPU instance may only start at certain memory-slice offsets. A mix fits when
the compute slices add up and every instance finds a placement that overlaps no other; this is the
check mig-parted and the driver apply, and what naive "sum of gigabytes" arithmetic gets wrong
(4g + 3g fits in 8 memory slices, 4g + 4g does not; 3g + 2g + 2g fits only with the 3g at offset 4).
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import GpuModel, MigGeometry


@dataclass(frozen=True)
class MigFit:
    placements: tuple[tuple[str, int], ...]  # (profile, memory-slice start), in a fixed order
    reason: str = ""

    @property
    def fits(self) -> bool:
        return not self.reason


def fit_mix(geometry: MigGeometry, mix: dict[str, int]) -> MigFit:
    """Place `mix` ({profile: count}) on one GPU, or say why it cannot be placed."""
    for name, count in mix.items():
        profile = geometry.profiles[name]
        if count > profile.max_instances:
            return MigFit((), f"{name} allows at most {profile.max_instances} instance(s) per GPU, asked for {count}")
    compute = sum(geometry.profiles[n].compute_slices * c for n, c in mix.items())
    memory = sum(geometry.profiles[n].memory_slices * c for n, c in mix.items())
    if compute > geometry.compute_slices:
        return MigFit((), f"needs {compute} compute slices, a GPU has {geometry.compute_slices}")
    if memory > geometry.memory_slices:
        return MigFit((), f"needs {memory} memory slices, a GPU has {geometry.memory_slices}")
    # Largest instances first: they have the fewest placements, which keeps the search tiny.
    instances = sorted(
        (n for n, c in mix.items() for _ in range(c)),
        key=lambda n: (-geometry.profiles[n].memory_slices, len(geometry.profiles[n].placements), n),
    )
    chosen: list[tuple[str, int]] = []
    used = [False] * geometry.memory_slices

    def place(i: int) -> bool:
        if i == len(instances):
            return True
        profile = geometry.profiles[instances[i]]
        for start in profile.placements:
            span = range(start, start + profile.memory_slices)
            if any(used[s] for s in span):
                continue
            for s in span:
                used[s] = True
            chosen.append((profile.name, start))
            if place(i + 1):
                return True
            chosen.pop()
            for s in span:
                used[s] = False
        return False

    if not place(0):
        return MigFit((), "no placement of these instances avoids overlapping memory slices")
    return MigFit(tuple(sorted(chosen, key=lambda p: (p[1], p[0]))))


def fit_on_model(model: GpuModel, mix: dict[str, int]) -> MigFit:
    if model.mig is None:
        return MigFit((), f"{model.key} does not support MIG")
    unknown = [n for n in mix if n not in model.mig.profiles]
    if unknown:
        return MigFit((), f"{model.key} has no MIG profile {', '.join(unknown)}")
    return fit_mix(model.mig, mix)
