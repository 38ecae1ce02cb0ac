#!/usr/bin/env bash
# Packs the GPU tests for a GPU host that has no Bazel: a folder with the test binaries, the
# Gloo backend library, the shared libraries they need that are neither LibTorch nor CUDA
# (Abseil, Gloo, libstdc++, ...), and run.sh, which runs every test against the host's own
# PyTorch 2.11 install (its torch/lib and nvidia/*/lib folders).
#
#   tests/gpu/bundle.sh [out_dir]          (default: gpu_bundle; git-ignored)
#   scp -r gpu_bundle host: && ssh host gpu_bundle/run.sh
#
# run.sh finds torch with `python3 -c 'import torch'`; set TORCH_LIB=/path/to/torch/lib to
# choose another. Its exit status is non-zero if any test fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-gpu_bundle}

targets=$(bazel query 'attr(tags, "\bgpu\b", tests(//...))') ||
  { echo "bundle.sh: bazel query for the gpu-tagged tests failed (output above)" >&2; exit 1; }
[[ -n "$targets" ]] || { echo "bundle.sh: no gpu-tagged tests found" >&2; exit 1; }
# Static linking of our own libraries: a binary then needs only external shared libraries.
bazel build -c opt --config=cuda --dynamic_mode=off $targets

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp bazel-bin/varuna/comm/libvaruna_gloo.so "$out/bin/"
for target in $targets; do
  binary=bazel-bin/$(echo "${target#//}" | tr ':' '/')
  cp "$binary" "$out/bin/"
  # Libraries the host's PyTorch provides (torch, its CUDA and NCCL wheels) and the C library
  # itself stay out; the rest is copied.
  for so in $( (ldd "$binary"; ldd "$out/bin/libvaruna_gloo.so") | awk '/=> \//{print $3}' | sort -u); do
    case "$(basename "$so")" in
      libtorch* | libc10* | libcu* | libnccl* | libnv* | libgomp* | \
        libc.so.* | libm.so.* | libdl.so.* | librt.so.* | libpthread.so.* | ld-linux*) ;;
      *) cp -L "$so" "$out/lib/" ;;
    esac
  done
done

cat > "$out/run.sh" << 'EOF_RUN'
#!/usr/bin/env bash
# Runs every bundled GPU test against this host's PyTorch 2.11 install.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
torch_lib=${TORCH_LIB:-$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')}
site=$(dirname "$(dirname "$torch_lib")")
nvidia_libs=$(find "$site/nvidia" -maxdepth 3 -type d -name lib 2> /dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$here/lib:$torch_lib:$nvidia_libs${LD_LIBRARY_PATH:-}"
export VARUNA_GLOO_LIBRARY="$here/bin/libvaruna_gloo.so"
status=0
for test in "$here"/bin/*_test; do
  echo "==== $(basename "$test")"
  TEST_TMPDIR=$(mktemp -d) "$test" || status=1
done
exit $status
EOF_RUN
chmod +x "$out/run.sh"
echo "bundle.sh: $(du -sh "$out" | cut -f1) in $out: $(ls "$out/bin" | tr '\n' ' ')"
