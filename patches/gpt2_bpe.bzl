"""@gpt2_bpe's repository rule: GPT-2's BPE files, which ./setup.sh writes into .deps/gpt2.

Like new_local_repository (which @libtorch uses), but it names the three files, so a missing
one stops the build with what to do (run ./setup.sh) instead of Bazel's "this directory does
not exist", and the repository is fetched again whenever one of them changes or disappears.
"""

_FILES = ["gpt2-vocab.json", "gpt2-merges.txt", "gpt2.tiktoken"]

def _gpt2_bpe_repository_impl(ctx):
    folder = ctx.path(Label("//:WORKSPACE")).dirname
    for part in ctx.attr.path.split("/"):
        folder = folder.get_child(part)
    missing = [f for f in _FILES if not folder.get_child(f).exists]
    if missing:
        fail(("%s has no %s. Run ./setup.sh: it writes GPT-2's BPE files there (from the " +
              "pinned openai-whisper sdist on PyPI).") % (folder, ", ".join(missing)))
    for f in _FILES:
        # Through a label, so that Bazel re-runs this rule when the file changes.
        ctx.symlink(ctx.path(Label("//:%s/%s" % (ctx.attr.path, f))), f)
    ctx.symlink(ctx.attr.build_file, "BUILD.bazel")

gpt2_bpe_repository = repository_rule(
    implementation = _gpt2_bpe_repository_impl,
    attrs = {
        "build_file": attr.label(
            allow_single_file = True,
            mandatory = True,
            doc = "The BUILD file of the repository.",
        ),
        "path": attr.string(
            mandatory = True,
            doc = "The folder holding the files, relative to the workspace root.",
        ),
    },
    doc = "GPT-2's vocabulary files from a folder of the workspace (see the module docstring).",
)
