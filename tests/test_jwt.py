"""JWT bearer tokens from an identity provider (`identity/jwt_bearer.py`,
`identity/jwks.py`): keys from a JWKS served by a real HTTP server here,
rotated, and every way a token can be wrong."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.identity.jwks import Jwks
from tests.conftest import Harness, StartServer, make_settings
from tests.fakes import ScriptedLLM, test_registry
from tests.live_server import serving

ISSUER = "https://id.example.com/"
AUDIENCE = "loopwire"
SIGN_IN = "sign in first: the login page's cookie, or Authorization: Bearer <token>"
REFUSED = {"error_type": "unauthorized", "message": SIGN_IN}

KEY_A = rsa.generate_private_key(public_exponent=65537, key_size=2048)
KEY_B = ec.generate_private_key(ec.SECP256R1())
KEY_C = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(key: Any, kid: str) -> dict[str, Any]:
    algorithm = (
        jwt.algorithms.RSAAlgorithm if kid != "b" else jwt.algorithms.ECAlgorithm
    )
    jwk = json.loads(algorithm.to_jwk(key.public_key()))
    return {**jwk, "kid": kid, "use": "sig"}


def token(key: Any = KEY_A, kid: str | None = "a", **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "carol",
        "iat": now,
        "exp": now + 300,
    }
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    alg = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(body, key, algorithm=alg, headers=headers)


def unsigned(header: dict[str, Any], secret: bytes | None = None) -> str:
    """A token made by hand: `alg: none`, or HMAC with `secret`."""
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "exp": now + 300}
    parts = [_b64(json.dumps(header).encode()), _b64(json.dumps(claims).encode())]
    signing_input = ".".join(parts).encode()
    mac = b"" if secret is None else hmac.new(secret, signing_input, hashlib.sha256)
    signature = _b64(mac.digest()) if not isinstance(mac, bytes) else ""
    return ".".join([*parts, signature])


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass
class JwksServer:
    """The identity provider's published keys, changeable, on a real socket."""

    keys: list[dict[str, Any]] = field(default_factory=list)
    fetches: int = 0
    failing: bool = False
    url: str = ""

    async def jwks(self, request: Request) -> Response:
        self.fetches += 1
        if self.failing:
            return Response("down", status_code=503)
        return JSONResponse({"keys": self.keys})


@pytest.fixture
async def idp() -> AsyncIterator[JwksServer]:
    published = JwksServer([public_jwk(KEY_A, "a")])
    app = Starlette(routes=[Route("/jwks", published.jwks)])
    async with serving(app, lifespan="off") as server:
        published.url = server.url("/jwks")
        yield published


async def start_with_jwt(
    start_server: StartServer, idp: JwksServer, *replies: str, **more: Any
) -> Harness:
    return await start_server(
        ScriptedLLM(*replies),
        test_registry(),
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        jwt_jwks_url=idp.url,
        **more,
    )


async def get(harness: Harness, value: str, path: str = "/api/info") -> httpx.Response:
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        return await http.get(path, headers={"Authorization": f"Bearer {value}"})


async def test_a_rotated_key_is_fetched_and_a_withdrawn_one_refused(
    start_server: StartServer, idp: JwksServer
) -> None:
    """A token with a new key id refetches the keys; a key no longer published fails."""
    harness = await start_with_jwt(start_server, idp, "hello", jwt_jwks_refetch_s=0)
    signed_by_a = token(KEY_A, "a")
    assert (await get(harness, signed_by_a)).status_code == 200
    assert (await get(harness, token(KEY_A, "a", sub="dave"))).status_code == 200
    assert idp.fetches == 1  # fetched when first needed, then kept

    idp.keys = [public_jwk(KEY_B, "b")]  # the provider rotates to key B
    signed_by_b = token(KEY_B, "b")
    assert (await get(harness, signed_by_b)).status_code == 200
    assert idp.fetches == 2  # the unknown kid fetched the set again
    withdrawn = await get(harness, signed_by_a)
    assert (withdrawn.status_code, withdrawn.json()) == (401, REFUSED)

    client, ready = await harness.ready_client(Authorization=f"Bearer {signed_by_b}")
    assert ready["type"] == "session_ready"
    assert (await client.chat("hi"))[-2]["type"] == "chat_response"


