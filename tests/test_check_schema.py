"""The structural-schema engine on small schemas: each rule, and that CEL outcomes are memoized."""

from __future__ import annotations

import pytest

from compiler.check.cel_rules import CelRules, compile_rule
from compiler.check.schema import MISSING, Compiler, Rule, SchemaError, validate


def check(schema: dict, value, old=MISSING, structural: bool = True, partial: bool = False):
    node = Compiler(structural=structural).compile(schema)
    return [(v.path, v.message, v.hint) for v in validate(node, value, old, partial=partial, rules=CelRules())]


OBJ = {"type": "object", "properties": {"name": {"type": "string"}, "size": {"type": "integer", "minimum": 1}}, "required": ["name"]}


def test_unknown_fields_are_errors_with_a_suggestion():
    assert check(OBJ, {"name": "a", "sise": 2}) == [(("sise",), "unknown field 'sise'", "did you mean 'size'?")]


def test_an_object_without_properties_keeps_nothing_in_a_crd_but_anything_in_json_schema():
    assert check({"type": "object"}, {"a": 1}) == [(("a",), "unknown field 'a'", "this object takes no fields")]
    assert check({"type": "object"}, {"a": 1}, structural=False) == []
    assert check({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, {"a": {"b": 1}}) == []


def test_types_nullable_and_int_or_string():
    assert check(OBJ, {"name": 5})[0][1] == "must be a string, got integer 5"
    assert check(OBJ, {"name": 5})[0][2] == 'quote it: "5"'
    assert check(OBJ, {"name": None})[0][1] == "must be a string, got null"
    assert check({"type": "string", "nullable": True}, None) == []
    ios = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert check(ios, 3) == [] and check(ios, "3") == []
    assert check(ios, 1.5)[0][1] == "must be an integer or a string, got number 1.5"
    assert check({"type": "integer"}, True)[0][1] == "must be an integer, got boolean True"


def test_required_ranges_enums_patterns_and_formats():
    assert check(OBJ, {"size": 0}) == [((), "required field 'name' is missing", ""), (("size",), "must be at least 1, got 0", "")]
    assert check({"type": "string", "enum": ["Auto", "Manual"]}, "auto")[0][1:] == ("must be one of 'Auto', 'Manual'; got 'auto'", "did you mean 'Auto'?")
    assert check({"type": "string", "pattern": "^[a-z]+$"}, "A1")[0][1] == "'A1' does not match the pattern ^[a-z]+$"
    assert check({"type": "string", "maxLength": 3}, "abcd")[0][1] == "may be at most 3 characters long, got 4"
    assert check({"type": "integer", "format": "int32"}, 2**31)[0][1] == "2147483648 does not fit a int32"
    assert check({"type": "array", "maxItems": 1, "items": {"type": "string"}}, ["a", "b"])[0][1] == "may have at most 1 item(s), has 2"
    assert check({"x-kubernetes-int-or-string": True, "format": "quantity"}, "40GiB")[0][1] == "'40GiB' is not a Kubernetes quantity"
    assert check({"x-kubernetes-int-or-string": True, "format": "quantity", "x-gpuc-minimum-quantity": "1Mi"}, "512Ki")[0][1] == "must be at least 1Mi, got '512Ki'"


def test_list_types_set_and_map():
    s = {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
    assert check(s, ["a", "a"])[0][:2] == ((1,), "duplicate item 'a' (same as item 0)")
    m = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
         "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "string"}}}}
    assert check(m, [{"name": "a"}, {"name": "a", "v": "x"}])[0][:2] == ((1,), "duplicate entry for key 'a' (same as item 0)")
    assert check(m, [{"v": "x"}])[0][:2] == ((0,), "required field 'name' is missing (it identifies the item in this list)")


def test_a_partial_object_may_omit_required_fields():
    assert check(OBJ, {"size": 2}, partial=True) == []
    assert check(OBJ, {"size": 2, "extra": 1}, partial=True)[0][1] == "unknown field 'extra'"


def test_nesting_hints_for_the_wrong_api_shape():
    schema = {"type": "object", "properties": {"name": {"type": "string"},
                                               "exactly": {"type": "object", "properties": {"count": {"type": "integer"}}}}}
    assert check(schema, {"name": "a", "count": 2})[0][2] == "'count' is a field of 'exactly' here: nest it under `exactly:`"
    flat = {"type": "object", "properties": {"name": {"type": "string"}, "count": {"type": "integer"}}}
    assert check(flat, {"name": "a", "exactly": {"count": 2}})[0][2] == \
        "'exactly' does not exist here: its fields (count) belong directly on this object"


def test_cel_rules_see_defaults_and_report_their_message_at_field_path():
    schema = {"type": "object", "properties": {"mode": {"type": "string", "default": "Auto"}, "ids": {"type": "array", "items": {"type": "string"}}},
              "x-kubernetes-validations": [{"rule": "self.mode != 'Auto' || !has(self.ids)", "message": "ids need Manual", "fieldPath": ".ids"}]}
    assert check(schema, {"ids": ["x"]}) == [(("ids",), "ids need Manual", "the CRD's rule: self.mode != 'Auto' || !has(self.ids)")]
    assert check(schema, {"mode": "Manual", "ids": ["x"]}) == []


def test_a_runtime_error_rejects_the_object_and_an_unknown_function_is_a_warning():
    node = Compiler().compile({"type": "object", "properties": {"a": {"type": "string"}},
                               "x-kubernetes-validations": [{"rule": "self.a == 'x'"}, {"rule": "isURL(self.a)"}]})
    found = validate(node, {}, rules=CelRules())
    assert [(v.severity, v.message.split(":")[0]) for v in found] == [
        ("error", "the CRD rule `self.a == 'x'` fails with an error"),
        ("warning", "gpuc cannot evaluate the rule `isURL(self.a)` (cel-python lacks isURL); the API server will")]
    assert "no such member in mapping: 'a'" in found[0].message


def test_transition_rules_run_only_when_there_is_an_old_object():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                                        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "spec is immutable"}]}}}
    assert check(schema, {"spec": {"a": 1}}) == []
    assert check(schema, {"spec": {"a": 1}}, old={"spec": {"a": 1}}) == []
    assert check(schema, {"spec": {"a": 2}}, old={"spec": {"a": 1}}) == [(("spec",), "spec is immutable", "the CRD's rule: self == oldSelf")]


