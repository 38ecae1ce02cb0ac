#!/usr/bin/env bash
# Proves that docker/assemble_cuda.sh lays NVIDIA's wheels out as patches/cuda.BUILD reads them
# (members of nvidia/cu13, nvidia/cudnn and nvidia/nccl merged into one prefix with their bytes
# and executable bits, .metadata/ and other members left out, unversioned lib*.so links,
# lib64 -> lib, targets/x86_64-linux/{include,lib}), that a re-run changes nothing, that two
# wheels disagreeing on a file stop it, and that the container's pins agree with setup.sh's.
# The wheels are small zip files made here.
set -uo pipefail

ASSEMBLE=$(pwd)/docker/assemble_cuda.sh
TMP=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}
check() {  # check <name> <command...>: passes when the command succeeds
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else fail "$name"; fi
}

# wheel <file> <member>=<content>[:<mode>] ...
wheel() {
  python3 - "$@" << 'EOF_PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for spec in sys.argv[2:]:
        name, _, rest = spec.partition("=")
        content, _, mode = rest.partition(":")
        info = zipfile.ZipInfo(name)
        info.external_attr = int(mode or "644", 8) << 16
        z.writestr(info, content)
EOF_PY
}

wheels=$TMP/wheels prefix=$TMP/cuda
mkdir -p "$wheels"
wheel "$wheels/nvidia_cuda_nvcc-1-py3-none-any.whl" \
  "nvidia/cu13/bin/nvcc=nvcc-bytes:755" "nvidia/cu13/nvvm/bin/cicc=cicc-bytes:644" \
  "nvidia/cu13/include/cuda.h=cuda-h" "nvidia/cu13/.metadata/provenance.txt=meta" \
  "nvidia_cuda_nvcc-1.dist-info/METADATA=metadata"
wheel "$wheels/nvidia_cublas-1-py3-none-any.whl" \
  "nvidia/cu13/lib/libcublas.so.13=cublas-bytes" "nvidia/cu13/include/cuda.h=cuda-h"
wheel "$wheels/nvidia_cudnn_cu13-1-py3-none-any.whl" "nvidia/cudnn/lib/libcudnn.so.9=cudnn-bytes" \
  "nvidia/cudnn/lib/libcudnn_adv.so.9=adv-bytes" "nvidia/cudnn/include/cudnn.h=cudnn-h"
wheel "$wheels/nvidia_nccl_cu13-1-py3-none-any.whl" "nvidia/nccl/lib/libnccl.so.2=nccl-bytes" \
  "nvidia/nccl/include/nccl.h=nccl-h"

out=$("$ASSEMBLE" "$wheels" "$prefix" 2>&1) || fail "assemble: exit $?: $out"
has() { [[ "$(cat "$prefix/$1" 2> /dev/null)" == "$2" ]] || { echo "  $1 is not '$2'"; return 1; }; }
check "every member's bytes in place" eval 'has bin/nvcc nvcc-bytes && has nvvm/bin/cicc cicc-bytes &&
  has include/cuda.h cuda-h && has lib/libcublas.so.13 cublas-bytes && has lib/libcudnn.so.9 cudnn-bytes &&
  has lib/libcudnn_adv.so.9 adv-bytes && has include/cudnn.h cudnn-h && has lib/libnccl.so.2 nccl-bytes &&
  has include/nccl.h nccl-h'
check "nvcc and nvvm/bin executable, libraries not" eval '[[ -x $prefix/bin/nvcc && -x $prefix/nvvm/bin/cicc && ! -x $prefix/lib/libnccl.so.2 ]]'
check ".metadata and non-nvidia members left out" eval '[[ ! -e $prefix/.metadata && -z "$(find "$prefix" -name METADATA)" ]]'
check "unversioned links" eval '[[ "$(readlink "$prefix/lib/libcudnn.so")" == libcudnn.so.9 &&
  "$(readlink "$prefix/lib/libcudnn_adv.so")" == libcudnn_adv.so.9 && "$(readlink "$prefix/lib/libnccl.so")" == libnccl.so.2 ]]'
check "lib64 and targets/x86_64-linux" eval '[[ "$(readlink "$prefix/lib64")" == lib &&
  "$(cat "$prefix/targets/x86_64-linux/lib/libnccl.so.2")" == nccl-bytes &&
  "$(cat "$prefix/targets/x86_64-linux/include/nccl.h")" == nccl-h ]]'

listing() { (cd "$prefix" && find . -printf '%p %l %m\n' | sort); }
before=$(listing)
out=$("$ASSEMBLE" "$wheels" "$prefix" 2>&1) || fail "re-run: exit $?: $out"
check "a re-run changes nothing" eval '[[ "$(listing)" == "$before" ]]'

wheel "$wheels/nvidia_other-1-py3-none-any.whl" "nvidia/cu13/include/cuda.h=other-cuda-h"
out=$("$ASSEMBLE" "$wheels" "$TMP/conflict" 2>&1)
rc=$?
check "two wheels disagreeing on a file stop it" eval '[[ $rc -ne 0 && "$out" == *"include/cuda.h differs between wheels"* ]]'

mkdir -p "$TMP/empty"
out=$("$ASSEMBLE" "$TMP/empty" "$TMP/none" 2>&1)
rc=$?
check "no wheels: exit 1 naming the folder" eval '[[ $rc -eq 1 && "$out" == *"no nvidia_*.whl in $TMP/empty"* ]]'

# The container's pins and setup.sh's agree where both pin a wheel (the CUDA runtime and CUPTI
# that libtorch_cpu.so needs), and the container builds with what the README runs.
for name in nvidia-cuda-runtime nvidia-cuda-cupti; do
  setup_pin=$(grep -o "\"$name==[0-9.]* [0-9a-f]*" setup.sh | tr -d '"' | tr ' ' '@')
  docker_pin=$(grep -o "^$name==[0-9.]* --hash=sha256:[0-9a-f]*" docker/cuda-wheels.txt |
    sed 's/ --hash=sha256:/@/')
  check "$name pinned alike in setup.sh and docker/cuda-wheels.txt" \
    eval '[[ -n "$setup_pin" && "$setup_pin" == "$docker_pin" ]]'
done
check "docker/cuda-wheels.txt: 19 sha256-pinned wheels" \
  eval '[[ $(grep -c "^nvidia-[a-z0-9-]*==[0-9.]* --hash=sha256:[0-9a-f]\{64\}$" docker/cuda-wheels.txt) -eq 19 ]]'
check "the Dockerfile runs setup.sh --cuda and builds the trainer with CUDA" \
  grep -q '^RUN ./setup.sh --cuda && bazel build -c opt --config=cuda //trainer:pretrain_gpt2$' docker/Dockerfile.gpu

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
