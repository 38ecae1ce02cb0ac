#!/bin/sh
echo "coverage is unavailable: this offline Bazel 4.2 workspace has no coverage tools" >&2
exit 1
