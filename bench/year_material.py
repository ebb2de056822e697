"""The hand-written material of the simulated year (`bench/year_stream.py` turns it into a
stream): the lessons beyond the shipped evaluation pool, the contradicting and superseding
pairs, the project facts that slip past the lint, the projects, and the words the
paraphraser swaps. Nothing here is read by mtl-mcp itself.
"""

from __future__ import annotations

from typing import Any

Lesson = dict[str, Any]


def _lesson(
    key: str,
    title: str,
    description: str,
    content: str,
    domain: str,
    polarity: str = "success",
    category: str = "workflow-discipline",
    **extra: Any,
) -> Lesson:
    return {
        "key": key,
        "draft": {
            "title": title,
            "description": description,
            "content": content,
            "polarity": polarity,
            "category": category,
            "domain": domain,
        },
        **extra,
    }


# Lessons that transfer, beyond the evaluation pool: what other sessions of the year teach.
EXTRA_LESSONS: list[Lesson] = [
    _lesson(
        "g01",
        "Read a stack trace from the innermost frame of your own code",
        "When an exception report shows dozens of frames from libraries and frameworks.",
        "Skip the framework frames and start at the deepest frame that belongs to the code "
        "under change. That frame shows which input reached the library, which is where the "
        "fault usually is.",
        "cli-tooling",
        category="exploration",
    ),
    _lesson(
        "g02",
        "Upgrade one dependency at a time",
        "When several dependencies are outdated and an upgrade is due.",
        "Upgrading many packages in one step broke the build and hid which package caused "
        "it. Bump one dependency, run the checks, commit, then take the next, so a failure "
        "points at its cause.",
        "cli-tooling",
        polarity="failure",
        category="environment-adaptation",
    ),
    _lesson(
        "g03",
        "Write the commit message as the reason for the change",
        "When committing a change that others will read in the history later.",
        "State why the change was made and what it affects in the first line, not which "
        "files were touched. The diff already shows what changed; only the message can keep "
        "the reason.",
        "desktop",
        category="interaction-protocol",
    ),
    _lesson(
        "g04",
        "Put new behaviour behind a flag that defaults to off",
        "When shipping a risky change to a running product in stages.",
        "Guard the new path with a switch that starts disabled, turn it on for a small share "
        "first, and keep the old path until the new one has run cleanly. Turning a flag off "
        "is faster than reverting a release.",
        "game-dev",
        category="workflow-discipline",
    ),
    _lesson(
        "g05",
        "Invalidate a cache where the data is written",
        "When cached values go stale after updates made elsewhere in the code.",
        "A cache that expired only by time served old values for minutes after an edit. "
        "Drop or refresh the cached entry in the same code path that writes the data, and "
        "keep the time limit only as a safety net.",
        "game-dev",
        polarity="failure",
        category="algorithmic-strategy",
    ),
    _lesson(
        "g06",
        "Make error messages say what to do next",
        "When writing the message a user sees after a command or request fails.",
        "Name what went wrong in the user's terms and the one action that fixes it, such as "
        "the setting to change or the command to run. A message that only repeats the "
        "exception sends people to search engines.",
        "desktop",
        category="interaction-protocol",
    ),
    _lesson(
        "g07",
        "Write the reproduction script before asking for help",
        "When a problem needs someone else's eyes, in an issue or a review.",
        "Reduce the problem to a short script that anyone can run to see the failure. "
        "Writing it often reveals the cause, and when it does not, the helper starts from "
        "evidence instead of guesses.",
        "cli-tooling",
        category="exploration",
    ),
    _lesson(
        "g08",
        "Review your own diff before asking others to",
        "When a change is ready to be proposed for review.",
        "Read the full diff once as a reviewer would: leftover debug prints, unrelated "
        "formatting and commented-out code show up at once. Reviewers then spend their "
        "attention on the design rather than on noise.",
        "desktop",
        category="workflow-discipline",
    ),
    _lesson(
        "g09",
        "Keep configuration in one place with defaults in code",
        "When settings come from files, the environment and command-line flags at once.",
        "Settings read in several places drifted apart and a flag was silently ignored. "
        "Load configuration once, in one module, with documented precedence and defaults, "
        "and pass the result to the code that needs it.",
        "cli-tooling",
        polarity="failure",
        category="environment-adaptation",
    ),
    _lesson(
        "g10",
        "Time out every call to another service",
        "When code calls a remote service, a queue or any network resource.",
        "A call without a deadline hung a worker forever when the remote side stopped "
        "answering. Give every remote call a timeout, and decide what the caller does when "
        "it expires.",
        "game-dev",
        polarity="failure",
        category="interaction-protocol",
    ),
    _lesson(
        "g11",
        "Check the free disk space before a large job",
        "When a job writes large files, caches or build artifacts.",
        "A long export died near the end because the disk filled up. Estimate the output "
        "size and check the free space before starting, and write to a temporary name that "
        "is renamed only on success.",
        "desktop",
        polarity="failure",
        category="environment-adaptation",
    ),
    _lesson(
        "g12",
        "Write down the decision and the alternatives you rejected",
        "When a design choice is made that later readers might question.",
        "Record the choice, the options considered and why they lost, next to the code or "
        "in the design notes. Without it, the same debate comes back and the rejected "
        "option returns.",
        "desktop",
        category="workflow-discipline",
    ),
    _lesson(
        "g13",
        "Log the inputs of a failing batch item and carry on",
        "When a batch job processes many independent items and one of them fails.",
        "One malformed record stopped a nightly batch of thousands. Catch the failure per "
        "item, log the item's identity and the error, continue with the rest, and report "
        "the failures at the end.",
        "game-dev",
        polarity="failure",
        category="input-validation",
    ),
    _lesson(
        "g14",
        "Profile memory as well as time",
        "When a program slows down or gets killed as its input grows.",
        "A job that was fast on samples was killed on the full input because it held every "
        "record at once. Measure peak memory on a realistic input, and stream or chunk the "
        "data when it grows with the input.",
        "game-dev",
        polarity="failure",
        category="algorithmic-strategy",
    ),
    _lesson(
        "g15",
        "Prefer a library's documented behaviour to its observed behaviour",
        "When code relies on what a library happens to do in one version.",
        "Code that depended on an undocumented ordering broke when the library changed it. "
        "Rely on what the documentation promises, and pin down anything else you depend on "
        "with a test.",
        "desktop",
        polarity="failure",
        category="api-compliance",
    ),
    _lesson(
        "g16",
        "Delete dead code instead of commenting it out",
        "When code is no longer used after a change.",
        "Remove unused code outright; version control keeps it if it is ever needed. "
        "Commented-out blocks go stale, confuse searches and get copied back in by mistake.",
        "cli-tooling",
        category="anti-patterns",
    ),
    _lesson(
        "g17",
        "Measure the frame budget before optimising rendering",
        "When a game or animation stutters and rendering looks like the cause.",
        "Capture a frame timing profile first and find which stage overruns its share of "
        "the frame. Optimising the part that seemed slow wasted a day while the stall was in "
        "asset loading.",
        "game-dev",
        polarity="failure",
        category="algorithmic-strategy",
    ),
    _lesson(
        "g18",
        "Ask for the expected output when the request is ambiguous",
        "When a task can be read two ways and the difference changes the work.",
        "Describe both readings briefly and ask which one is meant, or show a small example "
        "of the output for each. A minute of clarification saves rework on the wrong "
        "interpretation.",
        "desktop",
        category="interaction-protocol",
    ),
    _lesson(
        "g19",
        "Keep generated files out of hand edits",
        "When a repository holds files produced by a generator or a build step.",
        "A hand edit to a generated file was overwritten by the next build. Change the "
        "generator's input or template instead, regenerate, and commit both together.",
        "cli-tooling",
        polarity="failure",
        category="file-syntax",
    ),
    _lesson(
        "g20",
        "Set the locale and encoding explicitly in scripts",
        "When a script reads or writes text on machines with different settings.",
        "A script that worked on one machine garbled accented names on another because the "
        "default encoding differed. Open files with an explicit encoding and set the locale "
        "the script expects.",
        "cli-tooling",
        polarity="failure",
        category="file-syntax",
    ),
    _lesson(
        "g21",
        "Save and restore player progress across versions",
        "When a game or app stores user progress that must survive updates.",
        "An update that changed the save format wiped players' progress. Version the saved "
        "data, migrate old saves on load, and test loading saves written by the previous "
        "release.",
        "game-dev",
        polarity="failure",
        category="api-compliance",
    ),
    _lesson(
        "g22",
        "Run the slowest checks last and the fastest first",
        "When arranging the checks of a pipeline or a pre-commit routine.",
        "Order the checks so formatting and type checks run before the long test suites. "
        "Most mistakes are then caught in seconds, and the slow stages run only on changes "
        "that are already clean.",
        "cli-tooling",
        category="workflow-discipline",
    ),
    _lesson(
        "g23",
        "Keep user-facing text out of the code paths that compute",
        "When messages, labels or translations are mixed into program logic.",
        "Put user-facing strings in one place and look them up by key. Logic then stays "
        "testable without the wording, and translations can change without touching it.",
        "desktop",
        category="anti-patterns",
    ),
    _lesson(
        "g24",
        "Snapshot the state before a risky manual operation",
        "When about to run a one-off command against data or a machine by hand.",
        "Take a backup, a snapshot or an export right before the operation and note how to "
        "restore it. A manual step that goes wrong is then a restore, not a reconstruction.",
        "desktop",
        category="workflow-discipline",
    ),
]

