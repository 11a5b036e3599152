"""`gpuc upgrade`: changes a running cluster cannot take as one commit, planned as ordered steps.

Each side of a change (and every step between them) is a compiled cluster. `shape` reads what a compiled cluster
runs as far as a change between two of them is concerned (the DRA driver release, the operator's custom resource,
who serves each pool, MIG layouts, the Kubernetes minor); `hazards` says what makes the change from one shape to the
next unsafe as one commit; `steps` turns a change with hazards into steps, each the intent plus a `spec.transition`
that holds something back; `report` writes the plan. The pipeline (pipeline.upgrade_fleet) compiles each step and
checks that no two consecutive steps have a hazard the plan does not handle by a precondition.
"""
