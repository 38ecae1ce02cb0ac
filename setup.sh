#!/usr/bin/env bash
# One-command set-up for this workspace (Debian 12-class Linux, x86-64).
#
#   ./setup.sh          everything the default (CPU) build and its tests need
#   ./setup.sh --cuda   the same, plus what `bazel build --config=cuda` needs: checks the CUDA
#                       13 toolkit and NCCL 2.28.9 at /usr/local/cuda, and fetches the three
#                       libraries libtorch_cuda.so needs that the toolkit does not ship
#
# What it does, in order, stopping with a message at the first missing prerequisite and
# before it has changed anything:
#   1. checks the platform, Python (>= 3.8, with pip) and, with --cuda, /usr/local/cuda;
#   2. installs the missing Debian packages (Bazel 4.2, GCC, Abseil, SentencePiece,
#      GoogleTest, Gloo, nlohmann/json, Protocol Buffers) with apt-get, as root or through sudo;
#   3. fetches the pinned PyPI wheels (torch==2.11.0 and the two CUDA runtime libraries that
#      libtorch_cpu.so itself links: libcudart.so.13 and libcupti.so.13), checks their
#      sha256, keeps them in ~/.cache/varuna/wheels so fresh clones do not download again,
#      and unpacks them into .deps/site-packages (git-ignored; a site-packages layout so
#      torch's own RPATH finds the CUDA libraries beside it), with the Python packages some
#      tests compare against (tokenizers, tiktoken, regex);
#   4. fetches the pinned openai-whisper sdist the same way (kept in ~/.cache/varuna/sdists)
#      for the GPT-2 BPE ranks it ships, and writes GPT-2's vocabulary files from them into
#      .deps/gpt2 (gpt2-vocab.json, gpt2-merges.txt, gpt2.tiktoken; setup/gpt2_bpe_files.py).
# Re-running it changes nothing that is already in place and prints only the summary.
#
# Environment overrides (mostly for tests): PYTHON (default python3), CUDA_HOME (default
# /usr/local/cuda), VARUNA_DEPS_DIR (default <repo>/.deps), VARUNA_CACHE_DIR (default
# ${XDG_CACHE_HOME:-~/.cache}/varuna).
set -euo pipefail
set -f  # no globbing: the wheel tables hold shell patterns for the unpacker, not for bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly ROOT
readonly DEPS_DIR=${VARUNA_DEPS_DIR:-$ROOT/.deps}
readonly CACHE_DIR=${VARUNA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/varuna}
readonly PYTHON=${PYTHON:-python3}
readonly CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
readonly BAZEL_CUDA_PATH=/usr/local/cuda  # what WORKSPACE's @cuda repository reads