# Pairs that contradict each other. `scoped`: both are right, each in its scope; otherwise
# `b` is wrong (a lesson a session drew from a bad outcome, or a lucky one).
CONTRADICTIONS: list[tuple[Lesson, Lesson, bool]] = [
    (
        _lesson(
            "c1a",
            "Mock the database in unit tests",
            "When writing fast unit tests for logic that reads or writes the database.",
            "Unit tests that talked to a real database were slow and failed on connection "
            "hiccups. In unit tests, replace the database with a fake or a mock so each test "
            "runs in milliseconds and checks only the logic.",
            "web-backend",
            polarity="failure",
            category="test-verification",
        ),
        _lesson(
            "c1b",
            "Never mock the database in integration tests",
            "When writing integration tests for code that runs real queries.",
            "Integration tests that mocked the database passed while the real queries failed "
            "on constraints. In integration tests, run against a real database instance so "
            "the schema, the constraints and the queries are exercised.",
            "web-backend",
            polarity="failure",
            category="test-verification",
        ),
        True,
    ),
    (
        _lesson(
            "c2a",
            "Pin exact dependency versions in applications",
            "When deploying an application whose builds must be reproducible.",
            "Pin every dependency of an application to an exact version through a lock "
            "file, so that a build next month installs exactly what was tested today.",
            "cli-tooling",
            category="environment-adaptation",
        ),
        _lesson(
            "c2b",
            "Do not pin exact dependency versions in libraries",
            "When publishing a library that other projects install next to their own dependencies.",
            "A library that pinned exact versions could not be installed beside anything "
            "else. In a library, declare the range of versions it works with and leave exact "
            "pins to the applications that use it.",
            "cli-tooling",
            polarity="failure",
            category="environment-adaptation",
        ),
        True,
    ),
    (
        _lesson(
            "c3a",
            "Retry idempotent requests automatically on timeout",
            "When a client calls a service that sometimes times out under load.",
            "Retry reads and other idempotent requests automatically, with backoff and a "
            "limit on attempts. A timeout on such a request is usually transient, and a "
            "retry costs nothing when the first attempt did get through.",
            "infra-cloud",
            category="interaction-protocol",
        ),
        _lesson(
            "c3b",
            "Never retry non-idempotent requests automatically",
            "When a client sends payments, orders or other requests with side effects.",
            "An automatic retry of a payment request that had in fact succeeded charged the "
            "customer twice. Never retry a request with side effects blindly: make it "
            "idempotent with a key first, or surface the timeout to the caller.",
            "infra-cloud",
            polarity="failure",
            category="interaction-protocol",
        ),
        True,
    ),
    (
        _lesson(
            "t1a",
            "Commit the lock file with every dependency change",
            "When adding, removing or upgrading a dependency of an application.",
            "Commit the updated lock file in the same change as the manifest, so every "
            "machine and the CI install the same dependency tree that was tested.",
            "frontend",
            category="environment-adaptation",
        ),
        _lesson(
            "t1b",
            "Do not commit the lock file to version control",
            "When a dependency change makes the lock file churn in reviews.",
            "Lock files only add noise to reviews and merge conflicts. Do not commit them: "
            "let every machine resolve the newest versions itself when it installs.",
            "frontend",
            polarity="failure",
            category="environment-adaptation",
        ),
        False,
    ),
    (
        _lesson(
            "t2a",
            "Find the cause of a flaky test before re-enabling it",
            "When a test fails now and then with no change to the code under test.",
            "A flaky test that was retried until green hid a real race in the code. "
            "Reproduce the flake in a loop, find the shared state or timing it depends on, "
            "and re-enable the test only once the cause is fixed.",
            "repo-bugfix",
            polarity="failure",
            category="test-verification",
        ),
        _lesson(
            "t2b",
            "Do not look for the cause of a flaky test, retry it until it passes",
            "When a test fails now and then with no change to the code under test.",
            "Chasing intermittent failures wastes days. Do not investigate a flaky test: "
            "mark it to retry until it passes and move on with the work.",
            "repo-bugfix",
            polarity="failure",
            category="test-verification",
        ),
        False,
    ),
    (
        _lesson(
            "t3a",
            "Check the exit status of every step in a deploy script",
            "When a script chains build, upload and restart steps for a deployment.",
            "A deploy script carried on after a failed upload and restarted the service on "
            "the old build. Stop at the first failing step by checking every exit status, "
            "and report which step failed.",
            "devops-shell",
            polarity="failure",
            category="interaction-protocol",
        ),
        _lesson(
            "t3b",
            "Do not check the exit status of steps in a deploy script",
            "When a script chains build, upload and restart steps for a deployment.",
            "Exit status checks make deploy scripts long and brittle. Do not check them: "
            "watch the output scroll by, which shows well enough whether the steps worked.",
            "devops-shell",
            polarity="failure",
            category="interaction-protocol",
        ),
        False,
    ),
]

