"""A real OCI distribution registry for tests: Debian's `docker-registry` (distribution v2) on 127.0.0.1, with its
storage and config in a temporary directory, optionally behind logins: htpasswd (Basic), or the Bearer token flow
with a small token service here (TokenServer); and `push_image`, which uploads a small OCI image through the
registry's HTTP API (no Docker needed).

    with Registry(tmp_path, users={"bot": "s3cret"}) as reg:
        pushed = push_image(reg, "team/train", "1.0", auth=("bot", "s3cret"))
        reg.host  # "127.0.0.1:PORT", the host of image addresses: f"{reg.host}/team/train:1.0"
"""

from __future__ import annotations

import base64
import datetime
import gzip
import hashlib
import http.server
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

BINARY = shutil.which("docker-registry") or "/usr/bin/docker-registry"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def available() -> bool:
    return Path(BINARY).exists()


# tests that start registries carry this: skipped where docker-registry is missing, except in CI (scripts/test
# installs it there, so a missing one is a failure to see)
needed = pytest.mark.skipif(not available() and not os.environ.get("CI"),
                            reason="needs Debian's docker-registry (scripts/test installs it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def htpasswd_line(user: str, password: str) -> str:
    """A bcrypt htpasswd entry, the only kind distribution's htpasswd auth accepts."""
    import bcrypt

    return f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()}"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def libtrust_kid(public_key) -> str:
    """The key id distribution looks a token's signing key up by (docker/libtrust): SHA-256 of the DER public
    key, 240 bits of it in base32, in groups of four."""
    from cryptography.hazmat.primitives import serialization

    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    b32 = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode()
    return ":".join(b32[i:i + 4] for i in range(0, len(b32), 4))


