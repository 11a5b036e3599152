"""`python -m compiler.commands_reference > docs/reference/commands.md`: the commands reference page, from the CLI's own
parser (emit.commands renders it; this module only joins the two, as the orchestration may)."""

from __future__ import annotations

from .cli import build_parser
from .emit.commands import commands_page

if __name__ == "__main__":  # pragma: no cover
    print(commands_page(build_parser()), end="")
