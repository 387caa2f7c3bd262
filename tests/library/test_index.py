"""The library index on the test environment's real distributions and on small
hand-made ones (issue 18, "What must hold"; STD-AI-01)."""

from __future__ import annotations

import shutil
import sys
import threading

import pytest

from gbr_node.errors import LibraryError
from gbr_node.library import store
from gbr_node.library.index import LibraryIndex
from gbr_node.library.present import hit_line
from tests.library.conftest import write_dist


def _best(index: LibraryIndex, path: str):
    found = store.by_alias(index._db(), path)
    assert found, f"{path} is not in the index"
    return found[0]


# -- real distributions -------------------------------------------------------


@pytest.mark.parametrize(
    ("public", "file"),
    [
        ("httpx.Timeout", "httpx/_config.py"),  # `from ._config import *` + __all__
        ("trio.open_nursery", "trio/_core/_run.py"),  # two hops of `import x as x`
        ("trio.to_thread.run_sync", "trio/_threads.py"),  # renamed on re-export
        ("pydantic.BaseModel", "pydantic/main.py"),  # imported under TYPE_CHECKING
        ("prompt_toolkit.PromptSession", "prompt_toolkit/shortcuts/prompt.py"),
        ("rich.print", "rich/__init__.py"),  # defined in the package itself
    ],
)
def test_re_exported_names_are_found_under_their_public_path(env_index, public, file):
    hit = _best(env_index, public)
    assert hit.qualname == public
    assert hit.file == file
    top = env_index.search(public, limit=3)
    assert top[0].qualname == public, [h.qualname for h in top]
    assert hit_line(top[0]).endswith(f"  {file}:{hit.line}  {hit.dist_version}")


def test_a_compiled_modules_stub_is_indexed(env_index):
    hit = _best(env_index, "pydantic_core.SchemaValidator")  # _pydantic_core is a .so
    assert hit.file.endswith(".pyi") and hit.kind == "class"
    assert hit.signature.startswith("(schema")


def test_a_stub_only_package_is_indexed_under_the_module_it_types(env_index):
    found = store.by_alias(env_index._db(), "requests.Session")
    stubs = [h for h in found if h.dist == "types-requests"]
    assert stubs and stubs[0].file.startswith("requests-stubs/") and stubs[0].file.endswith(".pyi")


def test_vendored_copies_rank_below_the_real_package_but_stay_findable(env_index):
    real = _best(env_index, "rich.table.Table")
    vendored = _best(env_index, "pip._vendor.rich.table.Table")  # pip vendors rich
    factor = "SELECT factor FROM entries WHERE id = ?"
    db = env_index._db()
    assert (
        db.execute(factor, (vendored.entry_id,)).fetchone()
        < db.execute(factor, (real.entry_id,)).fetchone()
    )
    assert vendored.qualname in [h.qualname for h in env_index.search("Table", "pip", limit=10)]


@pytest.mark.parametrize("query", ["open nursery", "OpenNursery", "open_nursery", "open_nurs"])
def test_identifiers_match_however_they_are_spelled(env_index, query):
    assert "trio.open_nursery" in [h.qualname for h in env_index.search(query, limit=5)]


def test_a_package_hint_ranks_that_distribution_first(env_index):
    hits = env_index.search("timeout", package="httpx", limit=10)
    assert {h.dist for h in hits[:5]} == {"httpx"}
    assert {h.dist for h in env_index.search("timeout", package="trio", limit=5)} == {"trio"}


def test_an_editable_install_is_read_from_its_source_folder(env_index):
    hit = _best(env_index, "gbr_node.library.index.LibraryIndex")
    assert hit.dist == "gbr-node" and hit.file == "gbr_node/library/index.py"


def test_read_library_shows_a_definition_and_refuses_files_it_does_not_hold(env_index):
    text = env_index.read("httpx.Timeout", lines=15)
    header, first, *_ = text.splitlines()
    assert header.startswith("# httpx.Timeout  httpx/_config.py:") and "httpx==" in header
    assert "class Timeout" in first
    assert "def " in env_index.read("httpx/_api.py:1", lines=400)
    for outside in ("../../../../etc/passwd", "/etc/passwd", "httpx/../../secret.py"):
        with pytest.raises(LibraryError, match="not a file of the library index"):
            env_index.read(outside)
    with pytest.raises(LibraryError, match="no definition named"):
        env_index.read("httpx.NoSuchThingAnywhere")


# -- hand-made distributions ----------------------------------------------------


def test_a_re_export_loop_does_not_hang(tmp_path):
    write_dist(
        tmp_path / "site",
        "loopy",
        "1.0",
        {
            "loopy/__init__.py": "from loopy.a import *\nfrom .b import thing as thing\n",
            "loopy/a.py": "from loopy import *\nfrom loopy.b import *\n",
            "loopy/b.py": "from loopy.a import *\nfrom . import thing\n"
            "def real():\n    'The only definition.'\n",
        },
    )
    index = LibraryIndex(tmp_path / "lib.db", [tmp_path / "site"])
    done = threading.Thread(target=index.refresh, daemon=True)
    done.start()
    done.join(timeout=30)
    assert not done.is_alive(), "indexing a re-export loop hangs"
    # followed round the loop to its public path: loopy -> loopy.a -> loopy.b
    assert [h.qualname for h in index.search("real", limit=3)][:1] == ["loopy.real"]


