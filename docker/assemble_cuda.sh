#!/usr/bin/env bash
# Puts NVIDIA's CUDA wheels (docker/cuda-wheels.txt) together into a toolkit folder with the
# layout `bazel build --config=cuda` reads (patches/cuda.BUILD): bin/nvcc, include/, lib/ with
# cuBLAS, cuDNN and NCCL beside the CUDA libraries, nvvm/, unversioned lib*.so links,
# lib64 -> lib and targets/x86_64-linux/{include,lib}.
#
#   docker/assemble_cuda.sh WHEEL_DIR PREFIX      e.g. /tmp/wheels /usr/local/cuda-13.0
#
# Every wheel's nvidia/cu13/, nvidia/cudnn/ and nvidia/nccl/ members go to PREFIX (executable
# bits kept); a member that two wheels both hold with different bytes is an error.
set -euo pipefail
(($# == 2)) || { echo "usage: assemble_cuda.sh WHEEL_DIR PREFIX" >&2; exit 2; }
wheels=$1 prefix=$2
shopt -s nullglob
files=("$wheels"/nvidia_*.whl)
((${#files[@]})) || { echo "assemble_cuda.sh: no nvidia_*.whl in $wheels" >&2; exit 1; }
mkdir -p "$prefix"
python3 - "$prefix" "${files[@]}" << 'EOF_PY'
import os, re, sys, zipfile
prefix, wheels = sys.argv[1], sys.argv[2:]
member = re.compile(r"^nvidia/(cu13|cudnn|nccl)/(?!\.metadata/)(.+[^/])$")
for wheel in wheels:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            m = member.match(info.filename)
            if not m:
                continue
            dest = os.path.join(prefix, m.group(2))
            data = z.read(info)
            if os.path.exists(dest):
                with open(dest, "rb") as f:
                    if f.read() != data:
                        sys.exit(f"assemble_cuda.sh: {m.group(2)} differs between wheels ({wheel})")
                continue
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(dest, 0o755 if mode & 0o111 or "/bin/" in "/" + m.group(2) else 0o644)
EOF_PY
# Unversioned names for linkers (libcudnn.so -> libcudnn.so.9), as a toolkit install has them.
for lib in "$prefix"/lib/lib*.so.*; do
  base=${lib%%.so.*}.so
  [[ -e "$base" ]] || ln -s "$(basename "$lib")" "$base"
done
[[ -e "$prefix/lib64" ]] || ln -s lib "$prefix/lib64"
mkdir -p "$prefix/targets/x86_64-linux"
[[ -e "$prefix/targets/x86_64-linux/include" ]] || ln -s ../../include "$prefix/targets/x86_64-linux/include"
[[ -e "$prefix/targets/x86_64-linux/lib" ]] || ln -s ../../lib "$prefix/targets/x86_64-linux/lib"
echo "assemble_cuda.sh: ${#files[@]} wheels into $prefix"
