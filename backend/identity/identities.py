"""`Identities`: every way a request can say who it is from, together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from backend.identity.oidc import OidcProvider
from backend.identity.signins import SignIns
from backend.users import Identity, Users

if TYPE_CHECKING:  # PyJWT (and cryptography): loaded only when JWTs are on
    from backend.identity.jwt_bearer import JwtVerifier


@dataclass
class Identities:
    users: Users
    signins: SignIns
    jwt: JwtVerifier | None = None
    oidc: OidcProvider | None = None

    @property
    def enabled(self) -> bool:
        """Whether requests must say who they are from."""
        return self.users.enabled

    async def by_bearer(self, value: str) -> Identity | None:
        """A token of the tokens file, else a JWT from the identity provider."""
        user = self.users.by_token(value)
        if user is not None:
            return self.users.identity(user)
        if self.jwt is not None:  # None for a value that is not a JWT
            return await self.jwt.identify(value)
        return None

    async def by_cookie(self, value: str) -> Identity | None:
        return await self.signins.check(value)
