#!/usr/bin/env bash
# Proves that ./setup.sh stops at each missing prerequisite with a message that names the
# problem and the fix, exits non-zero, and leaves nothing behind. Prerequisites are taken
# away with fake commands first on PATH and overrides of PYTHON, CUDA_HOME and pip's index;
# VARUNA_DEPS_DIR and VARUNA_CACHE_DIR point into the test's own temporary directory.
# Then proves that setup/gpt2_bpe_files.py, which writes GPT-2's BPE files from the
# openai-whisper sdist, turns the real ranks file (@gpt2_bpe's copy, in an sdist-shaped
# archive) into the same files as ./setup.sh did, leaves them alone when run again, and
# refuses a broken archive.
set -uo pipefail

SETUP=$(pwd)/setup.sh
GPT2_BPE_FILES=$(pwd)/setup/gpt2_bpe_files.py
GPT2=$(pwd)/../gpt2_bpe
TMP=${TEST_TMPDIR:-$(mktemp -d)}
failures=0

# expect_failure <name> <expected exit code> <expected message> -- <env and command...>
expect_failure() {
  local name=$1 code=$2 message=$3
  shift 4
  local deps=$TMP/$name/deps cache=$TMP/$name/cache out rc
  mkdir -p "$TMP/$name"
  out=$(env VARUNA_DEPS_DIR="$deps" VARUNA_CACHE_DIR="$cache" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne $code ]]; then
    echo "FAIL $name: exit $rc, expected $code; output:"$'\n'"$out"
    failures=$((failures + 1))
  elif [[ "$out" != *"$message"* ]]; then
    echo "FAIL $name: message not found: '$message'; output:"$'\n'"$out"
    failures=$((failures + 1))
  elif [[ -e "$deps" ]]; then
    echo "FAIL $name: $deps was created by a failed set-up"
    failures=$((failures + 1))
  elif [[ -n "$(find "$cache" -name '*.whl' -o -name '*.tar.gz' 2> /dev/null)" ]]; then
    echo "FAIL $name: a download was kept in $cache by a failed set-up"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

# Executable fakes: fake <dir> <name> <body>
fake() {
  mkdir -p "$1"
  printf '#!/usr/bin/env bash\n%s\n' "$3" > "$1/$2"
  chmod +x "$1/$2"
}

expect_failure unknown_argument 2 "unknown argument '--gpu'; the only option is --cuda" -- \
  bash "$SETUP" --gpu

expect_failure no_python 1 "Python not found ('/nonexistent/python3'). Install it with: apt-get install python3 python3-pip" -- \
  env PYTHON=/nonexistent/python3 bash "$SETUP"

fake "$TMP/old_python" python3 'case "$*" in *print*) echo 3.6 ;; *) exit 1 ;; esac'
expect_failure old_python 1 "is Python 3.6; set-up needs Python 3.8 or newer with pip" -- \
  env PYTHON="$TMP/old_python/python3" bash "$SETUP"

fake "$TMP/no_pip" python3 'case "$*" in *print*) echo 3.11 ;; *"-m pip"*) exit 1 ;; *) exit 0 ;; esac'
expect_failure python_without_pip 1 "has no pip. Install it with: apt-get install python3-pip" -- \
  env PYTHON="$TMP/no_pip/python3" bash "$SETUP"

expect_failure cuda_missing 1 "--cuda: no CUDA toolkit at /nonexistent/cuda (no bin/nvcc). Install the CUDA 13 toolkit" -- \
  env CUDA_HOME=/nonexistent/cuda bash "$SETUP" --cuda

fake "$TMP/cuda12/bin" nvcc 'echo "Cuda compilation tools, release 12.4, V12.4.131"'
expect_failure cuda_too_old 1 "--cuda: $TMP/cuda12 has CUDA 12.4, but torch 2.11.0 is built with CUDA 13" -- \
  env CUDA_HOME="$TMP/cuda12" bash "$SETUP" --cuda

