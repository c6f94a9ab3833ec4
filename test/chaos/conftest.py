"""The chaos suite's modules import each other by name (``faultproxy``, ``workload``, ``harness``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