def test_a_syntax_error_skips_that_file_only(tmp_path):
    write_dist(
        tmp_path / "site",
        "halfbroken",
        "2.0",
        {
            "halfbroken/__init__.py": "from .good import parse_config\n",
            "halfbroken/good.py": "def parse_config(path, *, strict=False):\n    'Read it.'\n",
            "halfbroken/bad.py": "def broken(:\n    pass\ndef lost_function():\n    pass\n",
        },
    )
    index = LibraryIndex(tmp_path / "lib.db", [tmp_path / "site"])
    report = index.refresh()
    assert report.indexed == ["halfbroken==2.0"]
    assert report.skipped == ["halfbroken: halfbroken/bad.py: SyntaxError line 1"]
    (hit,) = [h for h in index.search("parse_config", limit=5) if h.dist == "halfbroken"]
    assert hit.qualname == "halfbroken.parse_config" and hit.signature == "(path, *, strict=False)"
    assert not store.by_name(index._db(), "lost_function")


def test_nothing_is_imported(tmp_path):
    marker = tmp_path / "imported"
    boom = f"open({str(marker)!r}, 'w').write('x')\nraise RuntimeError('imported!')\n"
    write_dist(
        tmp_path / "site",
        "explosive",
        "0.1",
        {
            "explosive/__init__.py": boom + "class Detonator:\n    'Goes off on import.'\n",
            "explosive/sub.py": boom + "def fuse(seconds: float) -> None: ...\n",
        },
    )
    index = LibraryIndex(tmp_path / "lib.db", [tmp_path / "site"])
    assert index.refresh().indexed == ["explosive==0.1"]
    assert [h.qualname for h in index.search("Detonator", limit=1)] == ["explosive.Detonator"]
    assert index.search("fuse", limit=1)[0].signature == "(seconds: float) -> None"
    assert not marker.exists() and "explosive" not in sys.modules


def test_only_changed_distributions_are_indexed_again_and_installs_are_picked_up(tmp_path):
    site = tmp_path / "site"
    write_dist(site, "alpha", "1.0", {"alpha/__init__.py": "def alpha_one(): ...\n"})
    write_dist(site, "beta", "1.0", {"beta/__init__.py": "def beta_one(): ...\n"})
    index = LibraryIndex(tmp_path / "lib.db", [site])
    assert sorted(index.refresh().indexed) == ["alpha==1.0", "beta==1.0"]
    again = index.refresh()
    assert (again.indexed, again.removed, again.unchanged) == ([], [], 2)
    shutil.rmtree(site / "alpha")  # pip install alpha==2.0: new files, new RECORD
    shutil.rmtree(site / "alpha-1.0.dist-info")
    write_dist(site, "alpha", "2.0", {"alpha/__init__.py": "def alpha_two(): ...\n"})
    write_dist(site, "gamma", "0.1", {"gamma.py": "GAMMA_RAY = 1\n"})
    report = index.refresh()
    assert sorted(report.indexed) == ["alpha==2.0", "gamma==0.1"]
    assert report.removed == ["alpha==1.0"] and report.unchanged == 1
    assert index.search("alpha_two", limit=1)[0].dist_version == "alpha==2.0"
    assert not store.by_name(index._db(), "alpha_one")
    assert index.search("gamma ray", limit=1)[0].qualname == "gamma.GAMMA_RAY"


def test_private_and_test_definitions_rank_lower_but_never_vanish(tmp_path):
    write_dist(
        tmp_path / "site",
        "ranked",
        "1.0",
        {
            "ranked/__init__.py": "from ._impl import render_widget\n",
            "ranked/_impl.py": "def render_widget(w):\n    'Render a widget.'\n"
            "def _render_widget_fast(w):\n    'Render a widget faster.'\n",
            "ranked/tests/test_render.py": "def render_widget_twice(w):\n    'Render a widget.'\n",
        },
    )
    index = LibraryIndex(tmp_path / "lib.db", [tmp_path / "site"])
    index.refresh()
    names = [h.qualname for h in index.search("render widget", limit=10)]
    assert names[0] == "ranked.render_widget"
    assert "ranked._impl._render_widget_fast" in names
    assert "ranked.tests.test_render.render_widget_twice" in names


def test_extra_source_folders_are_searched_as_plain_text(tmp_path):
    package = tmp_path / "node_modules" / "left-pad"
    package.mkdir(parents=True)
    (package / "package.json").write_text('{"name": "left-pad", "version": "1.3.0"}')
    (package / "index.js").write_text(
        "// Pad a string on the left to a given length.\n"
        "export function leftPad(str, len, ch) {\n  return str;\n}\n"
    )
    index = LibraryIndex(tmp_path / "lib.db", [], [tmp_path / "node_modules"])
    assert index.refresh().indexed == ["left-pad==1.3.0"]
    (hit,) = index.search("pad a string on the left", limit=1)
    assert (hit.qualname, hit.dist_version) == ("left-pad/index.leftPad", "left-pad==1.3.0")
    assert hit.doc == "Pad a string on the left to a given length."
    assert "export function leftPad" in index.read("left-pad/index.leftPad")
