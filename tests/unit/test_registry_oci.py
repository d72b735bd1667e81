"""IMG3, the pure core (ti_hub/registry/oci.py): references, manifests, indexes, configs, auth challenges."""

from __future__ import annotations

import json

import pytest

from ti_hub.registry import oci
from ti_hub.registry.oci import Facts, RegistryError


@pytest.mark.parametrize("address,registry,repository,tag,digest,version", [
    ("python", "docker.io", "library/python", None, None, "latest"),
    ("python:3.11-slim", "docker.io", "library/python", "3.11-slim", None, "3.11-slim"),
    ("pytorch/pytorch:2.3.0", "docker.io", "pytorch/pytorch", "2.3.0", None, "2.3.0"),
    ("quay.io/jupyter/scipy-notebook:latest", "quay.io", "jupyter/scipy-notebook", "latest", None, "latest"),
    ("localhost/team/x", "localhost", "team/x", None, None, "latest"),
    ("127.0.0.1:5000/team/train:1.0", "127.0.0.1:5000", "team/train", "1.0", None, "1.0"),
    ("registry.example.org/a/b/c@sha256:" + "ab" * 32, "registry.example.org", "a/b/c", None,
     "sha256:" + "ab" * 32, "abababababab"),
    ("ghcr.io/o/r:v1@sha256:" + "cd" * 32, "ghcr.io", "o/r", "v1", "sha256:" + "cd" * 32, "v1"),
])
def test_references_normalise_as_docker_does(address, registry, repository, tag, digest, version):
    ref = oci.parse_reference(address)
    assert (ref.registry, ref.repository, ref.tag, ref.digest, ref.version) == (registry, repository, tag, digest,
                                                                                 version)
    assert ref.manifest_ref == (digest or tag or "latest")


def test_docker_hub_is_read_at_its_api_host_and_loopback_over_http():
    assert oci.parse_reference("python").api_host == "registry-1.docker.io"
    assert oci.base_url("registry-1.docker.io") == "https://registry-1.docker.io"
    assert oci.base_url("127.0.0.1:5000") == "http://127.0.0.1:5000"
    assert oci.base_url("localhost") == "http://localhost"
    assert oci.base_url("[::1]:5000") == "http://[::1]:5000"
    assert oci.base_url("reg.lan:5000") == "https://reg.lan:5000"
    assert oci.base_url("reg.lan:5000", frozenset({"reg.lan:5000"})) == "http://reg.lan:5000"


@pytest.mark.parametrize("address", ["quay.io/", "quay.io/x:", "quay.io/x@sha256:short", "quay.io/Upper/x"])
def test_a_bad_reference_is_unreadable(address):
    with pytest.raises(RegistryError) as e:
        oci.parse_reference(address)
    assert e.value.kind == "unreadable"


def test_credentials_match_their_registry_docker_hub_by_any_name():
    hub = oci.parse_reference("python:3")
    assert oci.same_registry("docker.io", hub) and oci.same_registry("index.docker.io", hub)
    assert oci.same_registry("Quay.io", oci.parse_reference("quay.io/a/b"))
    assert not oci.same_registry("quay.io", hub)
    assert not oci.same_registry("127.0.0.1:5000", oci.parse_reference("127.0.0.1:5001/a/b"))


def manifest(config_size=100, layers=(1000, 2000), media=oci.OCI_MANIFEST) -> bytes:
    return json.dumps({"schemaVersion": 2, "mediaType": media,
                       "config": {"mediaType": "x", "digest": "sha256:" + "c" * 64, "size": config_size},
                       "layers": [{"mediaType": "l", "digest": f"sha256:{i:064d}", "size": s}
                                  for i, s in enumerate(layers)]}).encode()


def test_an_image_manifest_is_its_config_and_layers_sizes():
    for media in (oci.OCI_MANIFEST, oci.DOCKER_MANIFEST):
        found = oci.parse_manifest(media + "; charset=utf-8", manifest(media=media))
        assert found == oci.Manifest("sha256:" + "c" * 64, 3100)
    # no Content-Type (some registries): the document says what it is
    assert oci.parse_manifest(None, manifest(layers=())) == oci.Manifest("sha256:" + "c" * 64, 100)


def index(*platforms: dict) -> bytes:
    return json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": oci.OCI_MANIFEST, "digest": f"sha256:{i:064d}", "size": 10, "platform": p}
        for i, p in enumerate(platforms)]}).encode()


