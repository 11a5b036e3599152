"""Pulumi program: stack `<cluster>` applies the objects `gpuc render` writes to rendered/<cluster>/.

Config (stacks/Pulumi.<cluster>.yaml): `gpuc:fleet` (the fleet directory, relative to the project
root), optional `gpuc:kubeconfig` (path or content) and `gpuc:context`.
"""

import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Import this checkout's compiler and modules, whatever else the virtualenv has installed, so the
# stack applies what this checkout renders.
if sys.path[:1] != [str(PROJECT_ROOT)]:
    sys.path.insert(0, str(PROJECT_ROOT))

from modules.program import deploy  # noqa: E402  (needs the path above)

deploy(PROJECT_ROOT)
