"""The Trainer runtime framework: TrainJob + runtime -> objects to apply, validation, status.

Entry points: ``registry.new_runtimes`` (both runtimes by GroupKind key) and
``registry.runtime_key``; plugins live in ``plugins/`` and are listed once in
``plugins/__init__.py``.
"""