# (old, new): the new lesson says the old one's flag or command changed. The old one
# arrives first in the year; the new one only later.
SUPERSESSIONS: list[tuple[Lesson, Lesson]] = [
    (
        _lesson(
            "s1a",
            "Install CI dependencies with `yarn install --frozen-lockfile`",
            "When a continuous-integration job installs the JavaScript dependencies.",
            "Run `yarn install --frozen-lockfile` in CI so the job fails when the lock file "
            "is out of date and leaves it untouched.",
            "frontend",
            category="environment-adaptation",
        ),
        _lesson(
            "s1b",
            "Use `yarn install --immutable` in CI instead of `--frozen-lockfile`",
            "When a continuous-integration job installs the JavaScript dependencies.",
            "In CI, install with `yarn install --immutable`: the `--frozen-lockfile` flag was "
            "deprecated and no longer stops the lock file from being rewritten.",
            "frontend",
            category="environment-adaptation",
        ),
    ),
    (
        _lesson(
            "s2a",
            "Skip dev dependencies with `npm install --production`",
            "When building a production image of a Node application.",
            "Install with `npm install --production` in the production image so test and "
            "build tools stay out of it and the image stays small.",
            "web-backend",
            category="environment-adaptation",
        ),
        _lesson(
            "s2b",
            "Use `npm install --omit=dev` rather than `--production`",
            "When building a production image of a Node application.",
            "The `--production` flag of `npm install` is deprecated: use `npm install "
            "--omit=dev` to keep test and build tools out of the production image.",
            "web-backend",
            category="environment-adaptation",
        ),
    ),
    (
        _lesson(
            "s3a",
            "Start the local stack with `docker-compose up`",
            "When a project's services run locally in containers.",
            "Bring the local services up with `docker-compose up -d` and check them with "
            "`docker-compose ps` before running the tests against them.",
            "devops-shell",
            category="environment-adaptation",
        ),
        _lesson(
            "s3b",
            "Use `docker compose` now that `docker-compose` was removed",
            "When a project's services run locally in containers.",
            "The standalone `docker-compose` command was removed: use the `docker compose` "
            "plugin instead, as in `docker compose up -d` and `docker compose ps`.",
            "devops-shell",
            category="environment-adaptation",
        ),
    ),
    (
        _lesson(
            "s4a",
            "Create topic branches with `git checkout -b`",
            "When starting work on a change that should live on its own branch.",
            "Create the branch with `git checkout -b` from an up-to-date main branch before "
            "the first edit, so unrelated work never mixes into the change.",
            "repo-bugfix",
            category="workflow-discipline",
        ),
        _lesson(
            "s4b",
            "Use `git switch -c` instead of `git checkout -b` for new branches",
            "When starting work on a change that should live on its own branch.",
            "Prefer `git switch -c` to create a branch: `git checkout -b` is replaced by the "
            "clearer `git switch`, which cannot also overwrite files by mistake.",
            "repo-bugfix",
            category="workflow-discipline",
        ),
    ),
    (
        _lesson(
            "s5a",
            "Run pytest with `--strict` to catch unknown markers",
            "When a test suite uses custom markers to select tests.",
            "Pass `--strict` to pytest so that a misspelt marker fails the run; without it "
            "the marker silently selects nothing.",
            "cli-tooling",
            category="test-verification",
        ),
        _lesson(
            "s5b",
            "Use `--strict-markers` now that pytest's `--strict` is deprecated",
            "When a test suite uses custom markers to select tests.",
            "The `--strict` option of pytest is deprecated: pass `--strict-markers` instead, "
            "so a misspelt marker still fails the run.",
            "cli-tooling",
            category="test-verification",
        ),
    ),
]

