#!/usr/bin/env bash
# rotate_logs.sh: gzip every *.log file in the logs/ folder next to this script, or in
# $LOG_DIR when that is set. Meant for cron:  0 3 * * *  /opt/app/rotate_logs.sh
# Exits non-zero, touching nothing, when the log folder does not exist.
set -euo pipefail
shopt -s nullglob  # no logs today: the loop runs zero times, not once on "*.log"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log_dir=${LOG_DIR:-$here/logs}
cd "$log_dir" || exit 1
for f in *.log; do
  gzip -- "$f"
done
echo "rotated logs in $(pwd)"