fake "$TMP/cuda13/bin" nvcc 'echo "Cuda compilation tools, release 13.0, V13.0.88"'
mkdir -p "$TMP/cuda13/include"
printf '#define NCCL_MAJOR 2\n#define NCCL_MINOR 27\n#define NCCL_PATCH 3\n' > "$TMP/cuda13/include/nccl.h"
expect_failure nccl_mismatch 1 "--cuda: $TMP/cuda13 has NCCL 2.27.3, but torch 2.11.0 runs NCCL 2.28.9" -- \
  env CUDA_HOME="$TMP/cuda13" bash "$SETUP" --cuda

# Every package reported missing, and apt-get cannot reach the archive.
fake "$TMP/no_apt" dpkg-query 'exit 1'
fake "$TMP/no_apt" sudo '"$@"'  # a real sudo would reset PATH and find the real apt-get
fake "$TMP/no_apt" apt-get 'echo "E: Could not resolve deb.debian.org" >&2; exit 100'
expect_failure apt_unreachable 1 "apt-get could not install bazel-bootstrap g++ libabsl-dev" -- \
  env PATH="$TMP/no_apt:$PATH" bash "$SETUP"
expect_failure apt_unreachable_names_the_fix 1 "Check access to Debian's package archive (network, proxy, /etc/apt/sources.list)" -- \
  env PATH="$TMP/no_apt:$PATH" bash "$SETUP"

# PyPI unreachable: nothing listens on port 9.
NO_PYPI=(PIP_CONFIG_FILE=/dev/null PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_FIND_LINKS=
  PIP_RETRIES=0 PIP_DEFAULT_TIMEOUT=5 PIP_NO_CACHE_DIR=1)
expect_failure pypi_unreachable 1 "pip could not download torch==2.11.0. Check access to PyPI (network, proxy, pip.conf)" -- \
  env "${NO_PYPI[@]}" bash "$SETUP"

