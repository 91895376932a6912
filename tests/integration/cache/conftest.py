"""The gateway app and API-key fixtures of the auth tests, for cache hits through the gateway."""

from tests.integration.auth.conftest import client, make_key  # noqa: F401  (fixtures)
