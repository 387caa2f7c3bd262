"""search_library / read_library as tools: in the registry, granted to a peer
like any tool, and the `[library]` profile table (issue 18)."""

from __future__ import annotations

import pytest

from gbr_node.config.loader import load_profile
from gbr_node.config.network import TrustedPeer
from gbr_node.config.profile import LibraryConfig, ToolsConfig
from gbr_node.errors import ProfileError, UnknownTool
from gbr_node.library.index import LibraryIndex
from gbr_node.library.lookup import open_library, prelookup
from gbr_node.rpc.toolhost import ProfileToolHost, Snapshot
from gbr_node.sandbox import Sandbox
from gbr_node.tools.registry import build_registry
from tests.library.conftest import write_dist

PEER = "12D3KooW" + "A" * 44


@pytest.fixture
def library(tmp_path) -> LibraryIndex:
    write_dist(
        tmp_path / "site",
        "widgets",
        "3.1.4",
        {
            "widgets/__init__.py": "from ._core import spin_widget\n",
            "widgets/_core.py": "def spin_widget(speed: float = 1.0) -> None:\n"
            "    'Spin the widget at `speed` turns a second.'\n",
        },
    )
    return LibraryIndex(tmp_path / "lib.db", [tmp_path / "site"])


def _host(tmp_path, library, tools):
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    registry = build_registry(ToolsConfig(), Sandbox(root, []), library=library)
    peers = {"alice": TrustedPeer(peer_id=PEER, tools=tools)}
    return ProfileToolHost(lambda: Snapshot(peers, registry))


async def test_a_peer_granted_search_library_gets_hits_with_versions(tmp_path, library):
    host = _host(tmp_path, library, ("search_library", "read_library"))
    grant = host.authorize(PEER)
    names = [spec["name"] for spec in host.list_tools(grant)]
    assert names == ["search_library", "read_library"]
    result = await host.call_tool(grant, "search_library", {"query": "spin a widget"})
    text = result["content"][0]["text"]
    assert text.splitlines()[0] == (
        "widgets.spin_widget(speed: float=1.0) -> None  widgets/_core.py:1  widgets==3.1.4"
    )
    assert result["structuredContent"]["hits"][0]["version"] == "3.1.4"
    source = await host.call_tool(grant, "read_library", {"name_or_path": "widgets.spin_widget"})
    assert "def spin_widget" in source["content"][0]["text"]
    missing = await host.call_tool(grant, "read_library", {"name_or_path": "/etc/passwd"})
    assert missing["isError"] and "not a file of the library index" in missing["content"][0]["text"]


@pytest.mark.parametrize(
    ("package", "found"),
    [
        ("widgets", True),  # the distribution's name
        ("Widgets", True),  # any case
        ("python-dotenv", False),  # not installed: nothing of it to search
        ("mapleforms", False),  # the project's own module, not a library
        ("spin_widget", False),  # a definition's name is no package
    ],
)
async def test_a_package_that_is_not_installed_gets_an_error_not_other_librarys_hits(
    tmp_path, library, package, found
):
    """A model asked for `debug` in python-dotenv, not installed, and was shown psutil's
    `debug` as if it were the answer (issue 32): a `package` that names nothing
    installed is an error that says so, for the node and for a peer alike."""
    host = _host(tmp_path, library, ("search_library",))
    result = await host.call_tool(
        host.authorize(PEER), "search_library", {"query": "spin", "package": package}
    )
    text = result["content"][0]["text"]
    if found:
        assert not result["isError"] and "widgets.spin_widget" in text, text
    else:
        assert result["isError"], text
        assert f"no installed library is named {package!r}" in text
        assert "widgets/_core.py" not in text  # no hit of another library


async def test_a_peer_not_granted_the_library_tools_cannot_call_them(tmp_path, library):
    host = _host(tmp_path, library, ("read_file",))
    grant = host.authorize(PEER)
    assert "search_library" not in [spec["name"] for spec in host.list_tools(grant)]
    with pytest.raises(UnknownTool):
        await host.call_tool(grant, "search_library", {"query": "spin"})