readonly TORCH_VERSION=2.11.0
readonly TORCH_NCCL_VERSION=2.28.9  # torch 2.11.0 pins nvidia-nccl-cu13==2.28.9
readonly TORCH_CUDA_MAJOR=13
# One wheel per line: name==version, sha256, file name, and the members to unpack (shell
# patterns). The torch wheel is the cp311 one; its C++ libraries are the same for every
# Python version, and nothing is installed into a Python.
# CPU build: torch, plus the only two CUDA libraries libtorch_cpu.so lists as NEEDED.
readonly WHEELS=(
  "torch==2.11.0 7aa2f9bbc6d4595ba72138026b2074be1233186150e9292865e04b7a63b8c67a torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl torch/include/* torch/share/* torch/lib/lib*.so*"
  "nvidia-cuda-runtime==13.0.96 7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548 nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl nvidia/cu13/lib/libcudart.so.13"
  "nvidia-cuda-cupti==13.0.85 4eb01c08e859bf924d222250d2e8f8b8ff6d3db4721288cf35d14252a4d933c8 nvidia_cuda_cupti-13.0.85-py3-none-manylinux_2_25_x86_64.whl nvidia/cu13/lib/libcupti.so.13"
  # Hugging Face's tokenizers (abi3: any Python >= 3.9), only for the test of the exported
  # tokenizer.json (//tests/tools/export_hf:hf_tokenizer_parity_test, with PYTHONPATH=.deps/site-packages).
  "tokenizers==0.22.1 e2ef6063d7a84994129732b47e7915e8710f27f99f3a3260b8a38fc7ccd083f4 tokenizers-0.22.1-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl tokenizers/*"
  # OpenAI's tiktoken and its dependency regex (CPython 3.11, Debian 12's python3), only for
  # the test of GPT-2's BPE (//tests/data:gpt2_bpe_parity_test). tiktoken imports `requests`
  # only to download ranks files by URL; the test loads .deps/gpt2/gpt2.tiktoken, so it is not
  # fetched.
  "tiktoken==0.14.0 f5e7665f6624e052e5e7f6a36919ab69279decdc976d7b16b4fa15e1897d0513 tiktoken-0.14.0-cp311-cp311-manylinux_2_28_x86_64.whl tiktoken/* tiktoken_ext/*"
  "regex==2026.11.19 86d3b2ea69b3c56df3e8ddbac6cd98eaf5a8c5b5e7e006897ebdf7a28d6818e6 regex-2026.11.19-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl regex/*"
)
# GPT-2's BPE ranks (whisper/assets/gpt2.tiktoken) come from this sdist: name==version, sha256,
# file name. setup/gpt2_bpe_files.py turns them into GPT-2's vocabulary files.
readonly GPT2_SDIST="openai-whisper==20250625 37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96 openai_whisper-20250625.tar.gz"
# --cuda: the libraries libtorch_cuda.so needs that the CUDA toolkit does not ship
# (torch 2.11.0 pins these versions).
readonly CUDA_WHEELS=(
  "nvidia-cufile==1.15.1.6 08a3ecefae5a01c7f5117351c64f17c7c62efa5fffdbe24fc7d298da19cd0b44 nvidia_cufile-1.15.1.6-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl nvidia/cu13/lib/libcufile.so.0"
  "nvidia-cusparselt-cu13==0.8.0 25e30a8a7323935d4ad0340b95a0b69926eee755767e8e0b1cf8dd85b197d3fd nvidia_cusparselt_cu13-0.8.0-py3-none-manylinux2014_x86_64.whl nvidia/cusparselt/lib/libcusparseLt.so.0"
  "nvidia-nvshmem-cu13==3.4.5 290f0a2ee94c9f3687a02502f3b9299a9f9fe826e6d0287ee18482e78d495b80 nvidia_nvshmem_cu13-3.4.5-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl nvidia/nvshmem/lib/libnvshmem_host.so.3"
)
readonly APT_PACKAGES=(bazel-bootstrap g++ libabsl-dev libicu-dev libsentencepiece-dev sentencepiece
  libgtest-dev libgloo-dev nlohmann-json3-dev libprotobuf-dev protobuf-compiler)

want_cuda=0
for arg in "$@"; do
  case "$arg" in
    --cuda) want_cuda=1 ;;
    -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg'; the only option is --cuda (see --help)" >&2; exit 2 ;;
  esac
done

die() {
  echo "setup.sh: $*" >&2
  exit 1
}

# fetch <spec> <sha256> <file> <cache folder> <pip download options...>: makes sure the cache
# folder holds <file> with that sha256, downloading <spec> from PyPI if it does not. A download
# with another sha256 is refused and not kept.
fetch() {
  local spec=$1 sha=$2 file=$3 dir=$4
  shift 4
  local cached=$dir/$file tmp got
  mkdir -p "$dir"
  [[ -f "$cached" && "$(sha256sum "$cached" | cut -d' ' -f1)" == "$sha" ]] && return 0
  echo "setup: downloading $spec from PyPI"
  tmp=$(mktemp -d "$dir/.download.XXXXXX")
  # --no-deps: only what the tables pin, none of its dependencies.
  if ! "$PYTHON" -m pip download -q --no-deps "$@" -d "$tmp" "$spec"; then
    rm -rf "$tmp"
    die "pip could not download $spec. Check access to PyPI (network, proxy, pip.conf) and re-run."
  fi
  got=$(sha256sum "$tmp/$file" 2> /dev/null | cut -d' ' -f1 || true)
  if [[ "$got" != "$sha" ]]; then
    rm -rf "$tmp"
    die "$file from PyPI has sha256 '${got:-<no such file>}', expected $sha. Not using it; re-run, or check for a proxy rewriting downloads."
  fi
  mv "$tmp/$file" "$cached"
  rm -rf "$tmp"
}

# ---- 1. prerequisites that set-up cannot install ------------------------------------------

