"""cel-python's Lark parser, loaded from precomputed LALR tables instead of built from the grammar.

Building the parser (grammar analysis and LALR tables) costs about 0.12 s CPU in every gpuc process that
parses CEL: a warm render that rebuilds one cluster pays it again, for a parser that is the same every
time. `lark_tables.py` holds the tables Lark itself serializes (plain literals, written by `regenerate()`,
loaded as source like any other module: nothing is read from a cache, nothing is unpickled), stamped with
the Lark version and a digest of cel-python's grammar and parser module. When either differs from what is
installed, the tables are not used and cel-python builds its parser as before (tests/test_cel_parser.py
fails until they are regenerated).
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import Any

import lark
from celpy import InterpretedRunner
from celpy.celparser import CELParser
from lark.grammar import Rule
from lark.lexer import TerminalDef, Token

TABLES = Path(__file__).with_name("lark_tables.py")
# what the tables are loaded with (callables and classes are not data): as cel-python's CELParser passes them
_RUNTIME_OPTIONS = ("tree_class", "lexer_callbacks", "_plugins", "postlex", "transformer", "edit_terminals")


def grammar_digest() -> str:
    """cel-python's grammar and the module that builds its parser (and so chooses the options), as installed."""
    source = Path(sys.modules[CELParser.__module__].__file__ or "")
    h = hashlib.blake2b(digest_size=16)
    for path in (source.with_name("cel.lark"), source):
        h.update(path.read_bytes())
    return h.hexdigest()


def _runtime() -> dict[str, Any]:
    return {"tree_class": InterpretedRunner.tree_node_class, "lexer_callbacks": {"IDENT": CELParser.ambiguous_literals}}


def build() -> lark.Lark:
    """The parser cel-python builds (celparser.CELParser), without `debug`: debug keeps the LR item sets
    as the parse table's states, which are not plain data; parsing is the same."""
    grammar = Path(sys.modules[CELParser.__module__].__file__ or "").with_name("cel.lark").read_text()
    return lark.Lark(grammar, parser="lalr", start="expr", debug=False, g_regex_flags=re.M, propagate_positions=True,
                     maybe_placeholders=False, priority="invert", **_runtime())


def _plain(value: Any) -> Any:
    """Lark's serialization with its enums (regex flags) as the ints they are, checked to be literals only."""
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if value is None or type(value) in (str, bool, float):
        return value
    raise TypeError(f"not plain data in Lark's parser tables: {type(value).__name__}")


def _canonical(table: dict[str, Any]) -> dict[str, Any]:
    """Lark's parse table with its states and tokens numbered in one order: Lark numbers them as its sets of LR
    items iterate, which differs from process to process. Tokens go by name; states in the order a walk from the
    start state reaches them, trying tokens by name. Shift actions (0, state) are renumbered, reductions kept."""
    names = sorted(table["tokens"].values())
    token = {old: names.index(name) for old, name in table["tokens"].items()}
    states: dict[int, dict[int, tuple[int, Any]]] = table["states"]
    order: list[int] = []
    queue = [table["start_states"][s] for s in sorted(table["start_states"])]
    while queue:
        state = queue.pop(0)
        if state in order:
            continue
        order.append(state)
        queue.extend(arg for _, (action, arg) in sorted(states[state].items(), key=lambda kv: token[kv[0]]) if action == 0)
    order.extend(s for s in states if s not in order)
    new = {old: i for i, old in enumerate(order)}
    return {"tokens": {i: name for i, name in enumerate(names)},
            "states": {new[old]: {token[t]: (action, new[arg] if action == 0 else arg)
                                  for t, (action, arg) in sorted(states[old].items(), key=lambda kv: token[kv[0]])}
                       for old in order},
            "start_states": {k: new[v] for k, v in table["start_states"].items()},
            "end_states": {k: new[v] for k, v in table["end_states"].items()}}


def generate() -> str:
    """The text of lark_tables.py for the installed Lark and cel-python (the same text for the same Lark and grammar)."""
    import pprint

    built = build()
    data, memo = built.memo_serialize([TerminalDef, Rule])
    data["options"] = {k: v for k, v in data["options"].items() if k not in _RUNTIME_OPTIONS}
    data["parser"]["parser"] = _canonical(data["parser"]["parser"])
    fmt = lambda value: pprint.pformat(_plain(value), width=150, sort_dicts=True)
    return ('"""cel-python\'s LALR parser tables, as Lark serializes them. Written by compiler.cel.parser.regenerate()\n'
            'after upgrading lark or cel-python (tests/test_cel_parser.py fails until then)."""\n\n'
            "from typing import Any\n\n"
            f"LARK_VERSION = {lark.__version__!r}\n"
            f"GRAMMAR_DIGEST = {grammar_digest()!r}\n"
            "# the rules whose name the grammar loader makes a Token('RULE', name), not a str: the tree's `data`, which\n"
            "# cel-python's error messages quote\n"
            f"RULE_TOKENS = {fmt(sorted({str(r.origin.name) for r in built.rules if isinstance(r.origin.name, Token)}))}\n\n"
            f"DATA: dict[str, Any] = {fmt(data)}\n\n"
            f"MEMO: dict[int, Any] = {fmt(memo)}\n")


def prebuilt() -> lark.Lark | None:
    """The parser from lark_tables.py, or None when they were made for another Lark or cel-python."""
    from . import lark_tables

    if lark_tables.LARK_VERSION != lark.__version__ or lark_tables.GRAMMAR_DIGEST != grammar_digest():
        return None
    tokens = set(lark_tables.RULE_TOKENS)
    memo = {i: _named(item, tokens) for i, item in lark_tables.MEMO.items()}
    return lark.Lark._load_from_dict(lark_tables.DATA, memo, **_runtime())


def _named(item: dict[str, Any], tokens: set[str]) -> dict[str, Any]:
    """A serialized rule whose name the grammar loader makes a Token, as it does (Lark serializes it as a str)."""
    origin = item.get("origin")
    if item.get("__type__") != "Rule" or not isinstance(origin, dict) or origin.get("name") not in tokens:
        return item
    return {**item, "origin": {**origin, "name": Token("RULE", origin["name"])}}


def install() -> None:
    """Give cel-python the prebuilt parser before its first Environment is made (it keeps one per process)."""
    if CELParser.CEL_PARSER is None:
        CELParser.CEL_PARSER = prebuilt()



def regenerate() -> None:
    """`python -c 'from compiler.cel.parser import regenerate; regenerate()'` after upgrading lark or cel-python."""
    TABLES.write_text(generate())
