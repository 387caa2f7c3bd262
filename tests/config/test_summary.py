"""`/env` shows one screen, `/env all` the whole profile (issue 34: it printed ~120 lines)."""

from __future__ import annotations

from gbr_node.config.loader import default_template, load_profile, render_effective
from gbr_node.config.render import summary


def test_the_env_summary_fits_one_screen_and_names_what_matters(tmp_path) -> None:
    (tmp_path / ".gbr_envs").mkdir()
    (tmp_path / ".gbr_envs" / "default.toml").write_text(
        default_template()
        + '\n[peers.bob]\npeer_id = "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"\n'
        'tools = ["read_file"]\nchat = "show"\n'
    )
    loaded = load_profile(tmp_path)
    lines = summary(loaded.profile, loaded.name, str(loaded.file), str(loaded.root))
    assert len(lines) <= 15 and all(len(line) <= 200 for line in lines)
    text = "\n".join(lines)
    assert "profile default" in text and str(loaded.root) in text
    assert "bob (tools: read_file; chat show)" in text and "/env all" in text
    assert len(render_effective(loaded).splitlines()) > 3 * len(lines)
