#!/usr/bin/env bash
# Installs what building and testing trainkit needs on Debian 12 (run as root or with sudo):
# the C libraries and test tools from Debian, and the Python test oracles from PyPI
# (mlperf-logging, pycocotools, faster-coco-eval, safetensors, numpy, torch, transformers). The oracles are
# used by tests and contrib/ only; no trainkit binary needs Python.
# Set TK_SKIP_PY=1 to skip the Python packages (their tests then skip with a message).
set -eu
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
pkgs="build-essential libzstd-dev libjansson-dev zlib1g-dev bats jq zstd python3-pip man-db gnuplot-nox"
missing=
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
if [ "${TK_SKIP_PY:-0}" != 1 ]; then
    py=python3
    need=
    for m in mlperf_logging:mlperf-logging pycocotools:pycocotools faster_coco_eval:faster-coco-eval \
             safetensors:safetensors numpy:numpy torch:torch transformers:transformers; do
        $py -c "import ${m%%:*}" 2>/dev/null || need="$need ${m#*:}"
    done
    if [ -n "$need" ]; then
        # Debian's own python3 refuses pip installs outside a venv (PEP 668): allow it explicitly.
        $py -m pip install -q $need 2>/dev/null || $py -m pip install -q --break-system-packages $need
    fi
fi
