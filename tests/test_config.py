"""Every setting, from the config file and from the environment, is checked for its type and
(numbers) finiteness in one place, and a bad one names the setting, where it is set, and the
fix: never a TypeError, never a NaN that passes a range check."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.errors import ConfigError

SETTINGS = [f for f in fields(Settings) if f.name not in ("home", "storage")]
NUMBERS = [f for f in SETTINGS if str(f.type) == "float"]


@pytest.mark.parametrize("spec", SETTINGS, ids=[f.name for f in SETTINGS])
@pytest.mark.parametrize(
    "value", ["[6000]", "{ a = 1 }", "1979-05-27"], ids=["list", "table", "date"]
)
def test_a_value_of_the_wrong_type_in_the_file_names_the_setting_file_and_fix(
    spec: object, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = spec.name  # type: ignore[attr-defined]
    monkeypatch.delenv(spec.metadata["env"], raising=False)  # type: ignore[attr-defined]
    (tmp_path / "config.toml").write_text(f"{name} = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'config.toml'}: {name} is ")
    assert f"write e.g. {name} = " in message and "remove the line for the default" in message


@pytest.mark.parametrize("spec", NUMBERS, ids=[f.name for f in NUMBERS])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_no_number_may_be_nan_or_infinite_in_the_file_or_the_environment(
    spec: object, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, env = spec.name, spec.metadata["env"]  # type: ignore[attr-defined]
    monkeypatch.delenv(env, raising=False)
    (tmp_path / "config.toml").write_text(f"{name} = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"{name} is not finite \({value}\)"):
        load_settings(tmp_path)
    (tmp_path / "config.toml").unlink()
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=rf"{env}='{value}' is not a finite number"):
        load_settings(tmp_path)
    with pytest.raises(ConfigError, match=rf"{name} {value} is not a finite number"):
        Settings(home=tmp_path, **{name: float(value)})  # a library caller, a flag


def test_a_range_error_says_where_the_value_was_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.toml").write_text("digest_tokens = 100\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"at least 200 .*\(set in .*config\.toml\)"):
        load_settings(tmp_path)
    monkeypatch.setenv("MTL_MCP_OPENAI_TIMEOUT", "0")
    (tmp_path / "config.toml").unlink()
    with pytest.raises(
        ConfigError, match=r"openai_timeout 0.0 .*\(set in MTL_MCP_OPENAI_TIMEOUT\)"
    ):
        load_settings(tmp_path)


def test_text_in_the_file_reads_as_the_environment_would(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'digest_tokens = "7000"\nplan_recall = "off"\nhook_budget_seconds = 2\n', encoding="utf-8"
    )
    settings = load_settings(tmp_path)
    assert (settings.digest_tokens, settings.plan_recall) == (7000, False)
    assert settings.hook_budget_seconds == 2.0