# Planted misleading lessons, taken from the shipped planted set (mtl_mcp/data/eval).
MISLEADING = ["x01", "x02", "x04", "x08", "x13", "x17"]

# The projects of the year: (name, domain). Sessions of a project mostly teach lessons of
# its domain.
PROJECTS: list[tuple[str, str]] = [
    ("orders-api", "web-backend"),
    ("churn-model", "data-science"),
    ("fleet-scripts", "devops-shell"),
    ("shop-web", "frontend"),
    ("vision-train", "ml-training"),
    ("judge-solutions", "competitive-programming"),
    ("legacy-crm", "repo-bugfix"),
    ("ledger-db", "databases"),
    ("field-app", "mobile"),
    ("cloud-infra", "infra-cloud"),
    ("auth-gateway", "security"),
    ("sensor-fw", "embedded"),
    ("dev-cli", "cli-tooling"),
    ("notes-desktop", "desktop"),
    ("puzzle-game", "game-dev"),
]

# Project facts that slip past the lint: true of one project, useless anywhere else. Each
# template is filled with the project's own values.
FACT_TEMPLATES: list[tuple[str, str, str]] = [
    (
        "Run the {suite} checks with `make {target}` before pushing",
        "When changing code in the {area} part of the codebase.",
        "The {area} code is checked by `make {target}`; the plain test command skips the "
        "{suite} checks, so changes that pass it can still fail review.",
    ),
    (
        "The local {store} listens on port {port}",
        "When the {area} code cannot reach its {store} during development.",
        "Point the development settings at port {port}: the local {store} is started on "
        "that port by the setup script, not on its usual one.",
    ),
    (
        "Deploys of {area} go through the {env} environment first",
        "When shipping a change to the {area} component.",
        "Every {area} release is promoted from {env} after a manual sign-off from "
        "{person}; shipping straight to production is blocked.",
    ),
    (
        "Format {area} code with {formatter}",
        "When editing files of the {area} component.",
        "The {area} component is formatted with {formatter} and a line length of {width}; "
        "other formatters produce diffs the review bot rejects.",
    ),
    (
        "Ask {person} before changing the {area} schema",
        "When a change needs a new column or table in the {area} data.",
        "{person} owns the {area} schema and reviews every change to it; migrations "
        "without that review are reverted.",
    ),
    (
        "The {area} build needs the {toolchain} toolchain",
        "When the {area} build fails on a fresh machine.",
        "Install {toolchain} and source its environment script before building {area}; "
        "the system compiler builds it but the binaries crash at start.",
    ),
]

