#!/usr/bin/env bash
# deploy.sh: build (its output on the console and in build.log), then publish.
# A failed build stops the deploy, and deploy.sh exits with the build's status.
set -eo pipefail  # pipefail: a pipeline fails when the build fails, not only when tee does
./build.sh 2>&1 | tee build.log
echo "build ok, publishing"
./publish.sh
