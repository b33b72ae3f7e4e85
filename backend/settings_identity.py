"""The settings of who may use the server: one token, a tokens file, JWTs
from an identity provider, OpenID Connect sign-in (`LOOPWIRE_AUTH_*`,
`LOOPWIRE_JWT_*`, `LOOPWIRE_OIDC_*`); `Settings` has them all."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings

from backend.setting_values import secure_url


class IdentitySettings(BaseSettings):
    auth_token: str | None = None
    """One token for the whole server; its user is `local`."""
    auth_tokens_file: Path | None = None
    """A file of `user: token` lines, one per user (see docs/security.md)."""
    auth_cookie_ttl_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    """How long a browser stays signed in."""
    auth_failures_per_minute: int = Field(default=30, ge=1, le=100_000)
    """Wrong bearer tokens, JWTs and session cookies one client address may
    present per minute (bursts of as many); past it, HTTP 429 with
    Retry-After, before any credential is compared."""
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_jwks_url: str | None = None
    """With all three set, `Authorization: Bearer <JWT>` from this identity
    provider is accepted: RS256/ES256 signed by a key of the JWKS at this
    URL, with this `iss` and `aud`, not expired."""
    jwt_user_claim: str = "sub"
    jwt_roles_claim: str = "roles"
    """A list (or space-separated string) of roles; a dotted path reaches a
    nested claim (`realm_access.roles`)."""
    jwt_admin_role: str = "admin"
    jwt_jwks_refetch_s: float = Field(default=60.0, ge=0, le=86_400)
    """A token naming a key the JWKS lacks fetches it again, at most this often."""
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = None
    """With all three set, the login page offers "Sign in with <provider>"
    (OpenID Connect, found at `<issuer>/.well-known/openid-configuration`;
    register `<public URL>/login/oidc/callback` as the redirect URI)."""
    oidc_name: str = ""
    """The provider's name on the login page (default: the issuer's host)."""
    oidc_scopes: str = "openid profile email"
    oidc_user_claim: str = "sub"
    oidc_roles_claim: str = "roles"
    oidc_admin_role: str = "admin"
    allow_insecure: bool = False
    """Serve a non-loopback address without authentication (not advised)."""

    @model_validator(mode="after")
    def _identity_providers(self) -> IdentitySettings:
        for prefix, names in IDENTITY_SETTINGS.items():
            given = [n for n in names if getattr(self, n)]
            if given and len(given) < len(names):
                missing = ", ".join(
                    f"LOOPWIRE_{n.upper()}" for n in names if n not in given
                )
                raise ValueError(f"{prefix} needs {missing} too (or none of them)")
        for name in ("jwt_jwks_url", "oidc_issuer"):
            url = getattr(self, name)
            if url and not secure_url(url):
                raise ValueError(
                    f"LOOPWIRE_{name.upper()} must be an https:// URL "
                    "(http:// only on a loopback address)"
                )
        return self

    @model_validator(mode="after")
    def _real_token(self) -> IdentitySettings:
        if self.auth_token is not None and not self.auth_token.strip():
            raise ValueError(
                "LOOPWIRE_AUTH_TOKEN is set but empty; give it a token or unset it"
            )
        return self

    @property
    def jwt_enabled(self) -> bool:
        return bool(self.jwt_issuer and self.jwt_audience and self.jwt_jwks_url)

    @property
    def oidc_enabled(self) -> bool:
        return bool(
            self.oidc_issuer and self.oidc_client_id and self.oidc_client_secret
        )


IDENTITY_SETTINGS = {
    "LOOPWIRE_JWT_ISSUER": ("jwt_issuer", "jwt_audience", "jwt_jwks_url"),
    "LOOPWIRE_OIDC_ISSUER": ("oidc_issuer", "oidc_client_id", "oidc_client_secret"),
}
"""An identity provider's settings that go together."""