# A download whose checksum is wrong (a proxy rewriting it, say) is refused and not kept.
# A well-formed wheel of the right name and version, but not the published one.
mkdir -p "$TMP/bad_links"
python3 - "$TMP/bad_links/torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl" << 'EOF_PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    info = "torch-2.11.0.dist-info/"
    z.writestr(info + "METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
    z.writestr(info + "WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
               "Tag: cp311-cp311-manylinux_2_28_x86_64\n")
    z.writestr(info + "RECORD", "")
EOF_PY
expect_failure checksum_mismatch 1 "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl from PyPI has sha256 '" -- \
  env "${NO_PYPI[@]}" PIP_NO_INDEX=1 PIP_FIND_LINKS="$TMP/bad_links" bash "$SETUP"

# Changed pins: a stamp of a wheel that is no longer pinned makes set-up start from an empty
# tree, so no file of the older version stays behind (here the download then fails).
stale=$TMP/stale/deps/site-packages
mkdir -p "$stale/.installed" "$stale/torch/lib"
touch "$stale/.installed/torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl" \
  "$stale/torch/lib/libtorch_old.so"
out=$(env VARUNA_DEPS_DIR="$TMP/stale/deps" VARUNA_CACHE_DIR="$TMP/stale/cache" "${NO_PYPI[@]}" \
  bash "$SETUP" 2>&1)
if [[ "$out" != *"the pinned wheels changed (torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl is no longer one)"* ]]; then
  echo "FAIL stale_pins: no message; output:"$'\n'"$out"
  failures=$((failures + 1))
elif [[ -e "$stale/torch/lib/libtorch_old.so" ]]; then
  echo "FAIL stale_pins: a file of the old version is still in $stale"
  failures=$((failures + 1))
else
  echo "ok   stale_pins"
fi

# The sdist of GPT-2's BPE ranks cannot be downloaded: with every wheel in place (stamped),
# set-up stops at it, and writes no .deps/gpt2.
gpt2_case=$TMP/gpt2_pypi_unreachable
mkdir -p "$gpt2_case/deps/site-packages/.installed"
while read -r wheel; do
  touch "$gpt2_case/deps/site-packages/.installed/$wheel"
done < <(grep -o '[^ ]*\.whl' "$SETUP")
out=$(env VARUNA_DEPS_DIR="$gpt2_case/deps" VARUNA_CACHE_DIR="$gpt2_case/cache" "${NO_PYPI[@]}" \
  bash "$SETUP" 2>&1)
rc=$?
if [[ $rc -ne 1 || "$out" != *"pip could not download openai-whisper==20250625. Check access to PyPI"* ]]; then
  echo "FAIL gpt2_pypi_unreachable: exit $rc; output:"$'\n'"$out"
  failures=$((failures + 1))
elif [[ -e "$gpt2_case/deps/gpt2" || -n "$(find "$gpt2_case/cache" -name '*.tar.gz')" ]]; then
  echo "FAIL gpt2_pypi_unreachable: a failed set-up left .deps/gpt2 or the sdist behind"
  failures=$((failures + 1))
else
  echo "ok   gpt2_pypi_unreachable"
fi

# sdist <archive> <ranks file>: an archive shaped like openai-whisper's sdist.
sdist() {
  local dir
  dir=$(mktemp -d "$TMP/sdist.XXXXXX")
  mkdir -p "$dir/openai_whisper-0/whisper/assets"
  cp "$2" "$dir/openai_whisper-0/whisper/assets/gpt2.tiktoken"
  tar -czf "$1" -C "$dir" openai_whisper-0
}

# The real ranks give ./setup.sh's files byte for byte; a second run rewrites nothing.
sdist "$TMP/real.tar.gz" "$GPT2/gpt2.tiktoken"
out=$(python3 "$GPT2_BPE_FILES" "$TMP/real.tar.gz" "$TMP/gpt2" 2>&1)
rc=$?
before=$(stat -c '%n %Y %i' "$TMP"/gpt2/* 2> /dev/null)
out2=$(python3 "$GPT2_BPE_FILES" "$TMP/real.tar.gz" "$TMP/gpt2" 2>&1)
rc2=$?
if [[ $rc -ne 0 || $rc2 -ne 0 || -n "$out$out2" ]]; then
  echo "FAIL gpt2_files: exit $rc, then $rc2; output:"$'\n'"$out$out2"
  failures=$((failures + 1))
elif ! cmp -s "$TMP/gpt2/gpt2-vocab.json" "$GPT2/gpt2-vocab.json" ||
  ! cmp -s "$TMP/gpt2/gpt2-merges.txt" "$GPT2/gpt2-merges.txt" ||
  ! cmp -s "$TMP/gpt2/gpt2.tiktoken" "$GPT2/gpt2.tiktoken"; then
  echo "FAIL gpt2_files: the files differ from ./setup.sh's in .deps/gpt2"
  failures=$((failures + 1))
elif [[ "$(stat -c '%n %Y %i' "$TMP"/gpt2/*)" != "$before" ]]; then
  echo "FAIL gpt2_files: a second run rewrote files that were already right"
  failures=$((failures + 1))
else
  echo "ok   gpt2_files"
fi

# A broken archive or ranks file is refused, naming the problem, and nothing is written.
head -n 1000 "$GPT2/gpt2.tiktoken" > "$TMP/short.tiktoken"
sdist "$TMP/short.tar.gz" "$TMP/short.tiktoken"
printf 'not an archive' > "$TMP/garbage.tar.gz"
for case in "short.tar.gz:has 1000 tokens; expected the ranks 0..50255 once each" \
  "garbage.tar.gz:cannot read $TMP/garbage.tar.gz as a .tar.gz sdist"; do
  archive=${case%%:*} message=${case#*:}
  out=$(python3 "$GPT2_BPE_FILES" "$TMP/$archive" "$TMP/out_$archive" 2>&1)
  rc=$?
  if [[ $rc -ne 1 || "$out" != *"$message"* ]]; then
    echo "FAIL gpt2_files_$archive: exit $rc, expected 1 and '$message'; output:"$'\n'"$out"
    failures=$((failures + 1))
  elif [[ -e "$TMP/out_$archive" ]]; then
    echo "FAIL gpt2_files_$archive: $TMP/out_$archive was created"
    failures=$((failures + 1))
  else
    echo "ok   gpt2_files_$archive"
  fi
done

if ((failures)); then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all set-up cases passed"
