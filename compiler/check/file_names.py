"""Every object's file in the rendered tree is a name the file system takes.

Kubernetes names reach 253 characters (a DeviceClass is named after its GpuDeviceClass, a DNS subdomain);
the tree's file name adds the wave, the kind and the namespace, and Linux file systems (ext4, xfs, tmpfs,
overlayfs) take at most 255 bytes per name (NAME_MAX). A fleet `validate` passes is one `render` writes.
"""

from __future__ import annotations

from collections.abc import Iterable

from .model import ClusterContext, Finding

NAME_MAX = 255


def check_file_names(ctx: ClusterContext) -> Iterable[Finding]:
    for obj in ctx.compiled.objects:
        size = len(obj.file_name.encode())
        if size > NAME_MAX:
            yield Finding(obj, ("metadata", "name"),
                          f"the rendered file '{obj.file_name[:40]}...' would be {size} bytes long; file systems take at most "
                          f"{NAME_MAX} bytes per name",
                          f"shorten the name by {size - NAME_MAX} characters or more")
