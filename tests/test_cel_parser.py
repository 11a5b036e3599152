"""cel-python's parser from precomputed tables (compiler/cel/parser.py): the tables are those Lark makes of the
installed grammar, and the parser they load parses, positions and refuses exactly as cel-python's own."""

from __future__ import annotations

import subprocess
import sys

import pytest
from celpy.celparser import CELParseError, CELParser
from lark import Token, Tree

from compiler.cel import lark_tables, parser

VALID = [
    "device.driver == 'gpu.nvidia.com'",
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('570.0.0'))",
    "'gpu.nvidia.com' in device.attributes && device.attributes['gpu.nvidia.com'].type == 'mig'",
    "true ? [1, 2, 3].all(x, x > 0) : {'a': b}.size() == 1u",
    "-1 + 2 * 3 % 4 / 5 - x in y || !false",
    "a.b.c[0].d(e, f).g",
    "r'raw\\n' + \"dq\" + '''triple''' + b'bytes'.string() + string(1.5e3)",
    "x.exists_one(y, y == null) && has(a.b) && size(c) != 0",
    "(a)\n|| (b)\n&& c",
    "a < b && b <= c && c > d && d >= e",
]
INVALID = ["", "a &&", "(a", "a b", "'unterminated", "a.", "[1, 2", "{1: }", "a ? b", "1 +* 2", "device.attributes[", "true.false"]


def _positions(tree: Tree) -> list[tuple]:
    """Every node's and token's place in the text (propagate_positions: error messages quote them)."""
    out = []
    for node in tree.iter_subtrees():
        m = node.meta
        out.append((node.data, m.line, m.column, m.end_line, m.end_column, m.start_pos, m.end_pos) if not m.empty else (node.data,))
        out.extend((c.type, c.value, c.line, c.column, c.start_pos, c.end_pos) for c in node.children if isinstance(c, Token))
    return out


@pytest.fixture(scope="module")
def parsers():
    """cel-python's own parser, built from the grammar as it does it, and the one loaded from the tables."""
    saved = CELParser.CEL_PARSER
    try:
        CELParser.CEL_PARSER = None
        own = CELParser(tree_class=Tree)
        own_parser = CELParser.CEL_PARSER
        CELParser.CEL_PARSER = parser.prebuilt()
        assert CELParser.CEL_PARSER is not None, "the tables were made for another lark or cel-python"
        yield own_parser, CELParser.CEL_PARSER, own
    finally:
        CELParser.CEL_PARSER = saved


def test_the_committed_tables_are_those_lark_makes_of_the_installed_grammar():
    assert parser.TABLES.read_text() == parser.generate(), \
        "lark or cel-python changed: run `python -c 'from compiler.cel.parser import regenerate; regenerate()'`"


@pytest.mark.parametrize("text", VALID)
def test_the_prebuilt_parser_parses_as_cel_pythons_own(parsers, text):
    own, prebuilt, _ = parsers
    expected, got = own.parse(text), prebuilt.parse(text)
    assert repr(got) == repr(expected)  # the same tree, down to which names are Tokens (messages quote them)
    assert _positions(got) == _positions(expected)


@pytest.mark.parametrize("text", INVALID)
def test_the_prebuilt_parser_refuses_as_cel_pythons_own(parsers, text):
    """The same error, message and place (gpuc's findings quote them)."""
    own, prebuilt, adapter = parsers

    def refusal(lark_parser):
        CELParser.CEL_PARSER = lark_parser
        with pytest.raises(CELParseError) as caught:
            adapter.parse(text)
        return str(caught.value), caught.value.line, caught.value.column

    assert refusal(prebuilt) == refusal(own)


@pytest.mark.parametrize("stale", [{"LARK_VERSION": "0.0.0"}, {"GRAMMAR_DIGEST": "0" * 32}])
def test_tables_made_for_another_lark_or_grammar_are_not_used(monkeypatch, stale):
    for name, value in stale.items():
        monkeypatch.setattr(lark_tables, name, value)
    assert parser.prebuilt() is None


def test_a_gpuc_process_parses_cel_with_the_prebuilt_parser():
    """The fast path is the one taken: environment() installs the tables' parser (a fallback would build it)."""
    probe = ("from compiler.cel.engine import environment; from celpy.celparser import CELParser; environment(); "
             "print(CELParser.CEL_PARSER.source_path)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "<deserialized>"
