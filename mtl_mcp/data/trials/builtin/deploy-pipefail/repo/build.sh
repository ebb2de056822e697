#!/usr/bin/env bash
echo "compiling 3 modules"
echo "build finished"
