#!/bin/sh
# A scripted agent that is a real process speaking Claude Code's command line (--version,
# `auth status`, `-p PROMPT --output-format stream-json`): the trial harness runs it as it
# runs `claude`. It finds its task by the prompt, writes the task's reference or tempting
# files into its working directory, and prints its usage as Claude Code's stream-json does.
# POSIX sh, so that a session costs the harness milliseconds, not an interpreter's start.
#
# STUB_POLICY:  blind     passes with the task's own probability, whatever the arm
#               favoured  passes almost always when a memory is attached (MTL_MCP_HOME is
#                         set), almost never otherwise: the false-positive test's control
#               sleep     starts a child that sleeps STUB_SLEEP seconds, and waits for it
#               fail      reports an API error (a client that cannot run)
# STUB_LOGGED_OUT=1 makes `auth status` say it is not logged in. STUB_SEED and STUB_STATE
# (a folder) make the noise reproducible: session n of a trial draws from "$seed-$n".
set -eu
if [ "$*" = "--version" ]; then echo "9.9.9 (stub agent)"; exit 0; fi
if [ "${1:-}" = "auth" ]; then
    if [ -n "${STUB_LOGGED_OUT:-}" ]; then echo '{"loggedIn": false}'; exit 1; fi
    echo '{"loggedIn": true, "apiProvider": "firstParty"}'; exit 0
fi
prompt=""
while [ $# -gt 0 ]; do
    if [ "$1" = "-p" ]; then prompt=$2; shift; fi
    shift
done
mkdir -p "$STUB_STATE"
count=$(cat "$STUB_STATE/sessions" 2>/dev/null || echo 0)
echo $((count + 1)) > "$STUB_STATE/sessions"
session="stub-$count"
echo "{\"type\": \"system\", \"subtype\": \"init\", \"session_id\": \"$session\"}"
result() {  # usage in, error message (empty: success)
    if [ -n "$2" ]; then error=true; text=$2; else error=false; text=Done.; fi
    printf '{"type": "result", "is_error": %s, "result": "%s", "num_turns": 2, ' "$error" "$text"
    printf '"session_id": "%s", "usage": {"input_tokens": %s, "output_tokens": 200}}\n' "$session" "$1"
}
policy=${STUB_POLICY:-blind}
if [ "$policy" = fail ]; then result 50 "API Error: 401 invalid x-api-key"; exit 1; fi
if [ "$policy" = sleep ]; then
    sleep "${STUB_SLEEP:-30}" &
    echo $! > "$STUB_STATE/child-$count"
    wait
fi
toml=$(grep -lF "prompt = \"$prompt\"" "$STUB_SUITE"/*/task.toml | head -n 1)
task=$(dirname "$toml")
number() { printf '%s' "$1" | cksum | cut -d ' ' -f 1; }
seed=${STUB_SEED:-0}
easiness=$(( $(number "$seed-$(basename "$task")") % 600 + 200 ))  # 0.2 to 0.8, per task
if [ "$policy" = favoured ]; then
    if [ -n "${MTL_MCP_HOME:-}" ]; then easiness=970; else easiness=30; fi
fi
if [ $(( $(number "$seed-$count") % 1000 )) -lt "$easiness" ]; then overlay=reference; else overlay=tempting; fi
cp -R "$task/$overlay/." .
echo '{"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Write"}]}}'
result $((1000 + 10 * ${#prompt})) ""
