"""RFC 6902 JSON Patch: ``diff(a, b)`` produces operations turning ``a`` into ``b``; ``apply`` runs them.

Defaulting webhooks answer with a patch from the object the API server sent to the defaulted
one. The diff is structural: dicts key by key, lists element by element for the common prefix,
then additions or removals at the tail (removals from the end so indexes stay valid).
"""

from __future__ import annotations

import copy
from typing import Any

from manager.meta.object import Json

Operation = Json


class JSONPatchError(ValueError):
    """A patch that does not apply to the document."""


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def diff(original: object, modified: object, path: str = "") -> list[Operation]:
    """Operations that transform ``original`` into ``modified``."""
    if isinstance(original, dict) and isinstance(modified, dict):
        ops: list[Operation] = []
        for key in original:
            if key not in modified:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in modified.items():
            child = f"{path}/{escape(key)}"
            if key not in original:
                ops.append({"op": "add", "path": child, "value": copy.deepcopy(value)})
            else:
                ops.extend(diff(original[key], value, child))
        return ops
    if isinstance(original, list) and isinstance(modified, list):
        ops = []
        common = min(len(original), len(modified))
        for i in range(common):
            ops.extend(diff(original[i], modified[i], f"{path}/{i}"))
        for i in range(common, len(modified)):
            ops.append({"op": "add", "path": f"{path}/{i}", "value": copy.deepcopy(modified[i])})
        for i in range(len(original) - 1, common - 1, -1):
            ops.append({"op": "remove", "path": f"{path}/{i}"})
        return ops
    # Scalars: same type and value (so True is not taken for 1, nor 1 for 1.0).
    if type(original) is type(modified) and original == modified:
        return []
    return [{"op": "replace", "path": path, "value": copy.deepcopy(modified)}]


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JSONPatchError(f"invalid JSON pointer {path!r}")
    return [unescape(t) for t in path[1:].split("/")]


def _parent(doc: Any, tokens: list[str]) -> Any:
    return _get(doc, tokens[:-1])


def _index(node: list[Any], token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(node)
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise JSONPatchError(f"invalid array index {token!r}")
    i = int(token)
    if i > len(node) or (i == len(node) and not allow_end):
        raise JSONPatchError(f"array index {i} out of range")
    return i


def apply(document: object, operations: list[Operation]) -> object:
    """Apply add/remove/replace/test/move/copy to a deep copy of ``document``."""
    doc = copy.deepcopy(document)
    for op in operations:
        kind, tokens = op.get("op"), _tokens(op.get("path", ""))
        if kind == "test":
            if _get(doc, tokens) != op.get("value"):
                raise JSONPatchError(f"test failed at {op['path']}")
            continue
        if kind in ("move", "copy"):
            value = copy.deepcopy(_get(doc, _tokens(op["from"])))
            if kind == "move":
                doc = _remove(doc, _tokens(op["from"]))
            doc = _add(doc, tokens, value)
            continue
        if kind == "add":
            doc = _add(doc, tokens, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, tokens)
        elif kind == "replace":
            doc = _remove(doc, tokens) if tokens else None
            doc = _add(doc, tokens, copy.deepcopy(op["value"]))
        else:
            raise JSONPatchError(f"unknown op {kind!r}")
    return doc


def _get(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            if token not in node:
                raise JSONPatchError(f"path segment {token!r} not found")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, allow_end=False)]
        else:
            raise JSONPatchError(f"cannot descend into {type(node).__name__}")
    return node


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise JSONPatchError("cannot add to a scalar")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise JSONPatchError("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JSONPatchError(f"cannot remove missing key {last!r}")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, allow_end=False)]
    else:
        raise JSONPatchError("cannot remove from a scalar")
    return doc