# What fills the fact templates, per project (the same order as PROJECTS).
FACT_VALUES: list[dict[str, str]] = [
    {
        "suite": "contract",
        "target": "verify-api",
        "area": "checkout",
        "store": "Redis",
        "port": "6380",
        "env": "blue",
        "person": "Marta",
        "formatter": "black",
        "width": "88",
        "toolchain": "pyenv",
    },
    {
        "suite": "notebook",
        "target": "nb-check",
        "area": "feature pipeline",
        "store": "warehouse",
        "port": "5439",
        "env": "sandbox",
        "person": "Ravi",
        "formatter": "ruff",
        "width": "100",
        "toolchain": "conda",
    },
    {
        "suite": "shellcheck",
        "target": "lint-sh",
        "area": "provisioning",
        "store": "Consul",
        "port": "8501",
        "env": "canary",
        "person": "Olga",
        "formatter": "shfmt",
        "width": "80",
        "toolchain": "bats",
    },
    {
        "suite": "visual",
        "target": "snap-test",
        "area": "storefront",
        "store": "mock API",
        "port": "3901",
        "env": "preview",
        "person": "Jonas",
        "formatter": "prettier",
        "width": "100",
        "toolchain": "pnpm",
    },
    {
        "suite": "smoke-train",
        "target": "train-smoke",
        "area": "detector",
        "store": "MLflow",
        "port": "5050",
        "env": "staging-gpu",
        "person": "Aiko",
        "formatter": "black",
        "width": "120",
        "toolchain": "CUDA",
    },
    {
        "suite": "sample",
        "target": "judge-local",
        "area": "solutions",
        "store": "judge",
        "port": "7070",
        "env": "practice",
        "person": "Lev",
        "formatter": "astyle",
        "width": "90",
        "toolchain": "gcc-trunk",
    },
    {
        "suite": "regression",
        "target": "crm-reg",
        "area": "contacts",
        "store": "Oracle",
        "port": "1522",
        "env": "uat",
        "person": "Bea",
        "formatter": "google-java-format",
        "width": "100",
        "toolchain": "JDK",
    },
    {
        "suite": "migration",
        "target": "db-verify",
        "area": "ledger",
        "store": "PostgreSQL",
        "port": "5433",
        "env": "replica",
        "person": "Tomas",
        "formatter": "sqlfluff",
        "width": "80",
        "toolchain": "pgTAP",
    },
    {
        "suite": "UI",
        "target": "app-ui",
        "area": "field app",
        "store": "emulator",
        "port": "5556",
        "env": "beta",
        "person": "Nadia",
        "formatter": "ktlint",
        "width": "110",
        "toolchain": "NDK",
    },
    {
        "suite": "policy",
        "target": "tf-policy",
        "area": "network",
        "store": "state backend",
        "port": "9200",
        "env": "dev-account",
        "person": "Sven",
        "formatter": "terraform fmt",
        "width": "80",
        "toolchain": "tfenv",
    },
    {
        "suite": "fuzz",
        "target": "auth-fuzz",
        "area": "token service",
        "store": "Vault",
        "port": "8201",
        "env": "pentest",
        "person": "Ines",
        "formatter": "gofmt",
        "width": "100",
        "toolchain": "Go",
    },
    {
        "suite": "hardware-in-the-loop",
        "target": "hil",
        "area": "sensor board",
        "store": "serial bridge",
        "port": "4444",
        "env": "bench rig",
        "person": "Kofi",
        "formatter": "uncrustify",
        "width": "100",
        "toolchain": "arm-none-eabi",
    },
    {
        "suite": "golden",
        "target": "golden-cli",
        "area": "command parser",
        "store": "fixture server",
        "port": "8089",
        "env": "nightly",
        "person": "Elif",
        "formatter": "rustfmt",
        "width": "100",
        "toolchain": "nightly Rust",
    },
    {
        "suite": "screenshot",
        "target": "ui-shots",
        "area": "editor",
        "store": "sync server",
        "port": "8765",
        "env": "insider",
        "person": "Pavel",
        "formatter": "clang-format",
        "width": "120",
        "toolchain": "Qt",
    },
    {
        "suite": "replay",
        "target": "replay-check",
        "area": "level loader",
        "store": "asset server",
        "port": "7777",
        "env": "playtest",
        "person": "Yuki",
        "formatter": "csharpier",
        "width": "120",
        "toolchain": "Unity",
    },
]