class TokenServer:
    """The registry's token service (the Bearer flow of Docker Hub, GHCR, Quay...): GET /token?service&scope with
    a Basic login of ``users`` answers a JWT, signed with a key whose certificate the registry trusts, that grants
    the scope's actions; an anonymous or wrong login gets 401. It records the Authorization headers it got."""

    def __init__(self, root: Path, users: dict[str, str], service: str):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.users, self.service, self.issuer = users, service, "test-token-issuer"
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test token signer")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=1)).sign(self.key, hashes.SHA256()))
        self.cert = root / "token-signer.pem"
        self.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.kid = libtrust_kid(self.key.public_key())
        self.seen: list[str | None] = []
        self.port = free_port()
        self.realm = f"http://127.0.0.1:{self.port}/token"
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def token(self, scope: str) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, utils

        access = []
        if scope.count(":") >= 2:
            kind, rest = scope.split(":", 1)
            repo, actions = rest.rsplit(":", 1)
            access = [{"type": kind, "name": repo, "actions": actions.split(",")}]
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "kid": self.kid}
        claims = {"iss": self.issuer, "sub": "test", "aud": self.service, "exp": now + 300, "nbf": now - 10,
                  "iat": now, "jti": secrets.token_hex(8), "access": access}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        r, s = utils.decode_dss_signature(self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    def _handler(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                sent = self.headers.get("Authorization")
                server.seen.append(sent)
                login = None
                if sent and sent.startswith("Basic "):
                    login = tuple(base64.b64decode(sent[6:]).decode().split(":", 1))
                if login is None or server.users.get(login[0]) != login[1]:
                    self.send_response(401)
                    self.end_headers()
                    return
                body = json.dumps({"token": server.token(query.get("scope", [""])[0])}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Registry:
    """One `docker-registry serve` process; a context manager that stops it and leaves nothing behind.
    ``users``: logins it asks for, by htpasswd (``auth="basic"``) or through a TokenServer (``auth="token"``)."""

    def __init__(self, root: Path, users: dict[str, str] | None = None, auth: str = "basic"):
        self.root = Path(root)
        self.users = dict(users or {})
        self.auth = auth if self.users else "none"
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host}"
        self.proc: subprocess.Popen | None = None
        self.tokens: TokenServer | None = None

    def push_headers(self, name: str, login: tuple[str, str] | None) -> dict[str, str]:
        """The Authorization that lets ``login`` push to ``name``."""
        if login is None:
            return {}
        if self.auth == "token":
            r = requests.get(self.tokens.realm, params={"service": "test-registry",
                                                        "scope": f"repository:{name}:pull,push"},
                             auth=login, timeout=30)
            r.raise_for_status()
            return {"Authorization": "Bearer " + r.json()["token"]}
        return {"Authorization": "Basic " + base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode()}

    def config(self) -> str:
        lines = ["version: 0.1", "log:", "  level: error", "  accesslog:", "    disabled: true", "storage:",
                 "  filesystem:", f"    rootdirectory: {self.root / 'data'}", "  delete:", "    enabled: true",
                 "http:", f"  addr: {self.host}", f"  secret: {secrets.token_hex(16)}"]
        if self.auth == "token":
            self.tokens = TokenServer(self.root, self.users, "test-registry")
            lines += ["auth:", "  token:", f"    realm: {self.tokens.realm}", "    service: test-registry",
                      f"    issuer: {self.tokens.issuer}", f"    rootcertbundle: {self.tokens.cert}"]
        elif self.users:
            htpasswd = self.root / "htpasswd"
            htpasswd.write_text("".join(htpasswd_line(u, p) + "\n" for u, p in self.users.items()))
            lines += ["auth:", "  htpasswd:", "    realm: test-registry", f"    path: {htpasswd}"]
        return "\n".join(lines) + "\n"

    def start(self) -> Registry:
        self.root.mkdir(parents=True, exist_ok=True)
        cfg = self.root / "config.yml"
        cfg.write_text(self.config())
        self.log = open(self.root / "registry.log", "wb")
        self.proc = subprocess.Popen([BINARY, "serve", str(cfg)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited: {(self.root / 'registry.log').read_text()[-2000:]}")
            try:
                if requests.get(self.url + "/v2/", timeout=2).status_code in (200, 401):
                    return self
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("docker-registry did not answer within 30 s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()
        self.proc = None
        if self.tokens:
            self.tokens.stop()
            self.tokens = None

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass
class Pushed:
    address: str  # host/name:tag
    digest: str  # the manifest's
    size: int  # the config's and the layers' sizes: what an image list shows
    created: str  # the config's `created`
    manifest: dict


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_tarball(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def upload_blob(reg: Registry, name: str, data: bytes, auth: dict[str, str]) -> str:
    """The monolithic upload: POST for a session, PUT the bytes with their digest."""
    digest = digest_of(data)
    r = requests.post(f"{reg.url}/v2/{name}/blobs/uploads/", headers=auth, timeout=30)
    r.raise_for_status()
    location = r.headers["Location"]
    location = location if location.startswith("http") else reg.url + location
    sep = "&" if "?" in location else "?"
    r = requests.put(f"{location}{sep}digest={digest}", data=data, timeout=30,
                     headers={**auth, "Content-Type": "application/octet-stream"})
    r.raise_for_status()
    return digest


def push_image(reg: Registry, name: str, tag: str, auth: tuple[str, str] | None = None,
               created: str = "2024-05-06T07:08:09Z", layers: int = 2, index: bool = False) -> Pushed:
    """An OCI image of ``layers`` small layers under ``name:tag``; with ``index``, the tag names an image index
    of it (linux/amd64) and of a smaller arm64 image."""
    auth = reg.push_headers(name, auth)
    blobs = [layer_tarball({f"layer{i}/hello.txt": f"layer {i} of {name}:{tag}\n".encode() * (i + 1) * 50})
             for i in range(layers)]
    diff_ids = [digest_of(gzip.decompress(b)) for b in blobs]
    config = json.dumps({"created": created, "architecture": "amd64", "os": "linux",
                         "config": {"Cmd": ["/bin/sh"]}, "rootfs": {"type": "layers", "diff_ids": diff_ids}},
                        sort_keys=True).encode()
    config_digest = upload_blob(reg, name, config, auth)
    layer_refs = [{"mediaType": OCI_LAYER, "digest": upload_blob(reg, name, b, auth), "size": len(b)} for b in blobs]
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
                "layers": layer_refs}
    body = json.dumps(manifest).encode()
    if index:  # the amd64 image, and an arm64 one of its first layer only (a list must pick amd64's size)
        arm = json.dumps({**manifest, "layers": layer_refs[:1]}).encode()
        entries = []
        for arch, doc_bytes in (("arm64", arm), ("amd64", body)):
            r = requests.put(f"{reg.url}/v2/{name}/manifests/{digest_of(doc_bytes)}", data=doc_bytes, timeout=30,
                             headers={**auth, "Content-Type": OCI_MANIFEST})
            r.raise_for_status()
            entries.append({"mediaType": OCI_MANIFEST, "digest": digest_of(doc_bytes), "size": len(doc_bytes),
                            "platform": {"architecture": arch, "os": "linux"}})
        body, media = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode(), OCI_INDEX
    else:
        media = OCI_MANIFEST
    r = requests.put(f"{reg.url}/v2/{name}/manifests/{tag}", data=body, timeout=30,
                     headers={**auth, "Content-Type": media})
    r.raise_for_status()
    size = len(config) + sum(len(b) for b in blobs)
    return Pushed(f"{reg.host}/{name}:{tag}", r.headers.get("Docker-Content-Digest", digest_of(body)), size,
                  created, manifest)
