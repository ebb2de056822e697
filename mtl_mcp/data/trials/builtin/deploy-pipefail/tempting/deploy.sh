#!/usr/bin/env bash
# deploy.sh: build (its output on the console and in build.log), then publish.
# A failed build stops the deploy, and deploy.sh exits with the build's status.
set -e
./build.sh > build.log 2>&1 || exit 1
echo "build ok, publishing"
./publish.sh
