#!/usr/bin/env bash
# backup.sh SRC DEST: copy every *.conf file under SRC into DEST, keeping the folder
# layout, then print "backed up N files". Exits non-zero, with a message on stderr, when
# SRC is not a folder.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: backup.sh SRC DEST" >&2
  exit 2
fi
SRC=$1
DEST=$2
if [ ! -d "$SRC" ]; then
  echo "backup.sh: $SRC is not a folder" >&2
  exit 1
fi
count=0
# -print0 and read -d '': file names may hold spaces, even newlines
while IFS= read -r -d '' f; do
  mkdir -p "$DEST/$(dirname "$f")"
  cp "$SRC/$f" "$DEST/$f"
  count=$((count + 1))
done < <(cd "$SRC" && find . -name '*.conf' -print0)
echo "backed up $count files"
