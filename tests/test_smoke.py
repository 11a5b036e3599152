from conftest import EXAMPLES, gpuc


def test_example_fleet_validates():
    result = gpuc("validate", EXAMPLES)
    assert result.code == 0, result.err
    assert "ok:" in result.out
