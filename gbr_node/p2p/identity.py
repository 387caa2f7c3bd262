"""The node's Ed25519 identity, created once and kept in a key file (DESIGN.md, wire contracts).

The key file holds the private key in the libp2p protobuf encoding (the
`crypto.pb.PrivateKey` message of the libp2p peer-ID spec, the same bytes as
go-libp2p's `MarshalPrivateKey`), so the peer ID is stable across restarts.
The file is created with mode 0600 inside a folder created with mode 0700; it
is never overwritten: a damaged file is an error the operator must resolve.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
from pathlib import Path

from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.crypto.keys import KeyPair, KeyType
from libp2p.crypto.serialization import deserialize_private_key
from libp2p.peer.id import ID

from gbr_node.errors import GbrError

logger = logging.getLogger(__name__)

_MAX_KEY_FILE_BYTES = 4096


def default_identity_path() -> Path:
    """Return `($XDG_CONFIG_HOME or ~/.config)/gbr-node/identity.key`."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gbr-node" / "identity.key"


def load_or_create_identity(path: str | os.PathLike[str] | None = None) -> KeyPair:
    """Load the Ed25519 key pair at `path`, creating and persisting a new one if absent.

    `path` defaults to `default_identity_path()`. A missing parent folder is
    created with mode 0700; a new key file gets mode 0600 and is published
    atomically (written aside, then hard-linked into place), so two processes
    starting at once end up with the same identity and no reader ever sees a
    half-written file. On POSIX, an existing file readable or writable by group
    or others is logged as a warning on this module's logger and still used.

    Raises:
        GbrError: the file exists but is not a libp2p-encoded Ed25519 private
            key (it is left untouched), or the file or folder cannot be read or
            written (the OS error is chained).
    """
    key_path = Path(path) if path is not None else default_identity_path()
    try:
        return _load(key_path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise GbrError(f"cannot read identity key file {key_path}: {exc.strerror}") from exc
    try:
        _create(key_path)
        return _load(key_path)
    except OSError as exc:
        raise GbrError(f"cannot create identity key file {key_path}: {exc.strerror}") from exc


def peer_id_of(keypair: KeyPair) -> str:
    """Return the base58 peer ID (`12D3KooW...`) of `keypair`, per the libp2p peer-ID spec."""
    return ID.from_pubkey(keypair.public_key).to_base58()


def _load(key_path: Path) -> KeyPair:
    with open(key_path, "rb") as file:
        mode = os.fstat(file.fileno()).st_mode
        data = file.read(_MAX_KEY_FILE_BYTES + 1)
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        logger.warning(
            "identity key file %s is accessible by group or others (mode %o); run: chmod 600 %s",
            key_path,
            stat.S_IMODE(mode),
            key_path,
        )
    try:
        if len(data) > _MAX_KEY_FILE_BYTES:
            raise ValueError("file too large")
        private_key = deserialize_private_key(data)
        if private_key.get_type() != KeyType.Ed25519:
            raise ValueError(f"key type {private_key.get_type().name}, expected Ed25519")
    except Exception as exc:  # protobuf and key parsers raise assorted errors
        raise GbrError(
            f"identity key file {key_path} is not a libp2p Ed25519 private key ({exc}); "
            "it was left untouched: move it away to create a new identity, "
            "or restore the original file"
        ) from exc
    return KeyPair(private_key, private_key.get_public_key())


def _create(key_path: Path) -> None:
    """Write a fresh key to a temporary file, then link it into place unless one appeared."""
    folder = key_path.parent
    if not folder.exists():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    encoded = create_new_key_pair().private_key.serialize()
    fd, tmp_name = tempfile.mkstemp(prefix=".identity-", dir=folder)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(encoded)
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):  # another process was first: use theirs
            os.link(tmp_name, key_path)
    finally:
        os.unlink(tmp_name)
