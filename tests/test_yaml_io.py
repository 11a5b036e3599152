"""The YAML edges: the emitter round-trips through a YAML parser, and the loader behaves the same
with and without libyaml."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_corpus import CASES, parse_case

import compiler.load.yaml_source as yaml_source
from compiler.emit.yaml_out import dump
from compiler.pipeline import compile_fleet

from conftest import EXAMPLES

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40))
values = st.recursive(scalars, lambda children: st.one_of(st.lists(children, max_size=4),
                                                          st.dictionaries(st.text(max_size=10), children, max_size=4)),
                      max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=12), values, min_size=1, max_size=5))
def test_any_manifest_value_round_trips(value):
    assert yaml.safe_load(dump(value)) == value


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30).map(lambda s: s + "\nline two\n"))
def test_multiline_strings_round_trip(text):
    assert yaml.safe_load(dump({"data": {"config.yaml": text}})) == {"data": {"config.yaml": text}}


def test_every_example_object_round_trips():
    compilation = compile_fleet(EXAMPLES)
    count = 0
    for compiled in compilation.compiled.values():
        for obj in compiled.objects + compiled.gitops:
            assert yaml.safe_load(dump(obj.manifest)) == obj.manifest
            count += 1
    assert count > 40


def test_values_that_yaml_would_misread_are_quoted():
    for text in ("true", "yes", "off", "null", "~", "1.8", "0x1f", "1e3", "2024-01-01", "1:20", "- a", "a: b", "#x", "*x", "&x",
                 "!x", "|x", ">x", "[x]", "{x}", "@x", "x ", " x", ""):
        assert yaml.safe_load(dump({"k": text})) == {"k": text}, text
    assert dump({"k": "nvcr.io/nim/meta/llama:1.8.3"}) == "k: nvcr.io/nim/meta/llama:1.8.3\n"


def test_loader_without_libyaml_gives_the_same_documents(monkeypatch):
    samples = [(c, parse_case(c)) for c in CASES[::7]]
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        fast = yaml_source.parse_documents(path.read_text(), "f.yaml")
        monkeypatch.setattr(yaml_source, "_Loader", yaml.SafeLoader)
        slow = yaml_source.parse_documents(path.read_text(), "f.yaml")
        monkeypatch.undo()
        assert [(d.value, d.lines) for d in fast] == [(d.value, d.lines) for d in slow]
    assert samples
