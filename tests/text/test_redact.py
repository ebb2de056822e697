"""Secret redaction: every provider's shape is caught, look-alikes are left alone."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtl_mcp.text.redact import SecretFinding, find_secrets, redact

# Random-looking bodies. Every fake secret below is assembled from a prefix and these,
# so this file never holds a contiguous live-looking key for scanners to flag.
R32 = "Zq8xK2mV9pL4nB7cT1wY6hF3jD5sG0aR"
R36 = R32 + "u7Ee"
R64 = R32 + "Hn2Wc8Lk5Vb1Xz9Mq4Tp7Gd3Sf6Jr0Ya"
HEX32 = "9f86d081884c7d659a2feaa0c55ad015"
HEX64 = HEX32 + "a3bf4f1b2b0b822cd15d6c15b0f00a08"
B64_40 = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "q9Zt4LmW2v"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4"

# (kind, text containing the secret, the secret itself)
SECRETS: list[tuple[str, str, str]] = [
    ("aws-access-key", "aws configure set aws_access_key_id {s}", "AKIA" + "Q7XK2MV9PL4NB7CT"),
    ("aws-access-key", "session key {s} expires soon", "ASIA" + "J3N5B7V9C2X4Z6L8"),
    ("aws-secret-key", "aws_secret_access_key = {s}", B64_40),
    ("gcp-api-key", "maps?key={s}&q=x", "AIza" + "SyD9tSrke72PouQMnMXa7eZSW0jkFMBWY1q"),
    (
        "private-key",
        '{{"type": "service_account", "private_key": "{s}", "client_id": "1"}}',
        "-----BEGIN PRIVATE KEY-----\\n"
        + PEM_BODY.replace("\n", "\\n")
        + "\\n-----END PRIVATE KEY-----\\n",
    ),
    (
        "azure-storage-key",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={s};EndpointSuffix=x",
        B64_40 + R32 + "==",
    ),
    ("azure-sas", "https://acme.blob.core.windows.net/c?sv=2022-11-02&sig={s}&se=1", R32 + "%3D"),
    ("github-token", "git clone https://x-access-token@github.com with {s}", "ghp_" + R36),
    ("github-token", "oauth {s}", "gho_" + R36),
    ("github-token", "app {s}", "ghs_" + R36),
    ("github-token", "refresh {s}", "ghr_" + R36),
    ("github-token", "user {s}", "ghu_" + R36),
    ("github-token", "fine-grained {s}", "github_pat_" + "11ABCDEFG0" + R32[:12] + "_" + R64[:59]),
    ("gitlab-token", "PRIVATE-TOKEN header {s}", "glpat-" + R32[:20]),
    ("bitbucket-token", "app password {s}", "ATBB" + R32),
    ("anthropic-key", "client = Anthropic(api_key={s})", "sk-ant-api03-" + R64 + "-" + R32[:20]),
    ("openai-key", "use {s} for OpenAI", "sk-proj-" + R64),
    ("openai-key", "legacy {s}", "sk-" + R32[:20] + "T3BlbkFJ" + R32[:20]),
    ("huggingface-token", "login with {s}", "hf_" + R32 + "Qw"),
    ("groq-key", "groq {s}", "gsk_" + R36 + R32[:16]),
    ("replicate-token", "replicate {s}", "r8_" + R36 + "b"),
    ("stripe-key", "stripe.api_key = {s}", "sk_live_" + R32),
    ("stripe-key", "restricted {s}", "rk_test_" + R32[:24]),
    ("stripe-key", "publishable {s}", "pk_live_" + R32[:24]),
    ("slack-token", "bot {s}", "xoxb-" + "1234567890-1234567890123-" + R32[:24]),
    ("slack-token", "user {s}", "xoxp-" + "1234567890-1234567890-1234567890123-" + HEX32),
    ("slack-token", "app-level {s}", "xapp-1-A0123456789-1234567890123-" + HEX64),
    (
        "slack-webhook",
        "POST to {s} with a JSON body",
        "https://hooks.slack.com/services/T0A1B2C3D/B4E5F6G7H/" + R32[:24],
    ),
    (
        "discord-token",
        "bot.run({s})",
        "MTA5" + "NzI0MzE5MjM0NTY3ODkw" + ".Gx3Ab9." + R36[:32] + "k1Lm7Q",
    ),
    (
        "discord-webhook",
        "hook {s} done",
        "https://discord.com/api/webhooks/1234567890123456789/" + R64,
    ),
    ("telegram-token", "bot {s} started", "123456789:AA" + R32 + "q"),
    ("npm-token", "//registry.npmjs.org/:_authToken={s}", "npm_" + R36),
    ("pypi-token", "twine upload -p {s}", "pypi-AgEIcHlwaS5vcmc" + R64),
    ("rubygems-token", "gem push with {s}", "rubygems_" + HEX32 + HEX32[:16]),
    (
        "nuget-key",
        "dotnet nuget push -k {s}",
        "oy2" + "ka7nq3xw9mfz2ld8vbe4tcy6ru5hg1sjop0zxcqwmne",
    ),
    ("sendgrid-key", "sendgrid {s}", "SG." + R32[:22] + "." + R36 + "aB3dE6g"),
    ("twilio-key", "twilio api key {s}", "SK" + HEX32),
    ("mailgun-key", "mailgun {s}", "key-" + R32),
    ("digitalocean-token", "doctl auth init -t {s}", "dop_v1_" + HEX64),
    ("heroku-key", "heroku {s}", "HRKU-AA" + R32 + R32[:26]),
    ("shopify-token", "X-Shopify-Access-Token {s}", "shpat_" + HEX32),
    ("doppler-token", "doppler {s}", "dp.pt." + R32 + "Kd82hJ3n1Q"),
    ("google-oauth-token", "access {s}", "ya29." + R64),
    ("linear-key", "linear {s}", "lin_api_" + R32 + "AbCd1234"),
    (
        "jwt",
        "cookie session={s}; Path=/",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + R32,
    ),
    (
        "private-key",
        "key file:\n{s}\nthen ssh",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + PEM_BODY + "\n-----END OPENSSH PRIVATE KEY-----",
    ),
    (
        "private-key",
        "truncated output: {s}",
        "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY,
    ),
    ("bearer", "curl -H 'Authorization: Bearer {s}' https://api", R64),
    ("bearer", "the header was Bearer {s} all along", "a1b2" + R32),
    ("basic-auth", "Authorization: Basic {s}", "YWRtaW46aHVudGVyMg=="),
    ("password-in-url", "DATABASE_URL=postgres://app:{s}@db.internal:5432/app", "s3cr3t-P4ss"),
    ("password-in-url", "redis://:{s}@cache:6379/0", "hunter2hunter2"),
    ("password-in-url", "git remote add origin https://bob:{s}@git.example.com/r.git", "p@ss"),
    ("env-assignment", "DB_PASSWORD={s}", "hunter2"),
    ("env-assignment", 'export API_KEY="{s}"', "abc123def456"),
    ("env-assignment", '{{"api_key": "{s}", "model": "m"}}', "live-9f8e7d6c"),
    ("env-assignment", "db:\n  user: app\n  password: {s}\n  host: db", "Tr0ub4dor&3"[:9]),
    ("env-assignment", "SECRET_KEY_BASE={s}", "d1e2f3a4b5c6"),
    ("env-assignment", "spring.datasource.password={s}", "Tr0ub4dor"),
    ("env-assignment", "clientSecret: '{s}'", "q1w2e3r4t5"),
    ("env-assignment", "GITHUB_TOKEN_PROD={s}", "tok3n-value"),
    ("env-assignment", "$password = '{s}';", "php-s3cret"),
    ("env-assignment", "mysql --password={s} -u root", "rootpw123"),
    ("env-assignment", "the staging db password: {s} (rotate it)", "Winter2024"),
    ("env-assignment", "postgres:\n  password: {s}\n", "letmein"),
    ("private-tag", "before {s} after", "<private>my home address\nis 1 Main St</private>"),
]


def _table_id(row: tuple[str, str, str]) -> str:
    return f"{row[0]}:{row[1][:24]}"


@pytest.mark.parametrize(("kind", "template", "secret"), SECRETS, ids=map(_table_id, SECRETS))
def test_each_kind_of_secret_is_replaced_and_the_text_around_it_kept(
    kind: str, template: str, secret: str
) -> None:
    """Only the secret itself becomes [REDACTED:<kind>]; everything around it survives."""
    text = "Lead-in words. " + template.format(s=secret) + " Trailing words."
    expected = text.replace(secret, f"[REDACTED:{kind}]")
    assert redact(text) == expected


def test_an_unclosed_private_fence_hides_everything_after_it() -> None:
    """A forgotten </private> errs on the side of privacy."""
    text = "public part <private>my address\nis 1 Main St\n\nand more"
    assert redact(text) == "public part [REDACTED:private-tag]"


def test_find_secrets_reports_kind_and_exact_span() -> None:
    """A finding's span covers exactly the secret, so callers can slice it out."""
    key = "ghp_" + R36
    text = f"push with {key} now"
    assert find_secrets(text) == [SecretFinding("github-token", 10, 10 + len(key))]