[[ "$(uname -s)" == Linux && "$(uname -m)" == x86_64 ]] ||
  die "this workspace builds on x86-64 Linux only (found $(uname -s) $(uname -m))."
{ [[ -f /etc/debian_version ]] && command -v dpkg-query > /dev/null; } ||
  die "this set-up installs Debian packages with apt-get, and /etc/debian_version or dpkg-query is missing. Use Debian 12 (bookworm) or a derivative."

command -v "$PYTHON" > /dev/null ||
  die "Python not found ('$PYTHON'). Install it with: apt-get install python3 python3-pip (or set PYTHON=/path/to/python3)."
py_version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2> /dev/null) ||
  die "'$PYTHON' does not run as a Python interpreter. Set PYTHON=/path/to/python3 (3.8 or newer)."
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)' ||
  die "'$PYTHON' is Python $py_version; set-up needs Python 3.8 or newer with pip (to fetch the torch wheel). Install python3 >= 3.8 or set PYTHON=/path/to/python3."
"$PYTHON" -m pip --version > /dev/null 2>&1 ||
  die "'$PYTHON' has no pip. Install it with: apt-get install python3-pip (or: $PYTHON -m ensurepip)."

cuda_summary="not found at $CUDA_HOME (only --config=cuda needs it)"
if [[ -x "$CUDA_HOME/bin/nvcc" ]]; then
  nvcc_release=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
  nccl_header=$CUDA_HOME/include/nccl.h
  nccl_version=unknown
  if [[ -f "$nccl_header" ]]; then
    nccl_version=$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v[$2]=$3} END{print v["NCCL_MAJOR"]"."v["NCCL_MINOR"]"."v["NCCL_PATCH"]}' "$nccl_header")
  fi
  cuda_summary="CUDA $nvcc_release, NCCL $nccl_version at $CUDA_HOME"
fi
if ((want_cuda)); then
  [[ -x "$CUDA_HOME/bin/nvcc" ]] ||
    die "--cuda: no CUDA toolkit at $CUDA_HOME (no bin/nvcc). Install the CUDA $TORCH_CUDA_MAJOR toolkit there (NVIDIA's Debian repository, or the nvidia-cuda-nvcc wheels), or set CUDA_HOME; or drop --cuda for a CPU-only build."
  [[ "${nvcc_release%%.*}" == "$TORCH_CUDA_MAJOR" ]] ||
    die "--cuda: $CUDA_HOME has CUDA $nvcc_release, but torch $TORCH_VERSION is built with CUDA $TORCH_CUDA_MAJOR. Install the CUDA $TORCH_CUDA_MAJOR toolkit."
  [[ -f "$CUDA_HOME/include/nccl.h" ]] ||
    die "--cuda: no NCCL headers at $CUDA_HOME/include/nccl.h. Install NCCL $TORCH_NCCL_VERSION (the nvidia-nccl-cu13 wheel's include/ and lib/) into $CUDA_HOME."
  [[ "$nccl_version" == "$TORCH_NCCL_VERSION" ]] ||
    die "--cuda: $CUDA_HOME has NCCL $nccl_version, but torch $TORCH_VERSION runs NCCL $TORCH_NCCL_VERSION; compiling against other NCCL headers than the library that runs is not allowed. Install NCCL $TORCH_NCCL_VERSION."
  [[ -e "$CUDA_HOME/lib/libnccl.so.2" || -e "$CUDA_HOME/lib64/libnccl.so.2" ]] ||
    die "--cuda: no libnccl.so.2 in $CUDA_HOME/lib or lib64. Install NCCL $TORCH_NCCL_VERSION there."
  if [[ "$(cd "$CUDA_HOME" && pwd -P)" != "$(cd "$BAZEL_CUDA_PATH" 2> /dev/null && pwd -P)" ]]; then
    die "--cuda: Bazel reads the toolkit from $BAZEL_CUDA_PATH, which is not $CUDA_HOME. Link it: ln -s $CUDA_HOME $BAZEL_CUDA_PATH"
  fi
fi

# ---- 2. Debian packages ----------------------------------------------------------------------

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2> /dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  command -v apt-get > /dev/null ||
    die "missing Debian packages (${missing[*]}) and no apt-get to install them. Install them by hand."
  sudo=()
  if ((EUID != 0)); then
    command -v sudo > /dev/null ||
      die "missing Debian packages (${missing[*]}); installing them needs root. Re-run as root, or install sudo."
    sudo=(sudo)
  fi
  echo "setup: installing Debian packages: ${missing[*]}"
  apt_log=$(mktemp)
  if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q > "$apt_log" 2>&1 ||
    ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${missing[@]}" >> "$apt_log" 2>&1; then
    tail -n 5 "$apt_log" >&2
    rm -f "$apt_log"
    die "apt-get could not install ${missing[*]} (output above). Check access to Debian's package archive (network, proxy, /etc/apt/sources.list) and re-run."
  fi
  rm -f "$apt_log"
