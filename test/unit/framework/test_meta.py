"""manager.meta: the one apimachinery layer (durations, field errors, times, conditions, names)."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manager.meta import conditions, gotext, object, times, validation
from manager.meta.duration import DurationError, parse_duration
from manager.meta.field import FieldError, aggregate


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0),
        ("15s", 15),
        ("1m30s", 90),
        ("1.5h", 5400),
        ("-2ms", -0.002),
        ("+3us", 3e-6),
        ("1µs", 1e-6),
        (".5s", 0.5),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("soon", 'time: invalid duration "soon"'),
        ("-", 'time: invalid duration "-"'),
        ("10", 'time: missing unit in duration "10"'),
        ("3d", 'time: unknown unit "d" in duration "3d"'),
    ],
)
def test_bad_durations_carry_go_texts(text: str, message: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration(text)
    assert str(caught.value) == message


def test_field_errors_render_as_apimachinery() -> None:
    assert str(FieldError.invalid("spec.x", "é", "bad")) == 'spec.x: Invalid value: "é": bad'
    assert str(FieldError.invalid("spec.n", 3, "bad")) == "spec.n: Invalid value: 3: bad"
    assert str(FieldError.invalid("spec.b", None, "bad")) == "spec.b: Invalid value: null: bad"
    assert (
        str(FieldError.invalid("spec.m", {"b": 1, "a": [True]}, "x"))
        == 'spec.m: Invalid value: {"b":1,"a":[true]}: x'
    )
    assert str(FieldError.invalid("spec.t", {"a": 1}, "x", value_text='{"a":1,"z":0}')) == (
        'spec.t: Invalid value: {"a":1,"z":0}: x'
    )
    assert str(FieldError.required("spec.r")) == "spec.r: Required value"
    assert str(FieldError.too_long("spec.l", 63)) == "spec.l: Too long: may not be more than 63 bytes"
    assert str(FieldError.forbidden("spec.f", "no")) == "spec.f: Forbidden: no"


def test_aggregate_is_bare_for_one_bracketed_for_many_and_collapses_duplicates() -> None:
    one = FieldError.forbidden("a", "x")
    assert aggregate([one]) == "a: Forbidden: x"
    assert aggregate([one, "b: plain", one]) == "[a: Forbidden: x, b: plain]"


def test_times_are_whole_seconds_in_utc() -> None:
    when = datetime.datetime(2025, 1, 2, 4, 4, 5, 999, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    assert times.format_time(when) == "2025-01-02T03:04:05Z"
    assert times.parse_time("2025-01-02T03:04:05Z") == when.replace(microsecond=0)
    assert times.parse_time("") is None
    assert times.now().endswith("Z") and len(times.now()) == 20


def test_set_status_condition_moves_the_transition_time_only_on_a_flip() -> None:
    status: object.Json = {}
    conditions.set_status_condition(status, "Ready", {"status": "True", "reason": "A"}, now=lambda: "t1")
    conditions.set_status_condition(status, "Ready", {"status": "True", "reason": "B"}, now=lambda: "t2")
    assert status["conditions"] == [
        {"type": "Ready", "status": "True", "reason": "B", "message": "", "lastTransitionTime": "t1"}
    ]
    conditions.set_status_condition(status, "Ready", {"status": "False", "reason": "C"}, now=lambda: "t3")
    assert conditions.find_condition(status, "Ready") == {
        "type": "Ready",
        "status": "False",
        "reason": "C",
        "message": "",
        "lastTransitionTime": "t3",
    }
    assert not conditions.is_status_true(status, "Ready")
    conditions.remove_condition(status, "Ready")
    assert status == {}


def test_name_validation_texts() -> None:
    assert validation.is_dns1035_label("ok-1") == []
    assert validation.is_dns1035_label("1-bad") == [
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
        "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert [str(e) for e in validation.is_domain_prefixed_path("spec.managedBy", "nope")] == [
        'spec.managedBy: Invalid value: "nope": must be a domain-prefixed path (such as "acme.io/foo")'
    ]


def test_accessors_read_zero_values_and_never_create() -> None:
    pod: object.Json = {"metadata": None}
    assert (object.name_of(pod), object.labels_of(pod), object.controller_uid(pod)) == ("", {}, None)
    assert pod == {"metadata": None}
    object.metadata_of(pod)["name"] = "p"
    assert object.name_of(pod) == "p"


def test_json_copy_is_deep_and_falls_back_for_what_orjson_refuses() -> None:
    doc = {"a": [{"b": 1, "c": 1.5, "d": None, "e": True}], "s": "x"}
    copied = object.json_copy(doc)
    assert copied == doc and copied is not doc and copied["a"][0] is not doc["a"][0]
    copied["a"][0]["b"] = 2
    assert doc["a"][0]["b"] == 1
    deep: dict[str, object] = {}
    node = deep
    for _ in range(300):  # deeper than orjson's 254 levels
        node["n"] = {}
        node = node["n"]  # type: ignore[assignment]
    assert object.json_copy(deep) == deep
    odd = {1: [2**70]}  # a non-string key, an int beyond 64 bits
    assert object.json_copy(odd) == odd and object.json_copy(odd) is not odd


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("42", 42), ("+7", 7), ("-3", -3), ("007", 7), ("9223372036854775807", 2**63 - 1)],
)
def test_atoi_reads_what_go_reads(text: str, value: int) -> None:
    from manager.meta.strconv import atoi

    assert atoi(text) == value


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", 'strconv.Atoi: parsing "": invalid syntax'),
        ("1.5", 'strconv.Atoi: parsing "1.5": invalid syntax'),
        (" 1", 'strconv.Atoi: parsing " 1": invalid syntax'),
        ("1_000", 'strconv.Atoi: parsing "1_000": invalid syntax'),
        ("٣", 'strconv.Atoi: parsing "٣": invalid syntax'),
        ("9223372036854775808", 'strconv.Atoi: parsing "9223372036854775808": value out of range'),
    ],
)
def test_atoi_refuses_what_go_refuses_with_its_words(text: str, error: str) -> None:
    from manager.meta.strconv import atoi

    with pytest.raises(ValueError) as refused:
        atoi(text)
    assert str(refused.value) == error


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("job-0", '"job-0"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("a\\b", '"a\\\\b"'),
        ("tab\there", '"tab\\there"'),
        ("nul\x00", '"nul\\x00"'),
        ("zero\u200bwidth", '"zero\\u200bwidth"'),
        ("café 😀", '"café 😀"'),
        ("lone\ud800", '"lone\ufffd"'),
    ],
)
def test_go_quote_matches_strconv_quote(text: str, quoted: str) -> None:
    # outputs of Go's strconv.Quote (%q) for the same text
    assert gotext.go_quote(text) == quoted


@given(st.text())
def test_go_quote_fast_path_agrees_with_escaping_each_character(text: str) -> None:
    assert gotext.go_quote(text) == gotext._quote_each(text)
