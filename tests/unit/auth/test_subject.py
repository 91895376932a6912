"""A person's token rides in a grant sealed: it opens for that person of that tenant only."""

from __future__ import annotations

from shared.auth.grants import Grant
from shared.auth.principal import Principal
from shared.auth.subject import open_subject, seal_subject
from shared.privacy.keys import PiiKeys
from shared.privacy.sealed import seal

KEYS = PiiKeys(current=b"k" * 32)


def test_a_sealed_token_opens_for_its_person_only() -> None:
    sealed = seal_subject(KEYS, tenant_id="acme", user="alice", token="eyJ.secret.sig")
    assert "secret" not in sealed
    assert open_subject(KEYS, tenant_id="acme", user="alice", sealed=sealed) == "eyJ.secret.sig"
    assert open_subject(KEYS, tenant_id="acme", user="erin", sealed=sealed) is None
    assert open_subject(KEYS, tenant_id="globex", user="alice", sealed=sealed) is None
    assert open_subject(PiiKeys(current=b"o" * 32), tenant_id="acme", user="alice",
                        sealed=sealed) is None  # fmt: skip
    rotated = PiiKeys(current=b"n" * 32, previous=b"k" * 32)
    assert open_subject(rotated, tenant_id="acme", user="alice", sealed=sealed) is not None
    # A config secret sealed with the same key is not a person's token, wherever it is put.
    secret = seal(KEYS, server="acme", name="alice", value="eyJ.secret.sig")
    assert open_subject(KEYS, tenant_id="acme", user="alice", sealed=secret) is None


def test_the_grant_carries_the_sealed_token_and_never_shows_it() -> None:
    sealed = seal_subject(KEYS, tenant_id="acme", user="alice", token="eyJ.secret.sig")
    person = Principal(tenant_id="acme", user="alice", subject_token=sealed)
    grant = Grant.for_principal(person, tools=None)
    assert Grant.decode(grant.encode()).subject_token == sealed
    assert sealed not in repr(grant) and sealed not in repr(person)
    assert (
        Grant.for_principal(Principal(tenant_id="acme", key_id="k1"), tools=None).subject_token
        is None
    )
