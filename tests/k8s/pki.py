"""Certificates and keys for the test control plane: one CA (its key too, for a real node's certificates), the
API server's serving cert, an admin client cert (group system:masters) and the service-account signing key.
Throw-away, per test session."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _cert(subject, issuer, pub, signer, *, ca=False, server=False, sans=()):
    now = dt.datetime.now(dt.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(pub)
         .serial_number(x509.random_serial_number())
         .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        b = b.add_extension(x509.ExtendedKeyUsage([usage, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    if sans:
        alt = [x509.IPAddress(ipaddress.ip_address(s)) if s[0].isdigit() else x509.DNSName(s) for s in sans]
        b = b.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return b.sign(signer, hashes.SHA256())


def make_pki(d: Path) -> dict[str, Path]:
    d.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}

    def write(name: str, data: bytes) -> Path:
        p = d / name
        p.write_bytes(data)
        p.chmod(0o600)
        out[name] = p
        return p

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("ti-hub-test-ca")
    ca = _cert(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True)
    write("ca.crt", ca.public_bytes(serialization.Encoding.PEM))
    # kept (throw-away like the rest) so that a real node's kubelet and kube-proxy get client certificates signed
    # by the same CA (tests/k8s/node/start.sh)
    write("ca.key", _key_pem(ca_key))

    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert(_name("kube-apiserver"), ca_name, srv_key.public_key(), ca_key, server=True,
                sans=("127.0.0.1", "10.96.0.1", "localhost", "kubernetes", "kubernetes.default",
                      "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
    write("apiserver.crt", srv.public_bytes(serialization.Encoding.PEM))
    write("apiserver.key", _key_pem(srv_key))

    adm_key = ec.generate_private_key(ec.SECP256R1())
    adm = _cert(_name("ti-hub-test-admin", "system:masters"), ca_name, adm_key.public_key(), ca_key)
    write("admin.crt", adm.public_bytes(serialization.Encoding.PEM))
    write("admin.key", _key_pem(adm_key))

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write("sa.key", _key_pem(sa_key))
    write("sa.pub", sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return out