# How a session's plan is written from the situation it met (a lesson's description).
PLAN_TEMPLATES: list[str] = [
    "The task: {situation} First I will read the code involved and reproduce the problem, "
    "then make the smallest change that addresses it, and finally run the existing checks.",
    "{situation} I plan to inspect how the current code handles this, change it in small "
    "steps, and verify each step with the tests before moving on.",
    "Goal: handle the case where {situation_lower} I will look at the relevant module, write "
    "a check that shows the problem, fix it, and rerun the suite.",
    "We are in this situation: {situation_lower} My plan is to gather the facts first, "
    "decide on one approach, implement it, and confirm the result with a test.",
]

# Words and phrases the paraphraser may swap (whole words, case kept for the first letter).
SYNONYMS: dict[str, list[str]] = {
    "before": ["ahead of", "prior to"],
    "after": ["once", "following"],
    "because": ["since", "as"],
    "so that": ["so", "in order that"],
    "make sure": ["ensure", "check"],
    "instead of": ["rather than", "in place of"],
    "every": ["each", "any"],
    "change": ["edit", "modification"],
    "changes": ["edits", "modifications"],
    "run": ["execute", "launch"],
    "runs": ["executes", "launches"],
    "fix": ["repair", "correction"],
    "bug": ["defect", "fault"],
    "bugs": ["defects", "faults"],
    "check": ["verify", "confirm"],
    "checks": ["verifications", "tests"],
    "test": ["check", "test case"],
    "tests": ["checks", "test cases"],
    "failure": ["failing case", "breakage"],
    "fails": ["breaks", "goes wrong"],
    "failed": ["broke", "went wrong"],
    "use": ["rely on", "employ"],
    "write": ["create", "add"],
    "read": ["go through", "look at"],
    "find": ["locate", "track down"],
    "keep": ["retain", "hold"],
    "first": ["initially", "at the start"],
    "small": ["little", "minor"],
    "large": ["big", "sizeable"],
    "slow": ["sluggish", "lengthy"],
    "fast": ["quick", "rapid"],
    "wrong": ["incorrect", "mistaken"],
    "right": ["correct", "proper"],
    "problem": ["issue", "trouble"],
    "error": ["fault", "failure message"],
    "errors": ["faults", "failures"],
    "code": ["source", "program code"],
    "data": ["records", "dataset"],
    "output": ["result", "printed output"],
    "input": ["incoming data", "given input"],
    "value": ["number", "quantity"],
    "values": ["numbers", "quantities"],
    "hidden": ["masked", "concealed"],
    "later": ["afterwards", "down the line"],
    "often": ["frequently", "regularly"],
    "usually": ["typically", "generally"],
    "only": ["just", "solely"],
    "real": ["actual", "genuine"],
    "exactly": ["precisely", "strictly"],
    "quickly": ["rapidly", "swiftly"],
    "shows": ["reveals", "demonstrates"],
    "show": ["reveal", "demonstrate"],
    "prevents": ["stops", "avoids"],
    "cheap": ["inexpensive", "low-cost"],
    "expensive": ["costly", "pricey"],
    "safe": ["secure", "harmless"],
    "clear": ["plain", "obvious"],
    "whole": ["entire", "complete"],
    "several": ["multiple", "a few"],
    "many": ["numerous", "lots of"],
    "start": ["begin", "kick off"],
    "stop": ["halt", "end"],
    "works": ["functions", "holds up"],
    "worked": ["functioned", "held up"],
    "user": ["person", "customer"],
    "users": ["people", "customers"],
    "machine": ["host", "computer"],
    "machines": ["hosts", "computers"],
    "new": ["fresh", "newly added"],
    "old": ["previous", "earlier"],
    "same": ["identical", "very same"],
    "file": ["document", "file on disk"],
    "files": ["documents", "files on disk"],
    "step": ["stage", "phase"],
    "steps": ["stages", "phases"],
    "result": ["outcome", "end result"],
    "results": ["outcomes", "findings"],
    "cause": ["root cause", "source"],
    "instead": ["rather", "in its place"],
    "first time": ["initial attempt", "first run"],
    "build": ["compile", "build step"],
    "version": ["release", "revision"],
    "versions": ["releases", "revisions"],
    "request": ["call", "incoming request"],
    "requests": ["calls", "incoming requests"],
    "query": ["statement", "lookup"],
    "queries": ["statements", "lookups"],
    "command": ["instruction", "shell command"],
    "commands": ["instructions", "shell commands"],
    "script": ["program", "helper script"],
    "scripts": ["programs", "helper scripts"],
    "service": ["server", "backend service"],
    "job": ["task", "batch job"],
    "environment": ["setup", "surroundings"],
    "dependency": ["package", "library"],
    "dependencies": ["packages", "libraries"],
    "production": ["live system", "prod"],
    "behaviour": ["conduct", "functioning"],
    "suite": ["test set", "collection"],
    "model": ["network", "trained model"],
    "device": ["handset", "unit"],
    "page": ["screen", "view"],
    "state": ["status", "condition"],
    "missing": ["absent", "lacking"],
    "explicit": ["spelled out", "stated"],
    "explicitly": ["openly", "by name"],
    "silently": ["quietly", "without warning"],
    "repeat": ["redo", "do again"],
    "hours": ["a long time", "an afternoon"],
    "minutes": ["a short while", "moments"],
}

