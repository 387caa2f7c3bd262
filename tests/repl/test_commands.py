"""Parsing of REPL lines and the model-choice merge order."""

import pytest

from gbr_node.agent.messages import InterruptAndSuggest, UserPrompt
from gbr_node.config.profile import ModelConfig
from gbr_node.control import REPL_COMMANDS
from gbr_node.llm.choice import OLLAMA_BASE_URL, choose_model, with_ollama
from gbr_node.repl.commands import CommandError, SlashCommand, help_text, parse_line


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("hello", UserPrompt("hello")),
        ("  spaced  ", UserPrompt("spaced")),
        ("", None),
        ("/s shorter please", InterruptAndSuggest("shorter please")),
        ("/suggestion use trio", InterruptAndSuggest("use trio")),
        ("/S caps", InterruptAndSuggest("caps")),
        ("//etc/passwd is a path", UserPrompt("/etc/passwd is a path")),
        ("/tools", SlashCommand("tools")),
        ("/env use reviewer", SlashCommand("env", "use reviewer")),
        ("/exit", SlashCommand("quit")),
        ("/dial /ip4/127.0.0.1/tcp/4001", SlashCommand("dial", "/ip4/127.0.0.1/tcp/4001")),
    ],
)
def test_lines_parse_to_what_they_ask_for(line, expected):
    assert parse_line(line, REPL_COMMANDS) == expected


def test_unknown_command_suggests_the_closest():
    with pytest.raises(CommandError, match="did you mean /history"):
        parse_line("/histroy", REPL_COMMANDS)


def test_suggestion_without_text_is_an_error_not_an_empty_interrupt():
    with pytest.raises(CommandError, match="/s needs TEXT"):
        parse_line("/s", REPL_COMMANDS)


def test_help_lists_every_command():
    text = help_text(REPL_COMMANDS)
    for name in ("/help", "/s TEXT", "/tools", "/peers", "/dial", "/history", "/clear", "/quit"):
        assert name in text


def test_flags_beat_environment_beat_profile():
    profile = ModelConfig(base_url="http://profile/v1", model="p", api_key_env="MY_KEY")
    env = {"OPENAI_BASE_URL": "http://env/v1", "MY_KEY": "k1", "OPENAI_API_KEY": "other"}
    choice = choose_model(profile, env, model="flag-model")
    assert choice.config.base_url == "http://env/v1"
    assert choice.config.model == "flag-model"
    assert choice.api_key == "k1"
    assert choice.sources == {"base_url": "$OPENAI_BASE_URL", "model": "flag --model"}


def test_unconfigured_choice_can_fall_back_to_ollama():
    choice = choose_model(ModelConfig(), {})
    assert not choice.configured
    found = with_ollama(choice, "llama3")
    assert (found.config.base_url, found.config.model) == (OLLAMA_BASE_URL, "llama3")


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        ("/us", ["/usage"]),
        ("/appr", ["/approvals", "/approve"]),
        ("/q", ["/q", "/quit"]),
        ("/dial b", ["/dial bob", "/dial bobby"]),
        ("/approve ", ["/approve 3", "/approve 12"]),
        ("/reject 1", ["/reject 12"]),
        ("/env ", ["/env all", "/env use ", "/env reload"]),
        ("/env use re", ["/env use reviewer"]),
        ("hello /us", []),
        ("/nothing ", []),
        ("/dial bob extra", []),
    ],
)
def test_tab_completes_commands_aliases_approval_ids_and_profiles(before, expected):
    from gbr_node.repl.commands import complete

    options = complete(
        before,
        aliases=["bob", "bobby"],
        approvals=[3, 12],
        profiles=["default", "reviewer"],
        table=REPL_COMMANDS,
    )
    assert options == expected


def test_tab_completes_every_command_that_help_lists():
    from gbr_node.repl.commands import complete

    for name in REPL_COMMANDS:
        assert f"/{name}" in complete(f"/{name[:2]}", table=REPL_COMMANDS), name
    assert complete("/comp", table=REPL_COMMANDS) == ["/compact"]