async def test_the_roles_claim_makes_an_admin(
    start_server: StartServer, idp: JwksServer
) -> None:
    """Only the admin role in the configured roles claim grants admin access."""
    harness = await start_with_jwt(
        start_server, idp, jwt_roles_claim="realm_access.roles", jwt_admin_role="ops"
    )
    admin = token(realm_access={"roles": ["ops", "dev"]})
    user = token(realm_access={"roles": ["dev"]}, roles=["ops"])  # not the claim
    assert (await get(harness, admin, "/api/admin/usage")).status_code == 200
    refused = await get(harness, user, "/api/admin/usage")
    assert (refused.status_code, refused.json()["error_type"]) == (403, "forbidden")


async def test_every_kind_of_wrong_token_is_refused(
    start_server: StartServer, idp: JwksServer
) -> None:
    """Each kind of bad token gets the same 401; one expired seconds ago passes."""
    harness = await start_with_jwt(start_server, idp)
    now = int(time.time())
    pem = KEY_A.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    wrong = {
        "wrong audience": token(aud="someone-else"),
        "wrong issuer": token(iss="https://evil.example.com/"),
        "expired": token(iat=now - 600, exp=now - 120),
        "not yet valid": token(nbf=now + 120),
        "no expiry": token(exp=None),
        "no subject": token(sub=None),
        "a subject with spaces": token(sub="carol smith"),
        "alg none": unsigned({"alg": "none", "kid": "a", "typ": "JWT"}),
        "HS256 keyed with the public key": unsigned({"alg": "HS256", "kid": "a"}, pem),
        "another key, naming key a": token(KEY_C, "a"),
        "an unknown kid": token(KEY_C, "c"),
        "garbage": "not.a.jwt",
    }
    for what, value in wrong.items():
        response = await get(harness, value)
        assert (what, response.status_code, response.json()) == (what, 401, REFUSED)
    assert (await get(harness, token(iat=now - 20, exp=now - 10))).status_code == 200


async def test_made_up_key_ids_fetch_the_keys_at_most_once_per_interval(
    idp: JwksServer,
) -> None:
    """Unknown key ids refetch at most once per interval; a failed fetch keeps keys."""
    now = [0.0]
    keys = Jwks(idp.url, refetch_s=60, clock=lambda: now[0])
    assert await keys.key("a") is not None
    assert idp.fetches == 1
    found = await asyncio.gather(*(keys.key(f"made-up-{n}") for n in range(50)))
    assert found == [None] * 50 and idp.fetches == 1
    now[0] += 60
    found = await asyncio.gather(*(keys.key(f"made-up-{n}") for n in range(50)))
    assert found == [None] * 50 and idp.fetches == 2  # one fetch for them all

    idp.failing = True  # the provider is down: the keys held are kept
    now[0] += 3600  # and the set is old enough to be fetched again
    assert await keys.key("a") is not None
    assert idp.fetches == 3
    assert await keys.key("a") is not None and idp.fetches == 3  # not hammered


async def test_a_token_naming_no_key_uses_the_only_one(
    start_server: StartServer, idp: JwksServer
) -> None:
    """A token without a `kid` uses the only published key; with two keys it fails."""
    harness = await start_with_jwt(start_server, idp, jwt_jwks_refetch_s=0)
    assert (await get(harness, token(kid=None))).status_code == 200
    idp.keys = [public_jwk(KEY_A, "a"), public_jwk(KEY_B, "b")]
    assert (await get(harness, token(KEY_B, "b"))).status_code == 200  # refetched
    ambiguous = await get(harness, token(kid=None))
    assert ambiguous.status_code == 401  # two keys: the token must name one


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        (
            {"jwt_issuer": ISSUER, "jwt_audience": AUDIENCE},
            "LOOPWIRE_JWT_ISSUER needs LOOPWIRE_JWT_JWKS_URL too (or none of them)",
        ),
        (
            {"oidc_issuer": "https://id.example.com", "oidc_client_id": "x"},
            "LOOPWIRE_OIDC_ISSUER needs LOOPWIRE_OIDC_CLIENT_SECRET too",
        ),
        (
            {
                "jwt_issuer": ISSUER,
                "jwt_audience": AUDIENCE,
                "jwt_jwks_url": "http://id.example.com/jwks",
            },
            "LOOPWIRE_JWT_JWKS_URL must be an https:// URL (http:// only on a "
            "loopback address)",
        ),
    ],
)
def test_an_identity_provider_set_up_by_halves_is_refused(
    settings: dict[str, str], problem: str
) -> None:
    """An identity provider set up by halves or with a plain-http JWKS is refused."""
    with pytest.raises(ValueError, match=re.escape(problem)):
        make_settings(**settings)
