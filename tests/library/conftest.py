"""Fixtures of the library index tests: the real installed distributions of the
test environment (indexed once per session), and small distributions written
into a temporary site folder the way pip would lay them out."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import sysconfig
from pathlib import Path

import pytest

from gbr_node.library.index import LibraryIndex


def real_sites() -> list[Path]:
    """The site-packages folders of the interpreter running the tests."""
    paths = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    return sorted(Path(p) for p in paths if Path(p).is_dir())


@pytest.fixture(scope="session")
def env_index(tmp_path_factory, worker_id) -> LibraryIndex:
    """Every distribution of the test environment, indexed from scratch once per run:
    the first pytest-xdist worker to need it builds it (about 30 s of CPU) under a
    file lock, the others open the same file and find every distribution unchanged
    (the tests only read it)."""
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent  # the run's, all workers'
    folder = shared / "library-env"
    with open(shared / "library-env.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder.mkdir(exist_ok=True)
        index = LibraryIndex(folder / "library.db", real_sites())
        report = index.refresh()
    assert len(report.indexed) + report.unchanged > 20, report
    return index


def write_dist(site: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """Install a distribution by hand: its files under `site`, plus a
    `NAME-VERSION.dist-info` with METADATA and a RECORD listing them."""
    site.mkdir(parents=True, exist_ok=True)
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir()
    lines = []
    for rel, text in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        lines.append(f"{rel},sha256={digest.decode()},{len(text.encode())}")
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nA test distribution.\n"
    )
    lines += [f"{dist_info.name}/METADATA,,", f"{dist_info.name}/RECORD,,"]
    (dist_info / "RECORD").write_text("\n".join(lines) + "\n")
    return dist_info
