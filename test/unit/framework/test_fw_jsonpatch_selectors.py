"""JSON Patch diff (property: applying diff(a, b) to a gives b) and label selector parsing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manager.cache import selectors
from manager.cache.selectors import SelectorError
from manager.webhook.jsonpatch import JSONPatchError, apply, diff

keys = st.text(alphabet="ab/~c", min_size=0, max_size=3)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, width=32)
    | st.text(max_size=3)
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)


def strict_equal(a: Any, b: Any) -> bool:
    """Equality that tells True from 1 and 1 from 1.0, as JSON does."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=400, deadline=None)
@given(json_values, json_values)
def test_apply_diff_gives_target(a: Any, b: Any) -> None:
    ops = diff(a, b)
    assert strict_equal(apply(a, ops), b)
    if strict_equal(a, b):
        assert ops == []


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, json_values, max_size=5))
def test_diff_of_identical_documents_is_empty(a: dict[str, Any]) -> None:
    assert diff(a, a) == []


def test_diff_escapes_pointer_tokens_and_removes_from_the_end() -> None:
    assert diff({"a/b": 1, "c~d": 1}, {"a/b": 2}) == [
        {"op": "remove", "path": "/c~0d"},
        {"op": "replace", "path": "/a~1b", "value": 2},
    ]
    assert diff([1, 2, 3], [1]) == [{"op": "remove", "path": "/2"}, {"op": "remove", "path": "/1"}]
    assert diff({"x": True}, {"x": 1}) == [{"op": "replace", "path": "/x", "value": 1}]


def test_apply_rejects_bad_operations() -> None:
    with pytest.raises(JSONPatchError):
        apply({}, [{"op": "remove", "path": "/missing"}])
    with pytest.raises(JSONPatchError):
        apply([1], [{"op": "add", "path": "/5", "value": 0}])
    with pytest.raises(JSONPatchError):
        apply({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    assert apply({"a": [1]}, [{"op": "add", "path": "/a/-", "value": 2}]) == {"a": [1, 2]}
    assert apply({"a": 1}, [{"op": "move", "from": "/a", "path": "/b"}]) == {"b": 1}


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("", {}, True),
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {}, True),  # != matches an absent key
        ("app!=web", {"app": "web"}, False),
        ("tier in (a, b)", {"tier": "b"}, True),
        ("tier in (a,b)", {}, False),
        ("tier notin (a,b)", {}, True),
        ("tier notin (a,b)", {"tier": "a"}, False),
        ("app", {"app": ""}, True),
        ("!app", {"app": "x"}, False),
        ("!app", {}, True),
        ("app=web,tier in (a,b),!legacy", {"app": "web", "tier": "a"}, True),
        ("example.com/role=x", {"example.com/role": "x"}, True),
        ("app=", {"app": ""}, True),
    ],
)
def test_label_selector_matching(text: str, labels: dict[str, str], expected: bool) -> None:
    assert selectors.parse(text).matches(labels) is expected


@pytest.mark.parametrize("text", ["app in (a", "app=a=b", "in (a)", "app notin ()x", "=x", "a b"])
def test_malformed_selectors_are_rejected(text: str) -> None:
    with pytest.raises(SelectorError):
        selectors.parse(text)


def test_metav1_label_selector() -> None:
    sel = selectors.from_label_selector(
        {
            "matchLabels": {"app": "w"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}],
        }
    )
    assert sel.matches({"app": "w"})
    assert not sel.matches({"app": "w", "tier": "x"})
    assert selectors.from_label_selector(None).matches({"anything": "1"})
    with pytest.raises(SelectorError):
        selectors.from_label_selector({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    assert selectors.parse("a=1,b in (2)").equality_pairs() == {"a": "1"}
