#!/usr/bin/env bash
# make demo: placeholder until the pipeline lands.
set -euo pipefail
echo "demo: $1"
