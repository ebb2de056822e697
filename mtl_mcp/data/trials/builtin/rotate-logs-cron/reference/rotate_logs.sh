#!/usr/bin/env bash
# rotate_logs.sh: gzip every *.log file in the logs/ folder next to this script.
# Meant for cron:  0 3 * * *  /opt/app/rotate_logs.sh
# No logs to rotate is fine; a missing logs/ folder is an error (exit non-zero, touch nothing).
set -euo pipefail
shopt -s nullglob  # no logs today: the loop runs zero times, not once on "*.log"
# cron starts us in $HOME: find logs/ from where the script is, not from where it runs
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/logs"
for f in *.log; do
  gzip -- "$f"
done
echo "rotated logs in $(pwd)"
