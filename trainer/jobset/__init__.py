"""JobSet rules shared by its controllers and its webhooks, below both (no I/O of its own).

``placement``: exclusive placement (a leader pod per topology domain, its followers pinned to
it), read by the Pod reconciler and the Pod admission webhooks alike.
``conditions``, ``objects``: the conditions the JobSet controller sets and the references
between a JobSet and what it owns, shared by its reconcilers and the release steps;
``volume_claims``: JobSet v0.12.0's ``volumeClaimPolicies`` (the PVCs, the claim volumes);
``levels``: what differs between the JobSet releases (``levels/__init__.py``).
"""
