#!/usr/bin/env bash
# rotate_logs.sh: gzip every *.log file in the logs/ folder next to this script.
# Meant for cron:  0 3 * * *  /opt/app/rotate_logs.sh
# No logs to rotate is fine; a missing logs/ folder is an error (exit non-zero, touch nothing).
cd "$(dirname "$0")/logs"
for f in *.log; do
  gzip "$f"
done
echo "rotated logs in $(pwd)"
