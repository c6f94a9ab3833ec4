"""The Configuration's ``tls`` (Trainer v2.3.0 TLSOptions): Go cipher names to OpenSSL, validation
at load with the field named, and the context every server gets (trainer/api/config_tls.py,
trainer/options.py ``tls_options``)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import structlog

from manager._tls import new_server_context, self_signed_pair
from trainer.api import config_tls
from trainer.api.config_v1alpha1 import ConfigurationError, load
from trainer.options import manager_options, tls_options

# Go's crypto/tls constants (the IANA code points), for every name of tls.CipherSuites() and
# tls.InsecureCipherSuites() in Go 1.26.
GO_IDS = {
    "TLS_RSA_WITH_RC4_128_SHA": 0x0005,
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": 0x000A,
    "TLS_RSA_WITH_AES_128_CBC_SHA": 0x002F,
    "TLS_RSA_WITH_AES_256_CBC_SHA": 0x0035,
    "TLS_RSA_WITH_AES_128_CBC_SHA256": 0x003C,
    "TLS_RSA_WITH_AES_128_GCM_SHA256": 0x009C,
    "TLS_RSA_WITH_AES_256_GCM_SHA384": 0x009D,
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": 0xC007,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": 0xC009,
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": 0xC00A,
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": 0xC011,
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": 0xC012,
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": 0xC013,
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": 0xC014,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": 0xC023,
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": 0xC027,
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": 0xC02F,
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": 0xC02B,
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": 0xC030,
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": 0xC02C,
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA8,
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA9,
    "TLS_AES_128_GCM_SHA256": 0x1301,
    "TLS_AES_256_GCM_SHA384": 0x1302,
    "TLS_CHACHA20_POLY1305_SHA256": 0x1303,
}
UNAVAILABLE = {n for n in GO_IDS if "RC4" in n or "3DES" in n}  # gone from OpenSSL 3


def test_the_table_has_every_go_suite_name() -> None:
    assert {s.go_name for s in config_tls.CIPHER_SUITES} == set(GO_IDS)


@pytest.mark.parametrize(
    "suite", [s for s in config_tls.CIPHER_SUITES if s.openssl_name], ids=lambda s: s.go_name
)
def test_each_go_name_maps_to_the_openssl_suite_of_the_same_code_point(suite: config_tls.CipherSuite) -> None:
    assert suite.openssl_name is not None
    if suite.go_name in UNAVAILABLE:
        assert not config_tls.openssl_available(suite.openssl_name)
        return
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.set_ciphers(suite.openssl_name)
    (cipher,) = [c for c in context.get_ciphers() if not c["name"].startswith("TLS_")]
    assert cipher["name"] == suite.openssl_name
    assert cipher["id"] & 0xFFFF == GO_IDS[suite.go_name]


def test_tls13_suites_are_known_names_without_a_cipher_string() -> None:
    tls13 = [s for s in config_tls.CIPHER_SUITES if s.openssl_name is None]
    assert [s.go_name for s in tls13] == [
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
    ]
    assert config_tls.cipher_string([s.go_name for s in tls13], "1.2") == ""


def test_the_insecure_flags_are_gos() -> None:
    insecure = {s.go_name for s in config_tls.CIPHER_SUITES if s.insecure}
    assert insecure == {
        n for n in GO_IDS if n.startswith("TLS_RSA_") or "RC4" in n or "3DES" in n or n.endswith("CBC_SHA256")
    }


def test_cipher_string_keeps_the_order_and_lowers_the_security_level_only_below_tls12() -> None:
    names = [
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    ]
    assert config_tls.cipher_string(names, "1.2") == "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-SHA"
    assert config_tls.cipher_string(names, "1.0").endswith(":@SECLEVEL=0")


@pytest.mark.parametrize(
    ("tls", "message"),
    [
        (
            {"minVersion": "1.4"},
            'tls.minVersion: Unsupported value: "1.4": supported values: "1.0", "1.1", "1.2", "1.3"',
        ),
        (
            {"cipherSuites": ["TLS_NOT_A_REAL_SUITE"]},
            'tls.cipherSuites[0]: Unsupported value: "TLS_NOT_A_REAL_SUITE": supported values: "TLS_AES_128_GCM_SHA256", ',
        ),
        (
            {"cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_RC4_128_SHA"]},
            'tls.cipherSuites[1]: Invalid value: "TLS_RSA_WITH_RC4_128_SHA": not available in the TLS library of this manager (OpenSSL',
        ),
        ({"cipherSuites": ["X" * 101]}, "tls.cipherSuites[0]: Too long: may not be more than 100 bytes"),
        (
            {"cipherSuites": ["TLS_AES_128_GCM_SHA256"] * 101},
            "tls.cipherSuites: Too many: 101: must have at most 100 items",
        ),
        ({"nextProtos": ["http/1.1"] * 11}, "tls.nextProtos: Too many: 11: must have at most 10 items"),
        ({"nextProtos": ["p" * 33]}, "tls.nextProtos[0]: Too long: may not be more than 32 bytes"),
        (
            {"nextProtos": ["http/1.1", ""]},
            'tls.nextProtos[1]: Invalid value: "": an ALPN protocol name may not be empty',
        ),
    ],
)
def test_bad_values_are_refused_at_load_naming_the_field(tls: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load({"tls": tls})
    assert str(caught.value).startswith("invalid configuration: " + message)


def test_several_bad_values_are_one_aggregate() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load({"tls": {"minVersion": "2", "nextProtos": [""]}})
    text = str(caught.value)
    assert text.startswith('invalid configuration: [tls.minVersion: Unsupported value: "2"')
    assert 'tls.nextProtos[0]: Invalid value: ""' in text


def test_a_number_for_min_version_is_a_decode_error() -> None:
    with pytest.raises(ConfigurationError, match=r"(?s)^failed to decode config file: .*tls\.minVersion"):
        load({"tls": {"minVersion": 1.2}})


def test_an_unknown_tls_field_is_a_strict_decoding_error() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load({"tls": {"maxVersion": "1.3"}})
    assert (
        str(caught.value)
        == 'failed to decode config file: strict decoding error: unknown field "tls.maxVersion"'
    )


def test_good_values_load() -> None:
    cfg = load(
        {
            "tls": {
                "minVersion": "1.3",
                "cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA"],
                "nextProtos": ["h2", "http/1.1"],
            }
        }
    )
    assert cfg.tls is not None and cfg.tls.min_version == "1.3"
    assert cfg.model_dump(exclude_none=True)["tls"] == {
        "minVersion": "1.3",
        "cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA"],
        "nextProtos": ["h2", "http/1.1"],
    }


def _context(tls: dict[str, object] | None) -> ssl.SSLContext:
    return new_server_context(tls_options(load({"tls": tls} if tls is not None else {})))


def _tls12_names(context: ssl.SSLContext) -> list[str]:
    return [c["name"] for c in context.get_ciphers() if not c["name"].startswith("TLS_")]


def test_without_tls_the_servers_get_tls12_http11_and_gos_default_suites() -> None:
    context = _context(None)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert _tls12_names(context) == [
        n for n in (config_tls.BY_GO_NAME[g].openssl_name for g in config_tls.GO_DEFAULT_SUITES) if n
    ]


def test_min_version_and_cipher_suites_are_applied() -> None:
    context = _context({"minVersion": "1.3", "cipherSuites": ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]})
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert _tls12_names(context) == ["ECDHE-ECDSA-AES256-GCM-SHA384"]


def test_only_tls13_suites_refuse_tls12_as_go_finds_no_suite_for_it() -> None:
    context = _context({"minVersion": "1.2", "cipherSuites": ["TLS_AES_256_GCM_SHA384"]})
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3


def _handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, tmp_path: Path
) -> tuple[str | None, str | None]:
    """An in-memory handshake: (the client's negotiated ALPN protocol, the cipher); raises on failure."""
    cert, key = self_signed_pair()
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    server.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    s_obj = server.wrap_bio(s_in, s_out, server_side=True)
    c_obj = client.wrap_bio(c_in, c_out)
    for _ in range(20):
        done = 0
        for obj in (c_obj, s_obj):
            try:
                obj.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if done == 2:
            break
    cipher = c_obj.cipher()
    return c_obj.selected_alpn_protocol(), cipher[0] if cipher else None


def _client(alpn: list[str], **kwargs: object) -> ssl.SSLContext:
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    client.set_alpn_protocols(alpn)
    for name, value in kwargs.items():
        setattr(client, name, value)
    return client


def test_next_protos_replace_the_alpn_list_in_the_servers_order(tmp_path: Path) -> None:
    server = _context({"nextProtos": ["spdy/3.1", "http/1.1"]})
    assert _handshake(server, _client(["http/1.1", "spdy/3.1"]), tmp_path)[0] == "spdy/3.1"


def test_h2_is_dropped_from_next_protos(tmp_path: Path) -> None:
    server = _context({"nextProtos": ["h2", "http/1.1"]})
    assert _handshake(server, _client(["h2", "http/1.1"]), tmp_path)[0] == "http/1.1"


def test_a_suite_outside_the_list_fails_the_handshake(tmp_path: Path) -> None:
    server = _context({"cipherSuites": ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]})
    client = _client(["http/1.1"], maximum_version=ssl.TLSVersion.TLSv1_2)
    client.set_ciphers("ECDHE-ECDSA-AES256-GCM-SHA384")
    with pytest.raises(ssl.SSLError, match=r"HANDSHAKE_FAILURE|NO_SHARED_CIPHER"):
        _handshake(server, client, tmp_path)
    allowed = _client(["http/1.1"], maximum_version=ssl.TLSVersion.TLSv1_2)
    assert _handshake(
        _context({"cipherSuites": ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]}), allowed, tmp_path
    )[1] == ("ECDHE-ECDSA-AES128-GCM-SHA256")


def test_an_insecure_suite_is_logged_as_upstream_does() -> None:
    with structlog.testing.capture_logs() as logs:
        tls_options(load({"tls": {"cipherSuites": ["TLS_RSA_WITH_AES_128_GCM_SHA256"]}}))
    assert any(
        e.get("event")
        == 'Cipher suite "TLS_RSA_WITH_AES_128_GCM_SHA256" is insecure and should not be used in production'
        for e in logs
    )


def test_metrics_options_carry_the_tls_change() -> None:
    options = manager_options(load({"tls": {"minVersion": "1.3"}}))
    assert new_server_context(options.metrics_tls_opts).minimum_version == ssl.TLSVersion.TLSv1_3
