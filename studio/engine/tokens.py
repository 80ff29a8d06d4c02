"""Lease tokens and signed file URLs: HMAC-signed, URL-safe, bound to run, step, claimant and attempt."""

from __future__ import annotations

import binascii
import hashlib
import hmac
import json
from typing import Any

import orjson

from .values import canonical_args_bytes

# `base64.urlsafe_b64encode` / `urlsafe_b64decode` are this translation around binascii's base64, in three Python
# calls each: a token is signed on every claim and checked on every submit.
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode()


def same_mac(expected: str, given: str) -> bool:
    """Constant-time comparison of a MAC with what a caller sent, for any text: `hmac.compare_digest`
    raises TypeError on a non-ASCII str, and a caller's `a.é` must be a bad signature, not an error."""
    return given.isascii() and hmac.compare_digest(expected, given)


def _unb64(text: str) -> bytes:
    """`base64.urlsafe_b64decode` of the unpadded text (ValueError for non-ASCII text, as there)."""
    return binascii.a2b_base64((text + "=" * (-len(text) % 4)).encode("ascii").translate(_FROM_URLSAFE))


def _claims(body: bytes) -> Any:
    """`json.loads(body)` for a body this engine signed: orjson, unless it would read a value otherwise (it reads
    an integer past 64 bits as a float, and refuses NaN; the claims are flat text and integers)."""
    try:
        claims = orjson.loads(body)
    except orjson.JSONDecodeError:  # what orjson refuses (NaN, Infinity) is the json module's to read or refuse
        return json.loads(body)
    if type(claims) is dict and _CLAIM_TYPES.issuperset(map(type, claims.values())):  # in C: no generator's frame
        return claims
    return json.loads(body)


_CLAIM_TYPES = frozenset({str, int})  # exact text and integers: what orjson reads as the json module does here


_BLOCK = 64  # SHA-256's block: an HMAC key is padded (or first hashed) to it (RFC 2104)
_INNER = bytes(b ^ 0x36 for b in range(256))
_OUTER = bytes(b ^ 0x5C for b in range(256))


class Signer:
    def __init__(self, secret: bytes):
        self._secret = secret
        # HMAC-SHA256 as RFC 2104 defines it, from two SHA-256 states made once (the key padded and XORed with
        # each pad): each signature copies both. The same bytes as `hmac.digest(secret, body, "sha256")`, which
        # looks SHA-256 up by name in OpenSSL and sets the key up on every call, and as a copied `hmac.new` state
        # (whose `copy` is Python over OpenSSL's HMAC context: ~19.5 k instructions a signature, against ~14 k).
        key = hashlib.sha256(secret).digest() if len(secret) > _BLOCK else secret
        key = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(key.translate(_INNER))
        self._outer = hashlib.sha256(key.translate(_OUTER))

    def _mac(self, body: bytes) -> str:
        inner = self._inner.copy()
        inner.update(body)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return _b64(outer.digest())

    def sign(self, claims: dict[str, Any]) -> str:
        """A token of `claims` (the engine's own text and integers): their sorted compact JSON, signed."""
        body = _b64(canonical_args_bytes(claims))
        return f"{body}.{self._mac(body.encode())}"

    def verify(self, token: object) -> dict[str, Any] | None:
        """The claims of a token this engine signed, else None (tampered, foreign, garbage)."""
        if not isinstance(token, str) or token.count(".") != 1 or len(token) > 4096:
            return None
        body, mac = token.split(".")
        if not same_mac(self._mac(body.encode("utf-8", "surrogatepass")), mac):
            return None
        try:
            claims = _claims(_unb64(body))
        except (ValueError, UnicodeDecodeError):
            return None
        return claims if isinstance(claims, dict) else None

    def digest(self, text: str) -> str:
        return self._mac(text.encode("utf-8", "surrogatepass"))[:22]

    def matches(self, text: str, signature: object) -> bool:
        """Whether `signature` (as a caller gave it: any text) is this signer's digest of `text`."""
        return isinstance(signature, str) and same_mac(self.digest(text), signature)
