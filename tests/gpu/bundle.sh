#!/usr/bin/env bash
# Packs everything a GPU host without Bazel needs to run this project's GPU work into one
# relocatable folder:
#   bin/       the gpu-tagged tests and every target tagged "gpu_bundle" (the trainer, the
#              launcher, the GPU benchmarks), built with --config=cuda, our own libraries linked
#              statically; the Gloo backend library; the trainer's bundled corpus in
#              bin/pretrain_gpt2.runfiles/ (where the trainer looks for it)
#   lib/       the shared libraries those need that are neither LibTorch nor CUDA nor the C
#              library nor the GCC runtime (Abseil, SentencePiece, Gloo, hiredis, ibverbs, ...)
#   bench/     the benchmark scripts of tests/benchmarks (the PyTorch reference among them)
#   env.sh     `source env.sh` points LD_LIBRARY_PATH at lib/ and at the host's PyTorch 2.11
#              install (torch/lib and nvidia/*/lib), so any binary in bin/ runs; it warns when
#              the host's glibc or libstdc++ is older than the binaries need (built on Debian
#              12: glibc 2.34 and GLIBCXX_3.4.30, GCC 12's libstdc++; Ubuntu 22.04 has both)
#   run.sh     runs every bundled test (tests.txt lists them); exits non-zero if any fails
#   session.sh every GPU check, in phases meant for under 9 minutes each (tests, parity,
#              determinism, kernels, training, planning, throughput [PRESET]; all; report: one
#              PASS/FAIL/SKIP line per check); see tests/gpu/session.sh
#
#   tests/gpu/bundle.sh [out_dir]              (default: gpu_bundle; git-ignored)
#   bazel run //tests/gpu:bundle -- [out_dir]  (the same; out_dir relative to where you ran it)
#   scp -r gpu_bundle host: && ssh host 'gpu_bundle/run.sh'
#   ssh host 'source gpu_bundle/env.sh && gpu_bundle/bin/pretrain_gpt2 --preset=gpt2-355m --fp16'
#
# env.sh finds torch with `python3 -c 'import torch'`; set TORCH_LIB=/path/to/torch/lib to
# choose another.
set -euo pipefail
out=${1:-gpu_bundle}
if [[ -n "${BUILD_WORKSPACE_DIRECTORY:-}" ]]; then
  # Under `bazel run`: build in the workspace, write where the user ran the command.
  [[ "$out" = /* ]] || out="$BUILD_WORKING_DIRECTORY/$out"
  cd "$BUILD_WORKSPACE_DIRECTORY"
else
  [[ "$out" = /* ]] || out="$PWD/$out"
  cd "$(dirname "$0")/../.."
fi

tests=$(bazel query 'attr(tags, "\bgpu\b", tests(//...))') ||
  { echo "bundle.sh: bazel query for the gpu-tagged tests failed (output above)" >&2; exit 1; }
binaries=$(bazel query 'attr(tags, "\bgpu_bundle\b", //...)') ||
  { echo "bundle.sh: bazel query for the gpu_bundle-tagged targets failed (output above)" >&2; exit 1; }
[[ -n "$tests" ]] || { echo "bundle.sh: no gpu-tagged tests found" >&2; exit 1; }
# Static linking of our own libraries: a binary then needs only external shared libraries.
flags=(-c opt --config=cuda --dynamic_mode=off)
bazel build "${flags[@]}" $tests $binaries
# The outputs of exactly this configuration. The bazel-bin symlink points at whatever built
# last, so another build in the workspace meanwhile (a CPU test, say) would have the copies
# below take that build's binaries, without CUDA (2026-11-27: a bundle whose trainer ran on
# the CPU of a GPU host).
bin_dir=$(bazel info "${flags[@]}" bazel-bin) ||
  { echo "bundle.sh: bazel info bazel-bin failed (output above)" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/bench"
cp "$bin_dir/varuna/comm/libvaruna_gloo.so" "$out/bin/"
for target in $tests; do echo "${target##*:}"; done > "$out/tests.txt"
for target in $tests $binaries; do
  binary=$bin_dir/$(echo "${target#//}" | tr ':' '/')
  # A binary built without CUDA would run on the CPU of a GPU host without a word: every one
  # that links LibTorch must link its CUDA library too.
  needed=$(readelf -d "$binary") || { echo "bundle.sh: readelf -d $binary failed" >&2; exit 1; }
  if [[ "$needed" == *libtorch_cpu* && "$needed" != *libtorch_cuda* ]]; then
    echo "bundle.sh: $binary links libtorch_cpu but not libtorch_cuda: not a --config=cuda build" >&2
    exit 1
  fi
  cp "$binary" "$out/bin/"
  # Libraries the host's PyTorch provides (torch, its CUDA and NCCL wheels), the C library
  # (libutil included) and the GCC runtime (libstdc++, libgcc_s) stay out; the rest is copied.
  # Debian 12's libstdc++ needs glibc 2.36 (arc4random), so carrying it would keep the bundle
  # off Ubuntu 22.04 (glibc 2.35), whose own libstdc++ (GCC 12) has every GLIBCXX version the
  # binaries need; env.sh checks the host for both (see the versions recorded below).
  for so in $( (ldd "$binary"; ldd "$out/bin/libvaruna_gloo.so") | awk '/=> \//{print $3}' | sort -u); do
    case "$(basename "$so")" in
      libtorch* | libc10* | libcu* | libnccl* | libnv* | libgomp* | libstdc++.so.* | libgcc_s.so.* | \
        libc.so.* | libm.so.* | libdl.so.* | librt.so.* | libpthread.so.* | libutil.so.* | ld-linux*) ;;
      *) cp -L "$so" "$out/lib/" ;;
    esac
  done
done
if [[ -x "$out/bin/pretrain_gpt2" ]]; then
  mkdir -p "$out/bin/pretrain_gpt2.runfiles/varuna/data"
  cp -rL data/corpus "$out/bin/pretrain_gpt2.runfiles/varuna/data/"
fi
cp tests/benchmarks/*.py tests/benchmarks/*.sh "$out/bench/"
cp tests/gpu/session.sh "$out/"

# The newest glibc and libstdc++ symbol versions anything in bin/ or lib/ asks of the host.
newest_version() {
  for f in "$out"/bin/* "$out"/lib/*; do
    [[ -f "$f" ]] && objdump -T "$f" 2> /dev/null | awk '/\*UND\*/' | grep -o "$1_[0-9.]*[0-9]"
  done | sort -uV | tail -n 1
}
need_glibc=$(newest_version GLIBC)
need_glibcxx=$(newest_version GLIBCXX)
[[ -n "$need_glibc" && -n "$need_glibcxx" ]] ||
  { echo "bundle.sh: objdump found no GLIBC/GLIBCXX versions in $out (is binutils installed?)" >&2; exit 1; }

{
  echo "# source this file: makes the binaries in bin/ runnable against this host's PyTorch 2.11."
  echo "need_glibc=${need_glibc#GLIBC_} need_glibcxx=$need_glibcxx  # written by bundle.sh"
} > "$out/env.sh"
cat >> "$out/env.sh" << 'EOF_ENV'
bundle_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The host's C library and C++ runtime must be new enough; say so here, not as a loader error.
host_glibc=$(getconf GNU_LIBC_VERSION 2> /dev/null | cut -d' ' -f2)
if [[ "$(printf '%s\n' "$need_glibc" "$host_glibc" | sort -V | head -n 1)" != "$need_glibc" ]]; then
  echo "env.sh: the bundle's binaries need glibc $need_glibc or newer; this host has ${host_glibc:-none}. Build and run in the container instead (README, \"GPU hosts\")." >&2
fi
host_libstdcxx=$( (ldconfig -p || /sbin/ldconfig -p) 2> /dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/{print $NF; exit}')
if [[ -z "$host_libstdcxx" ]] || ! grep -qa "$need_glibcxx" "$host_libstdcxx"; then
  echo "env.sh: the bundle's binaries need a libstdc++.so.6 with $need_glibcxx; this host's (${host_libstdcxx:-none found}) lacks it. Install a newer libstdc++6, or use the container (README, \"GPU hosts\")." >&2
fi
torch_lib=${TORCH_LIB:-$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')}
site=$(dirname "$(dirname "$torch_lib")")
nvidia_libs=$(find "$site/nvidia" -maxdepth 3 -type d -name lib 2> /dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$bundle_dir/lib:$torch_lib:$nvidia_libs${LD_LIBRARY_PATH:-}"
export VARUNA_GLOO_LIBRARY="$bundle_dir/bin/libvaruna_gloo.so"
export PATH="$bundle_dir/bin:$PATH"
EOF_ENV

cat > "$out/run.sh" << 'EOF_RUN'
#!/usr/bin/env bash
# Runs every bundled GPU test against this host's PyTorch 2.11 install.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
status=0
while read -r test; do
  echo "==== $test"
  TEST_TMPDIR=$(mktemp -d) "$here/bin/$test" || status=1
done < "$here/tests.txt"
exit $status
EOF_RUN
chmod +x "$out/run.sh"
echo "bundle.sh: $(du -sh "$out" | cut -f1) in $out: $(ls "$out/bin" | tr '\n' ' ')"
