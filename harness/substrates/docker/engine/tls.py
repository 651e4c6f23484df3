"""TLS for an engine's `tcp://` listener: a private CA, the engine's server certificate and
one client certificate, in the layout dockerd, the Docker CLI (`--tlsverify`) and the
Terraform provider's `cert_path` expect:

    ca.pem, server-cert.pem, server-key.pem   the engine's side (daemon.json tls*)
    ca.pem, cert.pem, key.pem                 a client's side (hosts file `tls:`)

`ensure_certs` makes them once (keys 0600, the directory 0700); a remote engine's admin
makes them the same way (`python -m harness.substrates.docker.engine certs DIR --ip IP`)
and copies the client's three files to the controller.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

SERVER = ("server-cert.pem", "server-key.pem")
CLIENT = ("cert.pem", "key.pem")
DAYS = 825


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key) -> None:
    from cryptography.hazmat.primitives import serialization

    pem = key.private_bytes(serialization.Encoding.PEM,
                            serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    path.with_suffix(".tmp").replace(path)


def _cert(subject: str, key, issuer, issuer_key, *, ca: bool = False,
          usage=None, ips: tuple[str, ...] = ()):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    b = (x509.CertificateBuilder().subject_name(name)
         .issuer_name(issuer.subject if issuer is not None else name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=DAYS))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if usage is not None:
        b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if ips:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
            + [x509.DNSName("localhost")]), critical=False)
    return b.sign(issuer_key if issuer_key is not None else key, hashes.SHA256())


def ensure_certs(directory: Path, ips: tuple[str, ...]) -> Path:
    """The CA, server and client files in `directory` (made when any is missing)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    names = ("ca.pem", *SERVER, *CLIENT)
    if all((directory / n).is_file() for n in names):
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    ca_key = _key()
    ca = _cert("harness engine CA", ca_key, None, None, ca=True)
    for (cert_name, key_name), subject, usage, sans in (
            (SERVER, "harness engine", ExtendedKeyUsageOID.SERVER_AUTH, ips),
            (CLIENT, "harness controller", ExtendedKeyUsageOID.CLIENT_AUTH, ())):
        key = _key()
        _write_key(directory / key_name, key)
        (directory / cert_name).write_bytes(
            _cert(subject, key, ca, ca_key, usage=usage, ips=sans).public_bytes(
                serialization.Encoding.PEM))
    (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return directory


def daemon_tls(directory: Path) -> dict:
    """daemon.json keys for a `tcp://` listener that accepts only this CA's clients."""
    return {"tlsverify": True, "tlscacert": str(directory / "ca.pem"),
            "tlscert": str(directory / SERVER[0]), "tlskey": str(directory / SERVER[1])}
