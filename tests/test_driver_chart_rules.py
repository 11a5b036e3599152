"""The DRA driver chart's own `fail` rules (facts dra_driver.yaml chartFails) refuse draDriver.values before Argo CD
would show the chart's sync error; tests/real/test_real_charts.py renders each through the real chart."""

from __future__ import annotations

import pytest

from conftest import cluster_doc, gpuc


@pytest.mark.parametrize("driver, kubernetes, values, message", [
    ("25.12.0", "1.34", {"webhook": {"enabled": True, "tls": {"mode": "bogus"}}}, "Invalid webhook TLS mode"),
    ("25.12.0", "1.34", {"webhook": {"enabled": True, "tls": None}}, "Webhook TLS configuration is required"),
    ("25.12.0", "1.34", {"webhook": {"enabled": True, "tls": {"certManager": {"issuerType": "issuer"}}}},
     "Cert-manager issuer name is required"),
    ("0.5.1", "1.36", {"resources": {"computeDomains": {"enabled": True, "imex": {"mode": "hostManaged"}}}},
     "imex.mode=hostManaged requires featureGates.HostManagedIMEXDaemon=true"),
    ("0.5.1", "1.36", {"resources": {"computeDomains": {"enabled": True, "imex": {"isolation": "channel"}}}},
     "isolation=channel is not supported yet"),
])
def test_values_the_driver_chart_refuses_are_refused(fleet, driver, kubernetes, values, message):
    result = gpuc("validate", fleet(clusters=[cluster_doc(driver=driver, kubernetes=kubernetes, draDriver={"values": values})]))
    assert result.code == 1, result.err  # a finding of the check stage, on the values gpuc would write
    assert "spec.draDriver.values: the DRA driver chart" in result.err and message in result.err


def test_the_same_values_pass_where_the_chart_has_no_such_rule_or_they_are_complete(fleet):
    ok = {"webhook": {"enabled": True, "tls": {"mode": "cert-manager", "certManager": {"issuerType": "issuer",
                                                                                      "issuerName": "corp-ca"}}}}
    assert gpuc("validate", fleet(clusters=[cluster_doc(draDriver={"values": ok})])).code == 0
    imex = {"resources": {"computeDomains": {"enabled": True, "imex": {"mode": "hostManaged"}}},
            "featureGates": {"HostManagedIMEXDaemon": True}}
    result = gpuc("validate", fleet(clusters=[cluster_doc(driver="0.5.1", kubernetes="1.36", draDriver={"values": imex})]))
    assert "imex.mode=hostManaged" not in result.err