def test_findings_over_a_whole_corpus_are_sorted_and_disjoint() -> None:
    """Many secrets in one text come back in order, never overlapping."""
    text = "\n".join(template.format(s=secret) for _, template, secret in SECRETS[:-1])
    findings = find_secrets(text)
    assert len(findings) >= len(SECRETS) - 1
    for before, after in itertools.pairwise(findings):
        assert before.end <= after.start


LOOK_ALIKES = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
    "git checkout 3f78685",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "md5 d41d8cd98f00b204e9800998ecf8427e",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "loaded tokenizer_config.json and special_tokens_map.json",
    "client.messages.create(max_tokens=512)",
    "MAX_TOKENS: 4096",
    '"cache_read_input_tokens": 0, "output_tokens": 120',
    "password_reset_url=https://example.com/reset",
    "TOKEN_EXPIRY=3600",
    "KEY_ID=abc",
    "token_type: bearer",
    "this_is_a_very_long_snake_case_identifier_for_a_secret_token_helper",
    "The base64 of hello is aGVsbG8gd29ybGQ in this paragraph",
    "API_KEY=your-key-here",
    "token: <your-token>",
    "PASSWORD=xxx",
    "password: ********",
    "API_KEY=${API_KEY}",
    "TOKEN=$GITHUB_TOKEN",
    "client_secret: ${{ secrets.CLIENT_SECRET }}",
    'api_key = os.environ["ANTHROPIC_API_KEY"]',
    "api_key = os.environ.get('ANTHROPIC_API_KEY')",
    "token = get_token()",
    "self.api_key = api_key",
    "password=password",
    "def login(username: str, password: str) -> None:",
    "sorted(items, key=lambda item: item.name)",
    "{'key': 'name', 'value': 1}",
    "auth: true",
    "PWD=/home/me/project",
    "GOOGLE_APPLICATION_CREDENTIALS=/path/to/creds.json",
    "Bearer tokens are sent in a header",
    "AWS_ACCESS_KEY_ID=<your-access-key-id>",
    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "monkey=banana keyboard: us",
    "hf_hub_download(repo_id='x')",
    "pip install scikit-learn; sk-learn-is-not-a-key-just-words",
    "http://localhost:8080/path?x=1",
    "git@github.com:org/repo.git",
    "ssh://git@github.com:22/org/repo",
    "passes: 3, skipped: 1",
    "Store the password: use a vault, never the repository.",
    "The secret: always reproduce before fixing.",
    "Hello, world!",
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_and_placeholders_are_left_alone(text: str) -> None:
    """Hashes, ids, ordinary names and placeholders are not secrets."""
    assert find_secrets(text) == []
    assert redact(text) == text


