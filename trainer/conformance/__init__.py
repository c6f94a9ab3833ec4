"""Differential conformance: the same manifests applied to a cluster served by this manager and
to one served by the Go originals (jobset v0.10.1, trainer v2.1.0), the results compared.

``harness`` starts both sides on local control planes, ``runner`` applies scenarios, lets both
settle, collects and normalises what the controllers made and prints every difference;
``divergences.yaml`` lists the deliberate ones (ids from docs/divergences.md).
"""
