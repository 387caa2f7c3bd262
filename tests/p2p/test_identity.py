"""Identity key file: created once with safe permissions, stable across restarts."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys

import pytest

from gbr_node.errors import GbrError
from gbr_node.p2p.identity import default_identity_path, load_or_create_identity, peer_id_of

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@posix_only
def test_new_identity_file_is_0600_in_a_0700_folder(tmp_path):
    key_path = tmp_path / "config" / "gbr-node" / "identity.key"

    load_or_create_identity(key_path)

    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_path.parent.stat().st_mode) == 0o700
    assert [p.name for p in key_path.parent.iterdir()] == ["identity.key"]


def test_peer_id_survives_a_restart_in_another_process(tmp_path):
    key_path = tmp_path / "identity.key"
    first = peer_id_of(load_or_create_identity(key_path))
    script = (
        "import sys; from gbr_node.p2p.identity import load_or_create_identity, peer_id_of; "
        "print(peer_id_of(load_or_create_identity(sys.argv[1])))"
    )

    later = subprocess.run(
        [sys.executable, "-c", script, str(key_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()

    assert first.startswith("12D3KooW")
    assert later == first


def test_different_files_give_different_peer_ids(tmp_path):
    assert peer_id_of(load_or_create_identity(tmp_path / "a.key")) != peer_id_of(
        load_or_create_identity(tmp_path / "b.key")
    )


@pytest.mark.parametrize("content", [b"", b"not a key", b"\x08\x01\x12\x40" + b"\x00" * 10])
def test_corrupt_key_file_is_a_clear_error_and_is_never_overwritten(tmp_path, content):
    key_path = tmp_path / "identity.key"
    key_path.write_bytes(content)
    key_path.chmod(0o600)

    with pytest.raises(GbrError, match="not a libp2p Ed25519 private key"):
        load_or_create_identity(key_path)

    assert key_path.read_bytes() == content


def test_oversized_key_file_is_refused(tmp_path):
    key_path = tmp_path / "identity.key"
    key_path.write_bytes(b"\x00" * 10_000)

    with pytest.raises(GbrError, match="file too large"):
        load_or_create_identity(key_path)


@posix_only
def test_group_readable_key_file_is_used_with_a_warning(tmp_path, caplog):
    key_path = tmp_path / "identity.key"
    first = peer_id_of(load_or_create_identity(key_path))
    key_path.chmod(0o640)

    with caplog.at_level(logging.WARNING, logger="gbr_node.p2p.identity"):
        again = peer_id_of(load_or_create_identity(key_path))

    assert again == first
    assert "chmod 600" in caplog.text


@posix_only
def test_private_key_file_loads_without_warning(tmp_path, caplog):
    key_path = tmp_path / "identity.key"
    load_or_create_identity(key_path)

    with caplog.at_level(logging.WARNING, logger="gbr_node.p2p.identity"):
        load_or_create_identity(key_path)

    assert caplog.records == []


def test_unreadable_key_path_is_a_gbr_error(tmp_path):
    key_path = tmp_path / "identity.key"
    key_path.mkdir()

    with pytest.raises(GbrError, match="cannot read identity key file"):
        load_or_create_identity(key_path)


def test_default_path_follows_xdg_config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))

    assert default_identity_path() == tmp_path / "gbr-node" / "identity.key"


def test_default_path_falls_back_to_dot_config(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))

    assert default_identity_path() == tmp_path / ".config" / "gbr-node" / "identity.key"
