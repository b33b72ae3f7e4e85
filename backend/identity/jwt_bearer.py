"""`JwtVerifier`: a JWT (an identity provider's access or ID token) checked
for its signature, issuer, audience and time, then read as an `Identity`.

Only RS256 and ES256 signatures with a key from the provider's JWKS are
accepted, and the key must be of the kind the token's header claims: `none`
and shared-secret algorithms (HS256 with the public key as the secret) are
refused before any key is looked up. `exp` is required; `exp` and `nbf`
allow `LEEWAY_S` of clock skew.
"""

from __future__ import annotations

from typing import Any

import jwt

from backend.identity.claims import ClaimMap
from backend.identity.jwks import ALGORITHMS, Jwks
from backend.users import Identity

LEEWAY_S = 30.0
MAX_TOKEN_CHARS = 16_384
MAX_KID = 256


class JwtVerifier:
    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks: Jwks,
        claims: ClaimMap,
        leeway_s: float = LEEWAY_S,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.jwks = jwks
        self.claim_map = claims
        self.leeway_s = leeway_s

    async def identify(self, token: str) -> Identity | None:
        claims = await self.claims(token)
        return None if claims is None else self.claim_map.identity(claims)

    async def claims(self, token: str) -> dict[str, Any] | None:
        """The token's claims if it holds up; None otherwise."""
        header = _header(token)
        if header is None:
            return None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ALGORITHMS:
            return None
        if kid is not None and not (isinstance(kid, str) and 0 < len(kid) <= MAX_KID):
            return None
        key = await self.jwks.key(kid)
        if key is None or key.algorithm_name != alg:
            return None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError:
            return None
        return claims


def looks_like_jwt(value: str) -> bool:
    return value.count(".") == 2 and len(value) <= MAX_TOKEN_CHARS


def _header(token: str) -> dict[str, Any] | None:
    if not looks_like_jwt(token):
        return None
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        return None
    return header if isinstance(header, dict) else None