@pytest.mark.parametrize(
    ("tool", "argument", "said"),
    [
        ("search_library", "requirements.txt", "requirements.txt is a file of the project"),
        ("search_library", " `requirements.txt` ", "requirements.txt is a file of the project"),
        ("search_library", "src/", "src is a folder of the project, not an installed library"),
        ("search_library", "src", None),  # a bare word may be a library's name
        ("search_library", "./src", "use list_dir for it"),
        ("search_library", "src/app.py", "use read_file for it"),
        ("read_library", "src/app.py:2", "src/app.py is a file of the project"),
        ("read_library", "./requirements.txt", "requirements.txt is a file of the project"),
        ("search_library", "spin_widget", None),  # the library's own
        ("search_library", "missing.txt", None),  # not in the project: searched as asked
        ("search_library", ".gbr/journal.db", None),  # private state: never said to exist
        ("search_library", "../root/requirements.txt", None),  # outside the root
        ("read_library", "/etc/passwd", "not a file of the library index"),
    ],
)
async def test_a_path_of_the_project_is_sent_to_read_file(tmp_path, library, tool, argument, said):
    """A small model searched the libraries for `requirements.txt` and answered from
    dnspython's TXT record (issue 32's held-out set): the node's own query naming
    something the project holds gets an error saying where to read it; others are
    answered as before. A peer granted only the library tools learns nothing of what
    the project holds: its queries are searched as asked."""
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print(1)\nprint(2)\n")
    (root / "requirements.txt").write_text("httpx\n")
    (root / ".gbr").mkdir()
    (root / ".gbr" / "journal.db").write_text("x")
    key = "query" if tool == "search_library" else "name_or_path"
    registry = build_registry(ToolsConfig(), Sandbox(root, []), library=library)
    result = registry.call(tool, {key: argument})
    text = result.content[0]["text"]
    if said is None:
        assert "of the project" not in text, text
        assert not result.is_error or "not a file of the library index" in text, text
    else:
        assert said in text and result.is_error, text
    host = _host(tmp_path, library, ("search_library", "read_library"))
    remote = await host.call_tool(host.authorize(PEER), tool, {key: argument})
    assert "of the project" not in remote["content"][0]["text"]


def test_the_prelookup_names_a_package_or_a_public_name_and_ignores_prose(library):
    assert prelookup(library, "how fast can widgets spin?", 1500) is None  # a plain word
    by_package = prelookup(library, "how fast can the widgets package spin?", 1500)
    assert by_package is not None and by_package.status == "library: 1 hit in widgets==3.1.4"
    assert "widgets.spin_widget(" in by_package.context
    by_name = prelookup(library, "what does spin_widget take?", 1500)  # indexed by now
    assert by_name is not None and "widgets==3.1.4" in by_name.status
    assert prelookup(library, "how are you today?", 1500) is None


def test_the_library_table_is_validated_like_every_profile_key(tmp_path):
    folder = tmp_path / ".gbr_envs"
    folder.mkdir()
    (folder / "default.toml").write_text('[library]\nenviroments = [".venv"]\n')
    with pytest.raises(ProfileError, match="enviroments"):
        load_profile(tmp_path, "default")
    (folder / "default.toml").write_text(
        '[library]\nenvironments = ["envs/a"]\nsources = ["node_modules"]\ncontext_tokens = 800\n'
    )
    library = load_profile(tmp_path, "default").profile.library
    assert library == LibraryConfig(
        environments=("envs/a",), sources=("node_modules",), context_tokens=800
    )


def test_an_environment_that_is_none_is_reported_and_the_rest_still_works(tmp_path):
    write_dist(tmp_path / "site", "fine", "1.0", {"fine.py": "def ok(): ...\n"})
    index = open_library(tmp_path, LibraryConfig(environments=("no/such/venv", "site")))
    assert index.refresh().indexed == ["fine==1.0"]
    assert (
        len(index.problems) == 1
        and "'no/such/venv' is not a virtual environment" in (index.problems[0])
    )


def test_the_projects_own_editable_install_is_no_library(tmp_path):
    """An editable install's sources are followed only in the node's own interpreter
    (GBR-PRIV-01); a site folder outside the root that is not the node's own is not
    read at all, whatever project looks at it."""
    project = tmp_path / "project"
    (project / "mine").mkdir(parents=True)
    (project / "mine" / "__init__.py").write_text("SECRET_PLAN = 'keep out'\n")
    site = tmp_path / "site"
    dist_info = write_dist(site, "mine", "0.1", {"__editable__.mine-0.1.pth": f"{project}\n"})
    (dist_info / "direct_url.json").write_text(
        f'{{"url": "file://{project}", "dir_info": {{"editable": true}}}}'
    )
    config = LibraryConfig(environments=(str(site),))
    outside = open_library(tmp_path / "elsewhere", config)
    assert outside.refresh().indexed == []
    assert "lies outside the allowed root" in outside.problems[0]
    inside = open_library(project, config, root=project)
    assert inside.refresh().indexed == [] and inside.search("SECRET_PLAN") == []