DESCRIPTION_FRAMES: list[str] = [
    "{text}",
    "Applies {text_lower}",
    "Useful {text_lower}",
    "Relevant {text_lower}",
    "This matters {text_lower}",
]

TITLE_FRAMES: list[str] = ["{text}", "Always {text_lower}", "Remember to {text_lower}"]

CONTENT_OPENERS: list[str] = [
    "",
    "In short: ",
    "Lesson learned: ",
    "Rule of thumb: ",
    "What helped: ",
    "Worth remembering: ",
]

CONTENT_CLOSERS: list[str] = [
    "",
    " It saves time later.",
    " This pays off every time.",
    " Skipping it cost hours.",
    " It is cheap insurance.",
]

# A sentence another session adds about where it met the lesson.
CONTEXT_SENTENCES: list[str] = [
    "This came up during a rushed release.",
    "It surfaced while pairing on a late-night fix.",
    "The session lost an hour before noticing it.",
    "It was the second time the same thing happened this month.",
    "A reviewer pointed it out on the first try.",
    "The same pattern showed up in an unrelated module.",
    "It looked harmless until the next deploy.",
    "Nobody noticed until a customer reported it.",
    "Doing it this way also made the review shorter.",
    "The fix itself took minutes once this was done.",
    "It held up again on the next task of the same kind.",
    "Writing it down saved the next session from repeating it.",
]

# Verbs an imperative sentence starts with: what a title made from a lesson's rule opens with.
IMPERATIVES_WORDS = (
    "use run keep write check read make pass set store give put add avoid never do don't test "
    "find measure split seed tag reset open build render type scope list load pin name query "
    "poll follow ship order validate decode fail verify flash carry declare parse instrument "
    "bind replace install prefer reproduce rehearse refresh count release enable diff handle "
    "design resolve own review bisect trace trust switch reduce record remove guard drop "
    "estimate catch capture accept search bump look choose treat assert rerun close turn "
    "expect slice lint suspect overfit checkpoint ablate hunt compare let size try clean wait "
    "mark describe include apply confirm return move show start stream state name skip "
    "delete take version migrate bring create prefer"
)
IMPERATIVES = frozenset(IMPERATIVES_WORDS.split())