def test_cel_outcomes_are_memoized_on_what_the_rule_can_see(monkeypatch):
    rules = CelRules()
    calls = []
    real = rules._evaluate
    monkeypatch.setattr(rules, "_evaluate", lambda *a: calls.append(1) or real(*a))
    rule = Rule("(has(self.a) ? 1 : 0) + (has(self.b) ? 1 : 0) == 1", "exactly one")
    for name in ("x", "y", "z"):
        assert rules(rule, {"a": name, "c": name}, MISSING) is None  # differs only in values has() cannot see
    assert rules(rule, {"a": "x", "b": "y"}, MISSING)[0] == "exactly one"
    assert len(calls) == 2
    assert compile_rule("self.a.b == 1").accesses[0].path == ("a", "b")
    assert compile_rule("self == oldSelf").accesses is None


def test_malformed_schemas_are_refused():
    with pytest.raises(SchemaError, match="each x-kubernetes-validations entry needs a `rule` string"):
        Compiler().compile({"type": "object", "x-kubernetes-validations": [{"message": "m"}]})
    with pytest.raises(SchemaError, match="not a regular expression"):
        Compiler().compile({"type": "string", "pattern": "("})


def test_schemas_are_loaded_and_compiled_once_per_version_and_kind():
    from compiler.check import builtin

    from check_support import example_cluster, run_checks

    run_checks(example_cluster("prod-east"))
    loads = builtin.builtin_kinds.cache_info().misses
    compiled = builtin.builtin_schema.cache_info().misses
    run_checks(example_cluster("prod-east"))
    assert builtin.builtin_kinds.cache_info().misses == loads
    assert builtin.builtin_schema.cache_info().misses == compiled
    assert builtin.builtin_schema("1.34", "resource.k8s.io", "v1", "ResourceClaim") is \
        builtin.builtin_schema("1.34", "resource.k8s.io", "v1", "ResourceClaim")