def test_an_index_picks_the_platform_else_the_first_real_image():
    body = index({"os": "unknown", "architecture": "unknown"},
                 {"os": "linux", "architecture": "arm64", "variant": "v8"}, {"os": "linux", "architecture": "amd64"})
    for ct in (oci.OCI_INDEX, oci.DOCKER_LIST, None):
        found = oci.parse_manifest(ct, body)
        assert isinstance(found, oci.Index)
    assert oci.pick_platform(found) == f"sha256:{2:064d}"
    assert oci.pick_platform(found, "linux/arm64") == f"sha256:{1:064d}"  # a variant is optional
    assert oci.pick_platform(found, "windows/amd64") == f"sha256:{1:064d}"  # not the attestation
    with pytest.raises(RegistryError, match="lists no image"):
        oci.pick_platform(oci.parse_manifest(None, index({"os": "unknown", "architecture": "unknown"})))


@pytest.mark.parametrize("content_type,body,says", [
    (oci.OCI_MANIFEST, b"<html>", "not JSON"),
    (oci.OCI_MANIFEST, b"[1]", "not a JSON object"),
    ("application/vnd.docker.distribution.manifest.v1+prettyjws", b'{"schemaVersion": 1}', "no OCI or Docker v2"),
    (oci.OCI_MANIFEST, b'{"schemaVersion": 2, "config": {"digest": "sha256:x"}, "layers": []}', "digest and size"),
    (oci.OCI_MANIFEST, b'{"schemaVersion": 2, "config": {"digest": "d", "size": 1}}', "no layers"),
    (oci.OCI_MANIFEST, b'{"schemaVersion": 2, "config": {"digest": "d", "size": 1}, "layers": [{"size": -1}]}',
     "layer has no digest"),
    (oci.OCI_INDEX, b'{"schemaVersion": 2, "manifests": {}}', "lists no manifests"),
])
def test_a_bad_manifest_says_why(content_type, body, says):
    with pytest.raises(RegistryError) as e:
        oci.parse_manifest(content_type, body)
    assert e.value.kind == "unreadable" and says in e.value.reason


@pytest.mark.parametrize("created,shown", [
    ("2024-05-06T07:08:09Z", "2024-05-06T07:08:09Z"),
    ("2024-05-06T07:08:09.123456789Z", "2024-05-06T07:08:09Z"),  # Go's nanoseconds
    ("2024-05-06T09:08:09+02:00", "2024-05-06T07:08:09Z"),
    ("2024-05-06T07:08:09", "2024-05-06T07:08:09Z"),
    ("yesterday", None),
    (None, None),
])
def test_the_config_says_when_the_image_was_built(created, shown):
    assert oci.parse_created(json.dumps({"created": created, "os": "linux"}).encode()) == shown
    assert oci.parse_created(b"{}") is None


def test_challenges_and_token_urls():
    scheme, params = oci.parse_challenge(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/a:pull"')
    assert scheme == "bearer"
    assert params == {"realm": "https://auth.docker.io/token", "service": "registry.docker.io",
                      "scope": "repository:library/a:pull"}
    assert oci.parse_challenge('Basic realm="x, y"') == ("basic", {"realm": "x, y"})
    assert oci.parse_challenge(None) == ("", {})
    ref = oci.parse_reference("ghcr.io/o/r:1")
    url = oci.token_url({"realm": "https://ghcr.io/token?x=1", "service": "ghcr.io"}, ref, "https://ghcr.io")
    assert url == "https://ghcr.io/token?x=1&service=ghcr.io&scope=repository%3Ao%2Fr%3Apull"
    # our login is never sent to a plain-HTTP realm of an HTTPS registry
    with pytest.raises(RegistryError) as e:
        oci.token_url({"realm": "http://evil.example/token"}, ref, "https://ghcr.io")
    assert e.value.kind == "denied"
    assert oci.token_url({"realm": "http://127.0.0.1:9/t"}, ref, "http://127.0.0.1:5000").startswith("http://127")
    with pytest.raises(RegistryError, match="no realm"):
        oci.token_url({"realm": "file:///etc/passwd"}, ref, "https://ghcr.io")
    assert oci.parse_token(b'{"access_token": "abc"}') == "abc"
    with pytest.raises(RegistryError, match="no token"):
        oci.parse_token(b'{"token": ""}')


def test_fields_of_an_image_in_a_list():
    facts = Facts("sha256:" + "e" * 64, 3 << 20, "2024-05-06T07:08:09Z")
    assert oci.fields("quay.io/a/b:2.1", facts) == {
        "version": "2.1", "size_bytes": 3 << 20, "size_mib": 3.0, "image_created": "2024-05-06T07:08:09Z",
        "digest": "sha256:" + "e" * 64, "registry": "ok"}
    failed = oci.fields("quay.io/a/b", RegistryError("unreachable", "connection refused"))
    assert failed == {"version": "latest", "size_bytes": None, "size_mib": None, "image_created": None,
                      "digest": None, "registry": "unreachable: connection refused"}
    assert oci.fields("quay.io/a/b", None)["registry"].startswith("pending: ")
