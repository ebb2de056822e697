"""Which settings make a shared service another one: its fingerprint."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.operations.service import PROCESS_SETTINGS, Rendezvous, fingerprint, fingerprint_0_3

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
        "consolidate_idle_seconds",  # when the service consolidates, not what it answers
        "consolidate_every_hours",
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


@dataclass(frozen=True)
class LaterSettings(Settings):
    """The settings of a later release: one more setting, with its default."""

    a_later_setting: float = 0.5


def test_a_setting_a_later_release_adds_keeps_the_fingerprint_at_its_default(
    tmp_path: Path,
) -> None:
    """A release that adds a setting gives the same configuration the same fingerprint, so
    its service takes over from the older one instead of starting beside it; set to
    anything but its default, the new setting splits the service."""
    home = tmp_path / "home"
    assert fingerprint(LaterSettings(home=home), {}) == fingerprint(Settings(home=home), {})
    assert fingerprint(LaterSettings(home=home, a_later_setting=0.7), {}) != fingerprint(
        Settings(home=home), {}
    )
    chosen = {"dedup_threshold": 0.9, "team_uri": "/pool"}
    assert fingerprint(LaterSettings(home=home, **chosen), {}) == fingerprint(
        Settings(home=home, **chosen), {}
    )


def test_the_0_3_fingerprint_is_the_one_0_3_computed() -> None:
    """Where a 0.3 service of the same settings listens (hashes computed by 0.3's own
    `fingerprint`, commit 30ea2e3), so that this release can take over from it."""
    env = {"AWS_REGION": "x"}
    assert fingerprint_0_3(Settings(home=Path("/h")), env) == (
        "71a87897956a90c450a2614decb1e6bb1eefc849c2b84d33c42a0ff58fa6de94"
    )
    pooled = Settings(home=Path("/h"), team_uri="s3://b/p", dedup_threshold=0.9)
    assert fingerprint_0_3(pooled, env) == (
        "bb1dd2969414644c00d329717562117296dff7aaa990d9f68f3075581e60a0ea"
    )
    legacy = fingerprint_0_3(pooled)  # in this process's environment
    assert [(r.key, r.fingerprint) for r in Rendezvous.predecessors(pooled)] == [
        ("", None),
        (legacy[:12], legacy),
    ]
