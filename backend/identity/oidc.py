"""`OidcProvider`: signing in through an OpenID Connect provider, with
authlib: the authorization code flow with PKCE (S256), `state` and `nonce`.

The provider is found by discovery (`<issuer>/.well-known/openid-
configuration`, fetched when first needed and again after `METADATA_MAX_AGE_S`);
its `issuer` must be the configured one. `begin` makes the authorization URL
and the `Pending` values the browser carries to the callback (in a signed
cookie: `transport/oidc.py`); `finish` trades the code for tokens, verifies
the ID token (signature by the provider's published keys, issuer, audience
= the client id, time, and the nonce) and reads the user and role from it.

authlib (with joserfc and cryptography, ~200 modules) is imported when a
sign-in first needs it, not when the server starts, and so are the HTTP
client and the ID token's verifier (PyJWT): a server without OIDC never
loads them.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backend.errors import LoopwireError
from backend.identity.claims import ClaimMap
from backend.users import Identity

if TYPE_CHECKING:
    from backend.identity.jwt_bearer import JwtVerifier

DISCOVERY = "/.well-known/openid-configuration"
METADATA_MAX_AGE_S = 3600.0
TIMEOUT_S = 10.0


class SignInFailed(LoopwireError):
    """The provider's answer could not be used; the message says why (it is
    shown on the login page, so it names nothing secret)."""


@dataclass(frozen=True, slots=True)
class Metadata:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str


@dataclass(frozen=True, slots=True)
class Pending:
    """What the callback must get back: the `state` sent, the `nonce` the
    ID token must carry, and the PKCE verifier."""

    state: str
    nonce: str
    verifier: str


class OidcProvider:
    def __init__(
        self,
        *,
        issuer: str,
        client_id: str,
        client_secret: str,
        claims: ClaimMap,
        name: str,
        scopes: str = "openid profile email",
        jwks_refetch_s: float = 60.0,
        timeout_s: float = TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self.client_id = client_id
        self.client_secret = client_secret
        self.claim_map = claims
        self.name = name
        self.scopes = scopes
        self.jwks_refetch_s = jwks_refetch_s
        self.timeout_s = timeout_s
        self.clock = clock
        self._metadata: tuple[float, Metadata, JwtVerifier] | None = None
        self._lock = asyncio.Lock()

    async def begin(self, redirect_uri: str) -> tuple[str, Pending]:
        """The provider's authorization URL to send the browser to, and what
        the callback needs back."""
        from authlib.common.security import generate_token

        metadata, _ = await self._discovered()
        pending = Pending(generate_token(32), generate_token(32), generate_token(48))
        async with self._client(redirect_uri) as client:
            url, _ = client.create_authorization_url(
                metadata.authorization_endpoint,
                state=pending.state,
                code_verifier=pending.verifier,
                nonce=pending.nonce,
            )
        return str(url), pending

    async def finish(self, code: str, pending: Pending, redirect_uri: str) -> Identity:
        """Trade the code for tokens and read the verified ID token."""
        import httpx2
        from authlib.common.errors import AuthlibBaseError

        metadata, verifier = await self._discovered()
        try:
            async with self._client(redirect_uri) as client:
                token = await client.fetch_token(
                    metadata.token_endpoint,
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=pending.verifier,
                )
        except (AuthlibBaseError, httpx2.HTTPError, ValueError) as exc:
            raise SignInFailed(f"the provider refused the sign-in ({exc})") from exc
        id_token = token.get("id_token") if isinstance(token, dict) else None
        claims = await verifier.claims(id_token) if isinstance(id_token, str) else None
        if claims is None:
            raise SignInFailed("the provider's ID token did not hold up")
        nonce = claims.get("nonce")
        if not isinstance(nonce, str) or not hmac.compare_digest(
            nonce.encode(), pending.nonce.encode()
        ):
            raise SignInFailed("the provider's ID token is not for this sign-in")
        identity = self.claim_map.identity(claims)
        if identity is None:
            raise SignInFailed(
                f"the provider's ID token has no usable {self.claim_map.user_claim!r}"
            )
        return identity

    def _client(self, redirect_uri: str) -> Any:
        from authlib.integrations.httpx_client import AsyncOAuth2Client

        return AsyncOAuth2Client(
            client_id=self.client_id,
            client_secret=self.client_secret,
            scope=self.scopes,
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            timeout=self.timeout_s,
        )

    async def _discovered(self) -> tuple[Metadata, JwtVerifier]:
        """The provider's metadata (and the ID token verifier built on its
        keys), fetched when missing or older than `METADATA_MAX_AGE_S`."""
        from backend.identity.jwks import Jwks
        from backend.identity.jwt_bearer import JwtVerifier

        async with self._lock:
            held = self._metadata
            if held is None or self.clock() - held[0] >= METADATA_MAX_AGE_S:
                metadata = await self._discover()
                verifier = JwtVerifier(
                    issuer=metadata.issuer,
                    audience=self.client_id,
                    jwks=Jwks(metadata.jwks_uri, refetch_s=self.jwks_refetch_s),
                    claims=self.claim_map,
                )
                held = self._metadata = (self.clock(), metadata, verifier)
        return held[1], held[2]

    async def _discover(self) -> Metadata:
        import httpx2

        url = self.issuer.rstrip("/") + DISCOVERY
        try:
            async with httpx2.AsyncClient(timeout=self.timeout_s) as client:
                response = await client.get(url)
                response.raise_for_status()
                document = response.json()
        except (httpx2.HTTPError, ValueError) as exc:
            raise SignInFailed(f"the provider cannot be reached ({exc})") from exc
        return _metadata(document, self.issuer)


def _metadata(document: Any, issuer: str) -> Metadata:
    fields = ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri")
    if not isinstance(document, dict) or not all(
        isinstance(document.get(name), str) for name in fields
    ):
        raise SignInFailed("the provider's discovery document is incomplete")
    if document["issuer"].rstrip("/") != issuer.rstrip("/"):
        raise SignInFailed(
            f"the provider says it is {document['issuer']!r}, not {issuer!r}"
        )
    return Metadata(*(str(document[name]) for name in fields))
