#!/usr/bin/env bash
# Installs what building and testing trainkit needs on Debian 12: the C libraries and test tools
# from Debian, and the Python test oracles from PyPI (mlperf-logging, pycocotools,
# faster-coco-eval, nvidia-nvjpeg (optional, with CUDA: the GPU JPEG decoder's header), safetensors, numpy, torch, torchvision, pillow, h5py, transformers, nibabel, sentencepiece, soundfile). The oracles are used by tests and contrib/ only;
# no trainkit binary needs Python.
# Run it as it is, as root or as a user: it raises its privileges itself, with sudo, only for
# apt-get and only when a Debian package is missing (a root shell needs no sudo installed; a user
# without sudo gets exit 4 and the list of what is missing). The Python packages go to the
# caller's site (a user's ~/.local).
# Set TK_SKIP_PY=1 to skip the Python packages (their tests then skip with a message).
set -eu
# libjpeg62-turbo-dev and libpng-dev: the ImageNet tools (linked statically); libjpeg-turbo-progs:
# cjpeg/djpeg/jpegtran for looking at JPEG test data. libhdf5-dev (found with pkg-config): prep
# bert-hdf5 (without it prep builds and that command exits 2).
# Optional, for LibriSpeech (RNN-T): libflac-dev (found with pkg-config, linked statically: prep
# librispeech's FLAC decoder; without it prep builds and the command exits 2 naming it), flac,
# sentencepiece (the spm_train/spm_encode tools prep runs), espeak-ng and sox (prep synth
# librispeech). Nothing else needs them; their tests skip without them.
pkgs="build-essential libzstd-dev libjansson-dev zlib1g-dev bats jq zstd python3-pip man-db gnuplot-nox
      libjpeg62-turbo-dev libpng-dev libjpeg-turbo-progs libhdf5-dev pkg-config
      libflac-dev flac sentencepiece espeak-ng sox"
missing=
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    as_root=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || {
            echo "setup-deps.sh: error: the Debian packages$missing are missing, and installing them needs root:" \
                "run this as root, or as a user with sudo" >&2
            exit 4
        }
        as_root=(sudo)
    fi
    # (sudo resets the environment: the variable goes through env)
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
if [ "${TK_SKIP_PY:-0}" != 1 ]; then
    py=python3
    need=
    for m in pycocotools:pycocotools faster_coco_eval:faster-coco-eval \
             safetensors:safetensors numpy:numpy torch:torch torchvision:torchvision PIL:pillow \
             h5py:h5py transformers:transformers nibabel:nibabel sentencepiece:sentencepiece \
             soundfile:soundfile; do
        $py -c "import ${m%%:*}" 2>/dev/null || need="$need ${m#*:}"
    done
    # log-check's rules (share/compliance) and expectations (tests/data/logcheck-newer) were made
    # with this version of MLCommons' tools; its tests compare against it
    [ "$($py -c 'import importlib.metadata as m; print(m.version("mlperf-logging"))' 2>/dev/null)" = 4.1.68 ] ||
        need="$need mlperf-logging==4.1.68"
    # Optional: nvJPEG's header and library (the GPU JPEG decoder, lib/image/nvjpeg.c), for the
    # CUDA 13 toolkit; where pip cannot get it the build goes on without the GPU decoder
    if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
        $py -c 'import nvidia, os, sys; sys.exit(not any(os.path.exists(os.path.join(p, "cu13/include/nvjpeg.h")) for p in nvidia.__path__))' 2>/dev/null ||
            $py -m pip install -q 'nvidia-nvjpeg==13.0.*' 2>/dev/null || $py -m pip install -q --break-system-packages 'nvidia-nvjpeg==13.0.*' ||
            echo "setup-deps.sh: note: nvidia-nvjpeg not installed: building without the GPU JPEG decoder" >&2
    fi
    if [ -n "$need" ]; then
        # Debian's own python3 refuses pip installs outside a venv (PEP 668): allow it explicitly.
        $py -m pip install -q $need 2>/dev/null || $py -m pip install -q --break-system-packages $need
    fi
fi
