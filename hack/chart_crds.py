"""Write the Helm chart's CRD copies (charts/kubeflow-trainer/files/crds/<level>), for `make manifests`.

The chart renders the CRDs of its API level as templates, and Helm stores the whole chart and
the rendered manifest in one release Secret, which the API server caps at 1 MiB. With their
field descriptions the CRDs of both levels (about 6 MB) make a release of about 1.9 MiB, so the
copies leave every `description` out (about 2 MB; the release then takes about 0.3 MiB). Nothing
else differs from the sources (a unit test compares them parsed).

    python hack/chart_crds.py            # both levels
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART_CRDS = ROOT / "charts" / "kubeflow-trainer" / "files" / "crds"
BASES = ROOT / "config" / "crd" / "bases"
# level: the source files, the first directory's file of a name winning
SOURCES: dict[str, tuple[Path, ...]] = {
    "v2.1": (BASES,),
    "v2.3": (ROOT / "config" / "overlays" / "v2.3" / "crd", BASES),
}


def without_descriptions(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [without_descriptions(v) for v in value]
    return value


def sources(level: str) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for directory in SOURCES[level]:
        for path in sorted(directory.glob("*.yaml")):
            found.setdefault(path.name, path)
    return found


def write(level: str) -> list[Path]:
    out = CHART_CRDS / level
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.yaml"):
        stale.unlink()
    written = []
    for name, path in sources(level).items():
        crd = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
        text = yaml.dump(without_descriptions(crd), Dumper=yaml.CSafeDumper, sort_keys=False, width=1 << 16)
        (out / name).write_text("---\n" + text)
        written.append(out / name)
    return written


def main(argv: list[str]) -> int:
    for level in argv or sorted(SOURCES):
        for path in write(level):
            print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
