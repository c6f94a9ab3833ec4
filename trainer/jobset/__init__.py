"""JobSet rules shared by its controllers and its webhooks, below both (no I/O of its own).

``placement``: exclusive placement (a leader pod per topology domain, its followers pinned to
it), read by the Pod reconciler and the Pod admission webhooks alike.
"""
