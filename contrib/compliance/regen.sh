#!/bin/sh
# Regenerates share/compliance from the installed mlperf-logging package (the version pinned in
# contrib/setup-deps.sh): the rules of every training ruleset, their benchmark facts and the RCPs.
#   contrib/compliance/regen.sh [OUT_DIR]     (default: share/compliance)
# `git diff --stat share/compliance` afterwards shows what a new package version changed.
set -eu
cd "$(dirname "$0")/../.."
OUT=${1:-share/compliance}
PKG=$(python3 -c 'import mlperf_logging, os; print(os.path.dirname(mlperf_logging.__file__))')
NEW="2.0.0 2.1.0 3.0.0 3.1.0 4.0.0 4.1.0 5.0.0 5.1.0 6.0.0 6.1.0"
python3 contrib/compliance/yaml2json.py "$PKG/compliance_checker" "$OUT" 1.0.0 1.1.0 $NEW >/dev/null
python3 contrib/compliance/meta2json.py "$PKG" "$OUT" 1.0.0 1.1.0 $NEW >/dev/null
