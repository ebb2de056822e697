#!/usr/bin/env bash
# package.sh VERSION: stage app/ in a temp folder and write release-VERSION.tar.gz here.
# It leaves nothing behind in $TMPDIR, whether it succeeds or fails, and a failure exits
# non-zero.
set -euo pipefail
version=${1:?usage: package.sh VERSION}
stage=$(mktemp -d)
cp -R app "$stage/app-$version"
cp RELEASE_NOTES.md "$stage/app-$version/"
tar -czf "release-$version.tar.gz" -C "$stage" "app-$version"
echo "wrote release-$version.tar.gz"
