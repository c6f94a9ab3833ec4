"""``trainer-controller-manager migrate``: a cluster's stored objects rewritten for another API
level (docs/migration.md). Upstream ships no such command.

* ``v2_3.py``: what each v2.1 object becomes at level v2.3 (pure functions, no API calls);
* ``crds.py``: the bridge CRDs of ``config/migration/v2.1-to-v2.3`` (v2.1's schemas accepting
  what migrate writes) and which CRDs a cluster has installed;
* ``cli.py``: the subcommand: read through the API, check everything, print the diffs, write.
"""