def test_an_already_redacted_value_is_not_redacted_again() -> None:
    """A marker is never mistaken for a value or for the name of another assignment."""
    once = redact("TOKEN=ghp_" + R36 + ": next")
    assert once == "TOKEN=[REDACTED:github-token]: next"
    assert redact(once) == once


def test_tokens_glued_together_are_all_redacted() -> None:
    """A token whose start touched another token's end is caught once that one is gone."""
    glued = "AKIA" + "Q7XK2MV9PL4NB7CT" + "ghp_" + R36
    assert redact(glued) == "[REDACTED:aws-access-key][REDACTED:github-token]"


def test_redaction_of_a_five_megabyte_input_is_fast() -> None:
    """Linear patterns: a 5 MB transcript-like text, hostile fragments included, is quick."""
    block = "\n".join(
        [
            "$ pytest -q tests/test_api.py",
            "FAILED tests/test_api.py::test_login - AssertionError: 401 != 200",
            'tool_result {"output_tokens": 120, "cache_read_input_tokens": 0}',
            "export DB_PASSWORD=hunter2 && curl -H 'Authorization: Bearer " + R64 + "'",
            "commit 3f786850e387550fdab836ed7e6dc881de23001b and ghp_" + R36,
            "key:key:key: -----BEGIN PRIVATE KEY----- <private> ://a:b ",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + HEX64,
        ]
    )
    text = (block + "\n") * (5_000_000 // (len(block) + 1))
    started = time.perf_counter()
    out = redact(text)
    elapsed = time.perf_counter() - started
    assert "hunter2" not in out
    assert R36 not in out
    assert elapsed < 15, f"redacting 5 MB took {elapsed:.1f} s"


def test_hostile_repetitions_stay_linear() -> None:
    """Openers without closers and dense keywords do not trigger quadratic scans: four times
    the text takes about four times as long (a quadratic scan, sixteen). A ratio of the
    fastest of three runs each, so that a loaded machine slows both sides alike."""

    def fastest(text: str) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            redact(text)
            times.append(time.perf_counter() - started)
        return min(times)

    for piece in [
        "-----BEGIN PRIVATE KEY-----",
        "<private",
        "://user:",
        "password=(",
        "key:",
        "eyJa.",
    ]:
        short = piece * (60_000 // len(piece))
        growth = fastest(short * 4) / fastest(short)
        assert growth < 9, f"{piece}: 4x the text took {growth:.1f}x as long"


# Fragments that tend to interact: names, separators, markers, openers, real-looking keys.
FRAGMENTS = [
    "password",
    "API_KEY",
    "token",
    "key",
    "=",
    ":",
    ": ",
    '"',
    "'",
    " ",
    "\n",
    "@",
    "://",
    "https://u:",
    "<private>",
    "</private>",
    "[REDACTED:",
    "[REDACTED:github-token]",
    "]",
    "Bearer ",
    "Authorization: ",
    "ghp_" + R36,
    "sk-ant-api03-" + R32,
    "AKIA" + "Q7XK2MV9PL4NB7CT",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0." + R32[:10],
    "-----BEGIN PRIVATE KEY-----",
    "-----END PRIVATE KEY-----",
    "hunter2",
    R32,
    "${VAR}",
    "xoxb-",
    "123456789",
]


@settings(max_examples=300)
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=30))
def test_redact_is_idempotent_on_secret_laden_text(parts: list[str]) -> None:
    """Redacting twice changes nothing more than redacting once."""
    once = redact("".join(parts))
    assert redact(once) == once


@given(st.text())
def test_redact_never_raises_and_findings_are_well_formed(text: str) -> None:
    """Arbitrary text is handled; findings are sorted, disjoint and inside the text."""
    findings = find_secrets(text)
    position = 0
    for f in findings:
        assert position <= f.start < f.end <= len(text)
        position = f.end
    once = redact(text)
    assert redact(once) == once