fi

# ---- 3. LibTorch from the PyPI wheels ------------------------------------------------------------

site=$DEPS_DIR/site-packages
# A stamp of a wheel no longer pinned means the pins changed: start from an empty tree, so
# no file of an older version stays behind.
if [[ -d "$site/.installed" ]]; then
  while read -r stamp; do
    if [[ " ${WHEELS[*]} ${CUDA_WHEELS[*]} " != *" $stamp "* ]]; then
      echo "setup: the pinned wheels changed ($stamp is no longer one); reinstalling $site"
      rm -rf "$site"
      break
    fi
  done < <(find "$site/.installed" -mindepth 1 -maxdepth 1 -printf '%f\n')
fi
wheels=("${WHEELS[@]}")
((want_cuda)) && wheels+=("${CUDA_WHEELS[@]}")
for entry in "${wheels[@]}"; do
  read -r spec sha file members <<< "$entry"
  # The stamp is written last: an interrupted unpack is redone on the next run.
  [[ -f "$site/.installed/$file" ]] && continue
  fetch "$spec" "$sha" "$file" "$CACHE_DIR/wheels" --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_25_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  cached=$CACHE_DIR/wheels/$file
  echo "setup: unpacking $spec into $site"
  mkdir -p "$site/.installed"
  # $members unquoted: one argument per pattern (set -f keeps bash from globbing them).
  # shellcheck disable=SC2086
  "$PYTHON" - "$cached" "$site" $members << 'EOF_PY'
import fnmatch, os, sys, zipfile
wheel, dest, patterns = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if name.endswith("/") or not any(fnmatch.fnmatch(name, p) for p in patterns):
            continue
        if "libtorch_python" in name:  # Python bindings: never linked by C++ programs
            continue
        z.extract(info, dest)
        if ".so" in name:
            os.chmod(os.path.join(dest, name), 0o755)
EOF_PY
  touch "$site/.installed/$file"
done

# ---- 4. GPT-2's BPE files from the openai-whisper sdist -----------------------------------------

gpt2=$DEPS_DIR/gpt2
gpt2_files=(gpt2-vocab.json gpt2-merges.txt gpt2.tiktoken)
read -r spec sha file <<< "$GPT2_SDIST"
# The stamp names the sdist the files came from and is written last.
gpt2_done=1
for f in ".installed/$file" "${gpt2_files[@]}"; do
  [[ -f "$gpt2/$f" ]] || gpt2_done=0
done
if ((!gpt2_done)); then
  # --no-binary: the sdist itself (pip prepares its metadata; nothing is built or installed).
  fetch "$spec" "$sha" "$file" "$CACHE_DIR/sdists" --no-binary=openai-whisper
  echo "setup: writing GPT-2's BPE files from $spec into $gpt2"
  rm -rf "$gpt2"
  "$PYTHON" "$ROOT/setup/gpt2_bpe_files.py" "$CACHE_DIR/sdists/$file" "$gpt2" ||
    die "could not write GPT-2's BPE files into $gpt2 (error above). Check that $DEPS_DIR is writable and has space, and re-run."
  mkdir -p "$gpt2/.installed"
  touch "$gpt2/.installed/$file"
fi

# ---- summary ---------------------------------------------------------------------------------

pkg_version() { dpkg-query -W -f='${Version}' "$1" 2> /dev/null || echo "not installed"; }
echo "setup: ready."
echo "  Bazel $(pkg_version bazel-bootstrap), $(g++ --version | head -n1)"
echo "  Abseil $(pkg_version libabsl-dev), SentencePiece $(pkg_version libsentencepiece-dev), GoogleTest $(pkg_version libgtest-dev), Gloo $(pkg_version libgloo-dev), nlohmann/json $(pkg_version nlohmann-json3-dev)"
echo "  LibTorch $TORCH_VERSION (PyPI wheel, C++11 ABI) in $site; Python $py_version used to fetch it"
echo "  GPT-2's BPE files (${gpt2_files[*]}, from ${GPT2_SDIST%% *}) in $gpt2"
echo "  CUDA: $cuda_summary"
