"""The DRA CEL environment: semantics the scheduler has, the cache's exactness, static checks."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from compiler.cel import (
    AttrList,
    CelCompileError,
    CelEvaluationError,
    Published,
    Quantity,
    Ref,
    Semver,
    analyse,
    check_expression,
    compile_selector,
    parse,
)

GPU = "gpu.nvidia.com"


@dataclass
class Dev:
    driver: str = GPU
    attributes: dict = field(default_factory=dict)
    capacity: dict = field(default_factory=dict)


def h100(**attrs) -> Dev:
    base = {"type": "gpu", "productName": "NVIDIA H100 80GB HBM3", "architecture": "Hopper",
            "driverVersion": Semver.parse("580.95.5"), "cudaComputeCapability": Semver.parse("9.0.0")}
    base.update(attrs)
    return Dev(GPU, {GPU: base, "resource.kubernetes.io": {"pcieRoot": "pci0000:15"}},
               {GPU: {"memory": Quantity.parse("81559Mi")}})


def run(expression: str, device: Dev | None = None) -> bool:
    return compile_selector(expression).matches(device or h100())


# ------------------------------------------------------------------------------------- semantics

def test_missing_attribute_in_known_domain_is_an_error_not_false():
    with pytest.raises(CelEvaluationError, match="no such key: 'index'"):
        run("device.attributes['gpu.nvidia.com'].index == 0")
    with pytest.raises(CelEvaluationError):
        run("!(device.attributes['gpu.nvidia.com'].index == 0)")  # negation does not turn the error into true


def test_unknown_domain_is_an_empty_map():
    assert run("has(device.attributes['example.com'].model)") is False
    assert run("!('model' in device.attributes['example.com'])") is True
    with pytest.raises(CelEvaluationError):
        run("device.attributes['example.com'].model == 'x'")


def test_errors_follow_cel_short_circuit_rules():
    assert run("false && device.attributes['gpu.nvidia.com'].missing == 1") is False
    assert run("device.attributes['gpu.nvidia.com'].missing == 1 || true") is True
    assert run("has(device.attributes['gpu.nvidia.com'].missing) && device.attributes['gpu.nvidia.com'].missing == 1") is False


def test_non_bool_result_is_an_error():
    with pytest.raises(CelCompileError, match="must evaluate to bool"):
        compile_selector("device.driver")
    with pytest.raises(CelEvaluationError, match="must evaluate to bool"):
        run("device.attributes['gpu.nvidia.com'].productName")  # dyn statically, a string at run time


def test_values_of_different_types_are_unequal_not_an_error():
    assert run("device.attributes['gpu.nvidia.com'].productName == 1") is False
    assert run("device.attributes['gpu.nvidia.com'].type != true") is True
    assert run("device.attributes['gpu.nvidia.com'].architecture in ['Ampere', 'Hopper']") is True


def test_quantity_functions():
    assert run("quantity('1Gi').compareTo(quantity('1024Mi')) == 0")
    assert run("quantity('1Gi') == quantity('1073741824')")
    assert run("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('79Gi'))")
    assert run("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('80Gi'))")
    assert run("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) == -1")
    assert run("quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi') && quantity('1Gi').add(1).asInteger() == 1073741825")
    assert run("quantity('1').sub(2).sign() == -1 && quantity('0').sign() == 0")
    assert run("quantity('1.5').isInteger() == false && quantity('1500m').asApproximateFloat() == 1.5")
    assert run("isQuantity('40Gi') && !isQuantity('40GiB')")
    with pytest.raises(CelEvaluationError, match="cannot convert quantity 1500m to an integer"):
        run("quantity('1.5').asInteger() == 1")
    with pytest.raises(CelEvaluationError, match="not a Kubernetes quantity"):
        run("quantity('40GB').sign() == 1")
    with pytest.raises(CelEvaluationError, match="no such overload"):
        run("device.capacity['gpu.nvidia.com'].memory > quantity('1Gi')")  # quantities are ordered only by methods


def test_semver_functions():
    assert run("semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3")
    assert run("semver('10.0.0').isGreaterThan(semver('9.0.0'))")  # a string comparison says otherwise
    assert run("semver('1.0.0-alpha').isLessThan(semver('1.0.0')) && semver('1.0.0-alpha.1').compareTo(semver('1.0.0-alpha.beta')) == -1")
    assert run("semver('1.0.0+build.1') == semver('1.0.0')")
    assert run("isSemver('1.2.3') && !isSemver('1.2') && isSemver('v1.2', true) && semver('v01.2', true).minor() == 2")
    assert run("device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0")
    with pytest.raises(CelEvaluationError, match="not a semantic version"):
        run("semver('1.2').major() == 1")
    with pytest.raises(CelEvaluationError, match="no such overload: compareTo\\(Semver, Quantity\\)"):
        run("device.attributes['gpu.nvidia.com'].driverVersion.compareTo(quantity('1')) == 0")


def test_string_extensions_the_driver_demos_use():
    assert run("device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*h100.*$')")


def test_compile_errors_name_the_problem():
    cases = {
        "device.driver == ": "syntax error",
        "foo(device.driver)": "undeclared reference to function 'foo'",
        "gpu.type == 'gpu'": "undeclared reference to 'gpu'",
        "device.model == 'x'": "device has no field 'model'",
        "device.allowMultipleAllocations": "DRAConsumableCapacity",
        "device.attributes['gpu.nvidia.com'].productName.split(' ').size() > 1": "does not implement it",
    }
    for text, message in cases.items():
        with pytest.raises(CelCompileError, match=message.replace("(", "\\(").replace(")", "\\)")):
            compile_selector(text)


def test_a_valid_deeply_nested_selector_compiles_and_evaluates():
    import sys
    limit = sys.getrecursionlimit()
    text = "device.attributes['gpu.nvidia.com'].type == 'gpu' && (" + " || ".join(["true"] * 600) + ")"  # 4.8 KiB
    assert run(text) is True
    assert compile_selector(text).matches_uncached(h100(type="mig")) is False
    assert check_expression(text) == []
    assert sys.getrecursionlimit() == limit  # raised only while cel-python runs


def test_nesting_beyond_what_gpuc_evaluates_is_a_clean_compile_error():
    for text in ("!" * 3000 + "false", "(" * 400 + "true" + ")" * 400):
        with pytest.raises(CelCompileError, match="expression too deeply nested for gpuc's CEL evaluator"):
            compile_selector(text)
        (problem,) = check_expression(text)
        assert problem.code == "too-deep"


def test_expressions_over_10_kib_are_refused_before_compiling():
    text = " || ".join(["true"] * 2000)  # 15,996 bytes
    with pytest.raises(CelCompileError, match="expression is 15996 bytes; the API server accepts at most 10240"):
        compile_selector(text)


def test_expressions_are_compiled_once():
    text = "device.driver == 'gpu.nvidia.com'"
    assert compile_selector(text) is compile_selector(text)


# ------------------------------------------------------------------------------------ references

def refs(text: str) -> set[Ref]:
    return analyse(parse(text)).refs


def test_references_found_from_the_syntax_tree():
    assert refs("device.driver == 'x' && device.attributes['gpu.nvidia.com'].type == 'gpu'") == {
        Ref("driver"), Ref("attributes", GPU, "type")}
    assert refs("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('1Gi')) >= 0") == {Ref("capacity", GPU, "memory")}
    assert refs("device.attributes[\"gpu.nvidia.com\"][\"uuid\"] == 'x'") == {Ref("attributes", GPU, "uuid")}
    assert refs("'uuid' in device.attributes['gpu.nvidia.com']") == {Ref("attributes", GPU)}
    assert refs("device.attributes[device.driver].type == 'gpu'") == {Ref("attributes"), Ref("driver")}
    assert refs("[device][0].driver == 'x'") == {Ref("*")}
    assert refs("[1].exists(device, device == 1)") == set()  # a macro variable shadows `device`


def _numa(*nodes) -> Dev:
    return Dev("example.com", {"example.com": {"numa": AttrList("ints", nodes), "v": AttrList("versions", (Semver.parse("1.2.3"),))}})


def test_list_attributes_are_cel_lists_and_includes_needs_the_gate():
    """DRAListTypeAttributes: the scheduler hands CEL a list attribute as a list whatever the gate, and declares
    `includes` (a list's element, or a scalar's value) only with the gate on."""
    assert run("4 in device.attributes['example.com'].numa", _numa(4, 5)) is True
    assert run("device.attributes['example.com'].numa.exists(n, n > 4)", _numa(3, 4)) is False
    assert run("size(device.attributes['example.com'].numa) == 0", _numa()) is True
    assert run("device.attributes['example.com'].v[0].major() == 1", _numa()) is True
    text = "device.attributes['example.com'].numa.includes(5)"
    assert compile_selector(text, list_attributes=True).matches(_numa(4, 5)) is True
    assert compile_selector(text, list_attributes=True).matches(_numa(4)) is False
    assert compile_selector("device.driver.includes('example.com')", list_attributes=True).matches(_numa()) is True
    with pytest.raises(CelCompileError, match="'includes': it needs the DRAListTypeAttributes feature gate"):
        compile_selector(text)


def test_cache_keeps_lists_of_different_kinds_apart():
    selector = compile_selector("device.attributes['example.com'].l == [1]")
    assert selector.matches(Dev("example.com", {"example.com": {"l": AttrList("ints", (1,))}})) is True
    assert selector.matches(Dev("example.com", {"example.com": {"l": AttrList("bools", (True,))}})) is False


# ---------------------------------------------------------------------------------------- cache

def test_cache_keeps_bool_and_int_apart():
    selector = compile_selector("device.attributes['example.com'].flag == true")
    as_bool = Dev("example.com", {"example.com": {"flag": True}})
    as_int = Dev("example.com", {"example.com": {"flag": 1}})
    assert selector.matches(as_bool) is True
    assert selector.matches(as_int) is False


def test_cache_keeps_versions_with_build_metadata_apart():
    selector = compile_selector("device.attributes['example.com'].v == semver('1.0.0')")
    a = Dev("example.com", {"example.com": {"v": Semver.parse("1.0.0+b1")}})
    b = Dev("example.com", {"example.com": {"v": Semver.parse("1.0.0")}})
    assert selector.matches(a) is selector.matches_uncached(a)
    assert selector.matches(b) is selector.matches_uncached(b)


def test_cache_keys_quantities_by_value_and_format():
    # Only a rejected expression can see a quantity's text, but the memo is exact anyway: 80Gi and
    # 85899345920 are equal quantities that print differently.
    from compiler.cel.engine import FUNCTIONS, Selector, environment
    text = "string(device.capacity['gpu.nvidia.com'].memory) == '80Gi'"
    tree = parse(text)
    selector = Selector(text, environment().program(tree, functions=FUNCTIONS), analyse(tree))
    binary = Dev(GPU, {}, {GPU: {"memory": Quantity.parse("80Gi")}})
    decimal = Dev(GPU, {}, {GPU: {"memory": Quantity.parse("85899345920")}})
    assert selector.matches(binary) is selector.matches_uncached(binary) is True
    assert selector.matches(decimal) is selector.matches_uncached(decimal) is False


def test_cache_stores_errors_too():
    selector = compile_selector("device.attributes['gpu.nvidia.com'].index == 0")
    for _ in range(2):
        with pytest.raises(CelEvaluationError):
            selector.matches(h100())


def _random_inventory(rng: random.Random, n: int) -> list[Dev]:
    domains = [GPU, "example.com", "resource.kubernetes.io"]
    devices = []
    for _ in range(n):
        attrs: dict = {}
        for domain in domains:
            if rng.random() < 0.2:
                continue
            values = attrs.setdefault(domain, {})
            for name in ("type", "model", "index", "flag", "version", "uuid"):
                if rng.random() < 0.25:
                    continue
                values[name] = {
                    "type": lambda: rng.choice(["gpu", "mig", "channel"]),
                    "model": lambda: rng.choice(["A100", "H100", 1, True]),
                    "index": lambda: rng.choice([0, 1, 2, 7, True, "0"]),
                    "flag": lambda: rng.choice([True, False, 1, 0]),
                    "version": lambda: Semver.parse(rng.choice(["1.0.0", "9.0.0", "10.0.0", "1.0.0-rc.1", "1.0.0+b2"])),
                    "uuid": lambda: f"GPU-{rng.randrange(10**6)}",
                }[name]()
        capacity = {GPU: {"memory": Quantity.parse(rng.choice(["40Gi", "81559Mi", "80Gi", "1500m", "0"]))}} if rng.random() < 0.8 else {}
        devices.append(Dev(rng.choice([GPU, "example.com"]), attrs, capacity))
    return devices


DIFFERENTIAL_EXPRESSIONS = [
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "device.attributes['gpu.nvidia.com'].model == 'H100'",
    "has(device.attributes['gpu.nvidia.com'].model) && device.attributes['gpu.nvidia.com'].model in ['A100', 'H100']",
    "device.attributes['example.com'].index == 0 || device.attributes['example.com'].flag == true",
    "device.attributes['example.com'].flag",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) >= 0",
    "device.capacity['gpu.nvidia.com'].memory.isInteger()",
    "device.attributes['gpu.nvidia.com'].version.isGreaterThan(semver('9.0.0'))",
    "device.attributes['gpu.nvidia.com'].version == semver('1.0.0')",
    "'uuid' in device.attributes['resource.kubernetes.io']",
    "device.attributes['resource.kubernetes.io'].exists(k, k == 'model')",
    "device.attributes[device.driver].type == 'mig'",
    "size(device.attributes) >= 2",
    "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-1')",
    # Whole-domain reads: the memo must key on every name and value of the domain, not on the names alone.
    "device.attributes['gpu.nvidia.com'].exists(k, device.attributes['gpu.nvidia.com'][k] == 'H100')",
    "device.attributes['example.com'].all(k, device.attributes['example.com'][k] != true)",
    "device.capacity['gpu.nvidia.com'].exists(k, device.capacity['gpu.nvidia.com'][k].compareTo(quantity('80Gi')) >= 0)",
    "device.attributes.exists(d, device.attributes[d].exists(k, device.attributes[d][k] == 0))",
]


def test_cache_matches_uncached_evaluation_on_a_randomized_inventory():
    rng = random.Random(20260807)
    devices = _random_inventory(rng, 400)
    compared = 0
    for text in DIFFERENTIAL_EXPRESSIONS:
        selector = compile_selector(text)
        order = list(range(len(devices)))
        rng.shuffle(order)  # the memo must not depend on which device filled an entry first
        for i in order:
            def outcome(fn, i=i):
                try:
                    return fn(devices[i])
                except CelEvaluationError as exc:
                    return ("error", str(exc))
            assert outcome(selector.matches) == outcome(selector.matches_uncached), (text, devices[i])
            compared += 1
    assert compared == len(DIFFERENTIAL_EXPRESSIONS) * 400


# --------------------------------------------------------------------------------- static checks

PUBLISHED = Published({GPU: {"type": "string", "productName": "string", "driverVersion": "version", "index": "int"}},
                      {GPU: frozenset({"memory", "memorySlice*"})})


def codes(text: str) -> list[str]:
    return [p.code for p in check_expression(text, PUBLISHED)]


def test_static_check_refuses_converting_a_quantity_or_version_to_a_string():
    for text in ("string(device.capacity['gpu.nvidia.com'].memory) == '80Gi'",
                 "string(quantity('1Gi')) == '1Gi'",
                 "string(device.attributes['gpu.nvidia.com'].driverVersion) == '580.95.5'"):
        (problem,) = check_expression(text, PUBLISHED)
        assert problem.severity == "error" and "Kubernetes' CEL has no string() of a" in problem.message, text
    with pytest.raises(CelCompileError, match=r"no matching overload for 'string' applied to '\(Quantity\)'"):
        compile_selector("string(device.capacity['gpu.nvidia.com'].memory) == '80Gi'")
    assert check_expression("string(device.attributes['gpu.nvidia.com'].index) == '0'", PUBLISHED) == []


def test_static_check_flags_what_the_driver_never_publishes():
    assert codes("device.attributes['gpu.nvidia.com'].minor == 0") == ["unpublished"]
    assert codes("device.attributes['nvidia.com'].type == 'gpu'") == ["unknown-domain"]
    assert codes("device.capacity['gpu.nvidia.com'].memorySlice3.compareTo(quantity('1')) == 0") == []
    assert codes("device.capacity['gpu.nvidia.com'].cores.compareTo(quantity('1')) == 0") == ["unpublished"]
    assert codes("has(device.attributes['gpu.nvidia.com'].minor)") == []  # guarded reads cannot fail


def test_static_check_flags_versions_and_quantities_compared_as_plain_values():
    assert codes("device.attributes['gpu.nvidia.com'].driverVersion >= '550.0.0'") == ["type"]
    assert codes("device.capacity['gpu.nvidia.com'].memory >= 40") == ["type"]
    assert [p.severity for p in check_expression("device.attributes['gpu.nvidia.com'].index == 'zero'", PUBLISHED)] == ["warning"]


def test_static_check_reports_compile_errors_first():
    problems = check_expression("device.attributes['gpu.nvidia.com'].type ==", PUBLISHED)
    assert [p.code for p in problems] == ["syntax"]


def test_derived_attribute_values_are_attribute_types():
    """DRADerivedAttributes: an expression of any type, read as an attribute value; a double or a map is none."""
    from compiler.cel.library import from_cel
    device = _numa(4, 5)
    value = compile_selector("device.attributes['example.com'].numa", any_type=True).value(device)
    assert from_cel(value) == AttrList("ints", (4, 5))
    assert from_cel(compile_selector("'a' + 'b'", any_type=True).value(device)) == "ab"
    with pytest.raises(CelCompileError, match="must evaluate to bool"):
        compile_selector("'a' + 'b'")
    with pytest.raises(ValueError, match="not double"):
        from_cel(compile_selector("1.5", any_type=True).value(device))
    with pytest.raises(ValueError, match="values of one kind"):
        from_cel(compile_selector("[1, 'a']", any_type=True).value(device))
