"""Who is asking, beyond the tokens file (`backend/users.py`): browsers'
sign-ins kept in the store (`signins`), JWT bearer tokens checked against
an identity provider's published keys (`jwt_bearer`), and sign-in through
an OpenID Connect provider (`oidc`). `Identities` holds them together."""
