#!/usr/bin/env bash
# Installs the CUDA 13.0 compiler toolchain (nvcc and the headers and static runtime it needs) from
# the PyPI wheels into a virtual environment, then prints the environment that builds the `cuda`
# feature of the `kernels` crate:
#
#     eval "$(scripts/cuda-env.sh)"
#     cargo build -p kernels --features cuda --release
#
# The venv defaults to `.cuda-venv` in the repository root; set CUDA_VENV to put it elsewhere.
# Running the script again reuses an installed venv (idempotent). Progress goes to stderr, only the
# `export` lines go to stdout.
#
# Versions are pinned to CUDA 13.0: GPUs on driver 580 run CUDA 13.0 and cannot load PTX from a
# newer toolkit. Only the CUDA 13 wheels ship `nvcc` (the 12.x wheels ship only `ptxas`).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${CUDA_VENV:-$repo_root/.cuda-venv}"
python="${PYTHON:-python3}"

# name==version, one per wheel; keep every entry on CUDA 13.0.
pins=(
    nvidia-cuda-nvcc==13.0.88
    nvidia-cuda-crt==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cuda-runtime==13.0.88
    nvidia-cuda-cccl==13.0.85
)
stamp="$venv/.cuda-env-pins"
wanted="$(printf '%s\n' "${pins[@]}")"

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]]; then
    echo "cuda-env: reusing $venv" >&2
else
    echo "cuda-env: installing the CUDA 13.0 wheels into $venv" >&2
    "$python" -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2
    printf '%s\n' "$wanted" >"$stamp"
fi

cuda_root="$("$venv/bin/python" - <<'PY'
import pathlib, sys
hits = sorted(pathlib.Path(sys.prefix).glob("lib/python3*/site-packages/nvidia/cu13"))
print(hits[0] if hits else "")
PY
)"
if [[ -z "$cuda_root" || ! -x "$cuda_root/bin/nvcc" ]]; then
    echo "cuda-env: error: no \`nvcc\` under $venv (nvidia/cu13/bin)" >&2
    echo "hint: remove $venv and run this script again" >&2
    exit 1
fi
if [[ ! -e "$cuda_root/lib/libcudart_static.a" ]]; then
    echo "cuda-env: error: no \`libcudart_static.a\` in $cuda_root/lib" >&2
    exit 1
fi

echo "cuda-env: $("$cuda_root/bin/nvcc" --version | tail -n 2 | head -n 1)" >&2

# sppark builds no Hopper code (sm_75, sm_80 + compute_80 PTX, compute_100, sm_120): add native
# sm_90 for the H100/H200. `-dopt=on`: our profiles keep debug info, so cargo tells build scripts
# DEBUG=true and the cc crate passes nvcc `-G` (unoptimized device code, many times slower);
# `-dopt=on` keeps device code optimized with line info only.
cat <<ENV
export PATH="$cuda_root/bin:\${PATH}"
export CUDA_PATH="$cuda_root"
export LIBRARY_PATH="$cuda_root/lib\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
export NVCC_APPEND_FLAGS="-gencode arch=compute_90,code=sm_90 -dopt=on"
ENV
