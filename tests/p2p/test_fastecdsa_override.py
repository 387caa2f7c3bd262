"""py-libp2p 0.8.1 on fastecdsa 3.0.1 instead of its pinned 2.3.2 (issue 34, ADR 0018).

libp2p pins fastecdsa==2.3.2, which has no wheel; the lock installs 3.0.1, which has.
These tests hold every use libp2p 0.8.1 makes of fastecdsa (`libp2p/crypto/ecc.py`,
`libp2p/crypto/key_exchange.py`) on the installed version: P-256 key generation, SEC1
encoding both ways, and the ECDH of secio's key exchange. The one call 3.0 removed,
`keys.export_key` (ECC private-key serialisation), is pinned as the known gap; gbr-node
never reaches it (its identity is Ed25519, Noise's static key X25519, and secio is
not offered, ADR 0005).
"""

from __future__ import annotations

from importlib.metadata import version

import pytest
from libp2p.crypto.ecc import ECCPublicKey, create_new_key_pair
from libp2p.crypto.key_exchange import create_ephemeral_key_pair


def test_the_installed_fastecdsa_is_the_locked_one() -> None:
    assert version("fastecdsa") == "3.0.1"


def test_p256_public_keys_round_trip_through_sec1() -> None:
    pair = create_new_key_pair("P-256")
    data = pair.public_key.to_bytes()
    assert len(data) == 65 and data[0] == 4  # uncompressed SEC1 point
    again = ECCPublicKey.from_bytes(data, "P-256")
    assert again.to_bytes() == data


def test_secio_key_exchange_agrees_on_one_secret() -> None:
    ours, our_secret = create_ephemeral_key_pair("P-256")
    theirs, their_secret = create_ephemeral_key_pair("P-256")
    shared = our_secret(theirs.to_bytes())
    assert shared == their_secret(ours.to_bytes())
    assert 0 < len(shared) <= 32


def test_p256_private_key_serialisation_is_the_known_gap() -> None:
    with pytest.raises(AttributeError, match="export_key"):
        create_new_key_pair("P-256").private_key.to_bytes()
