"""Which settings make a shared service another one: its fingerprint."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.operations.service import PROCESS_SETTINGS, Rendezvous, fingerprint

S3 = {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_ENDPOINT": "http://x"}


def test_only_the_settings_that_tune_the_process_are_left_out() -> None:
    """Every Settings field is in the fingerprint but these: a new one is in by
    default, and leaving one out is a decision this test records."""
    assert {f.name for f in fields(Settings)} >= PROCESS_SETTINGS
    assert {
        "home",
        "service",
        "service_idle_seconds",
        "plan_recall",
        "auto_recall_min_p",  # a hook passes it with each call, as the context call does
        "hook_budget_seconds",
    } == PROCESS_SETTINGS


def test_every_served_setting_and_secret_changes_it(settings: Settings) -> None:
    """The store, the pool, the model, the threshold, the backend and the key each change
    it; the idle time, PATH and HOME do not."""
    base = fingerprint(settings, {})
    changed = [
        load_settings(settings.home, store_uri="/elsewhere"),
        load_settings(settings.home, team_uri="s3://bucket/pool"),
        load_settings(settings.home, embed_model="BAAI/bge-small-en-v1.5"),
        load_settings(settings.home, dedup_threshold=0.99),
        load_settings(settings.home, distill_backend="off"),
        load_settings(settings.home, anthropic_api_key="sk-ant-one"),
    ]
    prints = {fingerprint(other, {}) for other in changed}
    assert base not in prints and len(prints) == len(changed)
    assert fingerprint(settings, {"ANTHROPIC_BASE_URL": "http://proxy"}) != base
    assert fingerprint(settings, {"CODEX_HOME": "/other"}) != base
    same = load_settings(settings.home, service_idle_seconds=5.0, service=False)
    assert fingerprint(same, {"PATH": "/bin", "HOME": "/root"}) == base


def test_object_store_variables_count_only_for_a_remote_store_or_pool(
    settings: Settings,
) -> None:
    """AWS_* split the service when a URI is on object storage, not when both are local."""
    assert fingerprint(settings, S3) == fingerprint(settings, {})
    remote = load_settings(settings.home, team_uri="s3://bucket/pool")
    assert fingerprint(remote, S3) != fingerprint(remote, {})
    other_secret = {**S3, "AWS_SECRET_ACCESS_KEY": "another"}
    assert fingerprint(remote, S3) != fingerprint(remote, other_secret)


def test_the_rendezvous_is_named_by_the_key_and_holds_no_secret(tmp_path: Path) -> None:
    """`<home>/run/<12 hex>/service.sock`; the key is a prefix of the hash, nothing more."""
    settings = load_settings(tmp_path / "home", anthropic_api_key="sk-ant-secret")
    rendezvous = Rendezvous.of(settings, {})
    assert rendezvous.fingerprint is not None and len(rendezvous.fingerprint) == 64
    assert rendezvous.key == rendezvous.fingerprint[:12]
    assert rendezvous.socket_path == settings.home / "run" / rendezvous.key / "service.sock"
    assert "secret" not in str(rendezvous.socket_path)
    assert rendezvous.log_file == settings.home / "logs" / "service.log"
