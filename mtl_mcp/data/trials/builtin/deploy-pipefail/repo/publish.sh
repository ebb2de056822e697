#!/usr/bin/env bash
echo "published" > published.txt
echo "published release"
