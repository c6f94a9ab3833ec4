"""Single-layer OCI image archives written without any container tool.

A real node (``Environment(real_node=True)``) reaches no registry, so the images it runs are
imported into containerd (``ctr images import``): the pause image of every pod sandbox, and
whatever small images a test runs. An image here is one uncompressed layer holding the given
files (a static binary, mostly) and a config with the entrypoint, user and env; the archive is
the OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/...``) as a tar, which
``ctr images import`` reads, with the image name in the index annotation containerd uses
(``io.containerd.image.name``). Everything is deterministic: the same files give the same digests.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
NAME_ANNOTATION = "io.containerd.image.name"
REF_ANNOTATION = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class File:
    """One file of the layer: its bytes and mode (owned by root)."""

    data: bytes
    mode: int = 0o755


def _tar(entries: Mapping[str, File]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directories = sorted({str(Path(p).parent) for p in entries} - {"."})
        for directory in directories:  # parents first, so the layer has every directory
            parts = Path(directory).parts
            for depth in range(1, len(parts) + 1):
                name = str(Path(*parts[:depth]))
                if name not in tar.getnames():
                    info = tarfile.TarInfo(name)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                    tar.addfile(info)
        for path in sorted(entries):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(entries[path].data), entries[path].mode, 0
            tar.addfile(info, io.BytesIO(entries[path].data))
    return buffer.getvalue()


def _blob(data: bytes, media_type: str) -> tuple[dict[str, object], str]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return {"mediaType": media_type, "digest": digest, "size": len(data)}, digest


def image_archive(
    name: str,
    files: Mapping[str, File],
    *,
    entrypoint: Sequence[str],
    user: str = "",
    env: Sequence[str] = (),
) -> bytes:
    """The OCI layout tar of a one-layer image called ``name`` (``localhost/x/y:tag``) with
    ``files`` (paths relative to ``/``)."""
    if ":" not in name.rsplit("/", 1)[-1]:
        raise ValueError(f"image name {name!r} needs a tag")
    for path in files:
        if path.startswith("/") or ".." in Path(path).parts:
            raise ValueError(f"layer path {path!r} must be relative, without '..'")
    layer = _tar(files)
    layer_desc, layer_digest = _blob(layer, LAYER_TYPE)
    config_json: dict[str, object] = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": list(entrypoint),
            **({"User": user} if user else {}),
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", *env],
        },
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }
    config = json.dumps(config_json, sort_keys=True).encode()
    config_desc, _ = _blob(config, CONFIG_TYPE)
    manifest = json.dumps(
        {"schemaVersion": 2, "mediaType": MANIFEST_TYPE, "config": config_desc, "layers": [layer_desc]},
        sort_keys=True,
    ).encode()
    manifest_desc, _ = _blob(manifest, MANIFEST_TYPE)
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                **manifest_desc,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {NAME_ANNOTATION: name, REF_ANNOTATION: name.rsplit(":", 1)[1]},
            }
        ],
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(path: str, data: bytes) -> None:
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))

        add("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        add("index.json", json.dumps(index, sort_keys=True).encode())
        for blob in (layer, config, manifest):
            add(f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}", blob)
    return out.getvalue()


def binary_image(name: str, binary: Path, *, user: str = "", args: Sequence[str] = ()) -> bytes:
    """An image whose only file is ``binary`` (a static executable) at ``/<its name>``, run as
    ``user`` with ``args``."""
    target = binary.name
    return image_archive(
        name, {target: File(binary.read_bytes())}, entrypoint=[f"/{target}", *args], user=user
    )
