"""fedlib: the federation's signed tokens (compact JWS, EdDSA/Ed25519) and JWKS helpers."""
import base64
import hashlib
import json
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey


class KeyMismatch(Exception):
    """A token that the approved keys do not verify."""


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def load_key(path: str) -> Ed25519PrivateKey:
    with open(path, "rb") as fh:
        return serialization.load_pem_private_key(fh.read(), password=None)


def jwk(pub: Ed25519PublicKey) -> dict:
    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
            "kid": hashlib.sha256(raw).hexdigest()[:16], "x": b64u(raw)}


def jwks(key: Ed25519PrivateKey) -> dict:
    return {"keys": [jwk(key.public_key())]}


def sign(key: Ed25519PrivateKey, claims: dict, ttl: int = 60) -> str:
    head = {"alg": "EdDSA", "typ": "JWT", "kid": jwk(key.public_key())["kid"]}
    body = dict(claims, iat=int(time.time()), exp=int(time.time()) + ttl)
    signing = b64u(json.dumps(head).encode()) + "." + b64u(json.dumps(body).encode())
    return signing + "." + b64u(key.sign(signing.encode()))


def verify(token: str, approved: dict) -> dict:
    try:
        h, b, s = token.split(".")
        head, claims = json.loads(unb64u(h)), json.loads(unb64u(b))
    except ValueError as exc:
        raise KeyMismatch(f"malformed token: {exc}") from None
    keys = {k.get("kid"): k for k in approved.get("keys", [])}
    k = keys.get(head.get("kid"))
    if k is None:
        raise KeyMismatch(f"token kid={head.get('kid')} is not in the approved JWKS "
                          f"(approved kids: {sorted(keys)})")
    try:
        Ed25519PublicKey.from_public_bytes(unb64u(k["x"])).verify(unb64u(s), (h + "." + b).encode())
    except (InvalidSignature, ValueError):
        raise KeyMismatch(f"token signature does not verify with approved kid={k['kid']}") from None
    if claims.get("exp", 0) < time.time():
        raise KeyMismatch("token expired")
    return claims
