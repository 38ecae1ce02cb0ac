#!/usr/bin/env python3
"""GPT-2 training throughput in plain PyTorch: the reference the Varuna engine is measured against.

The same model, batch, data, optimizer and output as gpt2_throughput_benchmark.cc, written
directly in PyTorch (no Hugging Face), for the ratio in run_gpu_benchmarks.sh:

  python3 gpt2_pytorch_reference.py --preset=gpt2-355m --dtype=fp16 --batch-size=16 --mode=eager
  python3 gpt2_pytorch_reference.py --preset=gpt2-355m --dtype=bf16 --batch-size=16 --mode=compile

Model (models/gpt2/model.cc, transformer_layer.cc): word + learned position embeddings and
dropout; pre-LayerNorm blocks x += dropout(c_proj(attention(ln_1(x)))), x += dropout(c_proj(
gelu_tanh(c_fc(ln_2(x))))) with a fused QKV projection c_attn ([Q | K | V], heads contiguous)
and causal attention through F.scaled_dot_product_attention(is_causal=True); final LayerNorm;
LM head tied to the word embedding; vocabulary padded to a multiple of 128; per-token cross
entropy in float32, masked mean. Parameters are named and initialised exactly as in
models/gpt2/init.h (one CPU generator per parameter, seeded from the run seed and the name), so
with --dropout=0 in fp32 the first loss equals the C++ engine's.

Training: torch.autocast (fp16 with a GradScaler, initial scale 2^17, growth every 1000 steps,
as the engine's dynamic loss scale; or bf16; fp32 runs without autocast) over fp32 weights;
micro-batches of --chunk-size accumulated; gradient clipping to --clip-grad; AdamW (fused on
CUDA) with weight decay on the weights, not on biases and LayerNorm parameters. --mode=compile
wraps the model in torch.compile. Data: --distinct-batches fixed batches of random token
sequences drawn as the C++ benchmark draws them (identical tokens), cycled.

Output: every step's loss, loss scale and skipped flag; one human line; one JSON line starting
{"impl":"pytorch-eager" or {"impl":"pytorch-compile" with the fields of the C++ benchmark;
with --profile-ops, a per-op table of 3 more profiled steps (torch.profiler).

--sweep-micro-batch: the run for micro-batches 1, 2, 4, ... and --batch-size, each on a fresh
model after torch.cuda.empty_cache(), stopping at the first that runs out of memory; then a table
of tokens/s and peak memory per micro-batch and the best run's JSON line again (last, with a
"sweep" field), as the C++ benchmark's --sweep-micro-batch.
"""

import argparse
import gc
import json
import math
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

# name: (layers, hidden, heads, seq) -- models/gpt2/config.cc
PRESETS = {
    "gpt2-tiny": (4, 128, 4, 128),
    "gpt2-355m": (24, 1024, 16, 1024),
    "gpt2-1.5b": (48, 1600, 16, 1024),
    "gpt2-2.5b": (54, 1920, 20, 1024),
    "gpt2-8.3b": (72, 3072, 32, 1024),
}
# Dense fp16/bf16 peak TFLOP/s -- trainer/throughput.cc
PEAK_TFLOPS = [("H200", 989.0), ("H100", 989.0), ("A100", 312.0), ("V100", 125.0)]

MASK64 = (1 << 64) - 1


def padded_vocab_size(vocab_size, multiple=128):
    return (vocab_size + multiple - 1) // multiple * multiple


def training_flops(batch, seq, layers, hidden, vocab):
    """Megatron's model FLOPs of one iteration (models/gpt2/flops.h)."""
    return 72.0 * batch * seq * layers * hidden**2 * (
        1 + seq / (6.0 * hidden) + vocab / (12.0 * layers * hidden))


def parameter_seed(seed, name):
    """FNV-1a 64 over the 8 little-endian bytes of seed, then the name (models/gpt2/init.cc)."""
    h = 14695981039346656037
    for byte in range(8):
        h ^= (seed >> (8 * byte)) & 0xFF
        h = (h * 1099511628211) & MASK64
    for c in name.encode():
        h ^= c
        h = (h * 1099511628211) & MASK64
    return h


class Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)


class Mlp(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.c_proj = nn.Linear(4 * hidden, hidden)


class Block(nn.Module):
    def __init__(self, hidden, heads, eps, hidden_dropout, attention_dropout):
        super().__init__()
        self.heads = heads
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.ln_1 = nn.LayerNorm(hidden, eps=eps)
        self.attn = Attention(hidden)
        self.ln_2 = nn.LayerNorm(hidden, eps=eps)
        self.mlp = Mlp(hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        context = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.attention_dropout if self.training else 0.0, is_causal=True)
        context = context.transpose(1, 2).reshape(b, s, h)
        x = x + F.dropout(self.attn.c_proj(context), self.hidden_dropout, self.training)
        inner = F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh")
        return x + F.dropout(self.mlp.c_proj(inner), self.hidden_dropout, self.training)


class Gpt2(nn.Module):
    """Parameter names are the C++ model's (models/gpt2/parameter_names.h), lm_head tied."""

    def __init__(self, layers, hidden, heads, positions, vocab, eps, dropout):
        super().__init__()
        self.dropout = dropout
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(positions, hidden)
        self.h = nn.ModuleList(Block(hidden, heads, eps, dropout, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=eps)

    def forward(self, input_ids, position_ids, labels, loss_mask):
        x = F.dropout(self.wte(input_ids) + self.wpe(position_ids), self.dropout, self.training)
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        losses = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), reduction="none")
        mask = loss_mask.flatten().float()
        return (losses * mask).sum() / mask.sum()


@torch.no_grad()
def initialize(model, seed, init_std, layers):
    """models/gpt2/init.h: weights N(0, std), c_proj weights N(0, std / sqrt(2L)), biases 0,
    LayerNorm weights 1; every weight from its own CPU generator seeded by (seed, name)."""
    for name, p in model.named_parameters():
        if name.endswith(".bias"):
            p.zero_()
        elif p.dim() == 1:  # LayerNorm weight
            p.fill_(1.0)
        else:
            std = init_std
            if name.endswith("attn.c_proj.weight") or name.endswith("mlp.c_proj.weight"):
                std /= math.sqrt(2.0 * layers)
            generator = torch.Generator().manual_seed(parameter_seed(seed, name))
            p.normal_(0.0, std, generator=generator)


def make_batches(args, seq, device):
    """The C++ benchmark's batches: k-th draw of randint(0, V, [b, s + 1]) from one generator."""
    generator = torch.Generator().manual_seed(args.seed)
    b = args.batch_size
    batches = []
    for _ in range(args.distinct_batches):
        tokens = torch.randint(0, args.vocab_size, (b, seq + 1), generator=generator)
        batches.append({
            "input_ids": tokens[:, :seq].contiguous().to(device),
            "labels": tokens[:, 1:].contiguous().to(device),
            "position_ids": torch.arange(seq).expand(b, seq).contiguous().to(device),
            "loss_mask": torch.ones(b, seq).to(device),
        })
    return batches


def peak_tflops(args, device):
    if args.peak_tflops > 0:
        return args.peak_tflops
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, tflops in PEAK_TFLOPS:
        if key in name:
            return tflops
    return None


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Trainer:
    def __init__(self, args, model, device):
        self.args = args
        self.model = model
        self.device = device
        self.amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": None}[args.dtype]
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        self.parameters = decay + no_decay
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": args.weight_decay},
             {"params": no_decay, "weight_decay": 0.0}],
            lr=args.lr, betas=(0.9, 0.999), eps=1e-8, fused=device.type == "cuda")
        self.scaler = torch.amp.GradScaler(
            device.type, init_scale=2.0**17, growth_factor=2.0, backoff_factor=0.5,
            growth_interval=1000, enabled=args.dtype == "fp16")
        self.forward = torch.compile(model) if args.mode == "compile" else model

    def step(self, batch):
        """One optimizer step; returns (loss, loss scale used, skipped, grad norm)."""
        chunk = self.args.chunk_size or self.args.batch_size
        total_tokens = batch["loss_mask"].sum()
        loss_sum = torch.zeros((), device=self.device)
        scale = self.scaler.get_scale() if self.scaler.is_enabled() else 1.0
        for start in range(0, self.args.batch_size, chunk):
            micro = {k: v[start:start + chunk] for k, v in batch.items()}
            weight = micro["loss_mask"].sum() / total_tokens
            with torch.autocast(self.device.type, dtype=self.amp_dtype,
                                enabled=self.amp_dtype is not None):
                loss = self.forward(**micro) * weight
            self.scaler.scale(loss).backward()
            loss_sum += loss.detach()
        self.scaler.unscale_(self.optimizer)
        if self.args.clip_grad > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.parameters, self.args.clip_grad,
                                                  foreach=self.device.type == "cuda")
        else:
            norm = torch.linalg.vector_norm(
                torch.stack([p.grad.norm() for p in self.parameters if p.grad is not None]))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        # GradScaler skips a step whose gradients hold inf/NaN and backs the scale off; without
        # it (bf16, fp32) PyTorch applies every step.
        skipped = self.scaler.is_enabled() and self.scaler.get_scale() < scale
        return loss_sum.item(), scale, skipped, norm.item()


def profile_ops(trainer, batches, args, device):
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        synchronize(device)
        start = time.perf_counter()
        for i in range(args.profile_steps):
            trainer.step(batches[i % len(batches)])
        synchronize(device)
        wall_ms = (time.perf_counter() - start) * 1e3
    rows = []
    for event in prof.key_averages():
        us = event.self_device_time_total if device.type == "cuda" else event.self_cpu_time_total
        if us > 0:
            rows.append((event.key, event.count, us / 1e3))
    rows.sort(key=lambda r: (-r[2], r[0]))
    what = "device" if device.type == "cuda" else "host"
    print(f"{what} self time by op ({args.profile_steps} profiled steps, {wall_ms:.1f} ms of wall "
          f"time; torch.profiler key_averages; % of the wall time):")
    print(f"  {'op':<60} {'calls':>8} {'total ms':>12} {'% step':>7}")
    total = sum(r[2] for r in rows)
    for name, calls, ms in rows[:25]:
        name = name if len(name) <= 60 else name[:57] + "..."
        print(f"  {name:<60} {calls:>8} {ms:>12.3f} {100 * ms / wall_ms:>6.1f}%")
    if len(rows) > 25:
        rest = rows[25:]
        label = f"({len(rest)} other ops)"
        print(f"  {label:<60} {sum(r[1] for r in rest):>8} {sum(r[2] for r in rest):>12.3f} "
              f"{100 * sum(r[2] for r in rest) / wall_ms:>6.1f}%")
    print(f"  {'sum':<60} {'':>8} {total:>12.3f} {100 * total / wall_ms:>6.1f}%")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="gpt2-355m", choices=sorted(PRESETS))
    p.add_argument("--mode", default="eager", choices=["eager", "compile"])
    p.add_argument("--device", default="", choices=["", "cuda", "cpu"],
                   help="default: cuda when available")
    p.add_argument("--dtype", default="", choices=["", "fp16", "bf16", "fp32"],
                   help="default: fp16 on cuda, fp32 on cpu")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--chunk-size", type=int, default=0, help="micro-batch (0: the batch size)")
    p.add_argument("--seq-length", type=int, default=0, help="0: the preset's")
    p.add_argument("--steps", type=int, default=50, help="timed steps")
    p.add_argument("--warmup-steps", type=int, default=5, help="untimed steps first")
    p.add_argument("--distinct-batches", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=50257)
    p.add_argument("--lr", type=float, default=1.5e-4)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--clip-grad", type=float, default=1.0)
    p.add_argument("--dropout", type=float, default=-1, help="-1: the preset's (0.1)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--profile-ops", action="store_true")
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--peak-tflops", type=float, default=0,
                   help="device peak for MFU (0: by torch.cuda.get_device_name())")
    p.add_argument("--sweep-micro-batch", action="store_true",
                   help="run micro-batches 1, 2, 4, ... up to --batch-size (until one runs out "
                   "of memory) and report the best (ignores --chunk-size)")
    args = p.parse_args(argv)
    for name in ("batch_size", "steps", "distinct_batches", "vocab_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}={getattr(args, name)} must be at least 1")
    for name in ("chunk_size", "seq_length", "warmup_steps", "seed", "profile_steps"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')}={getattr(args, name)} must be >= 0")
    if args.chunk_size > args.batch_size:
        p.error(f"--chunk-size={args.chunk_size} exceeds --batch-size={args.batch_size}: a "
                "micro-batch holds at most the whole batch")
    if not (args.dropout == -1 or 0 <= args.dropout < 1):
        p.error(f"--dropout={args.dropout} is not a probability in [0, 1) (or -1 for the preset's)")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device=cuda: PyTorch sees no CUDA device; use --device=cpu")
    return args


def benchmark(args, device):
    """One run on a fresh model at micro-batch args.chunk_size; prints and returns its JSON."""
    layers, hidden, heads, seq = PRESETS[args.preset]
    seq = args.seq_length or seq
    positions = max(PRESETS[args.preset][3], seq)
    dropout = 0.1 if args.dropout < 0 else args.dropout
    vocab = padded_vocab_size(args.vocab_size)
    torch.manual_seed(args.seed)

    model = Gpt2(layers, hidden, heads, positions, vocab, 1e-5, dropout)
    initialize(model, args.seed, 0.02, layers)
    model.to(device).train()
    trainer = Trainer(args, model, device)
    batches = make_batches(args, seq, device)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    impl = f"pytorch-{args.mode}"
    chunk = args.chunk_size or args.batch_size
    print(f"{impl}: {args.preset} ({layers} layers, hidden {hidden}, {heads} heads, vocab {vocab} "
          f"padded), {args.dtype} ({'autocast' if args.dtype != 'fp32' else 'no autocast'}) on "
          f"{device_name}, attention sdpa, torch {torch.__version__}\n"
          f"  batch {args.batch_size} x {seq} tokens in micro-batches of {chunk}\n"
          f"  data: {args.distinct_batches} fixed batches of random tokens (seed {args.seed}), "
          f"cycled so the loss falls as the model memorises them; AdamW lr {args.lr:g}, weight "
          f"decay {args.weight_decay:g}, clip {args.clip_grad:g}, dropout {dropout:g}", flush=True)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    losses, skipped_steps = [], []
    total = args.warmup_steps + args.steps
    start = None
    for i in range(total):
        if i == args.warmup_steps:
            synchronize(device)
            start = time.perf_counter()
        t0 = time.perf_counter()
        loss, scale, skipped, norm = trainer.step(batches[i % len(batches)])
        ms = (time.perf_counter() - t0) * 1e3
        losses.append(loss)
        if skipped:
            skipped_steps.append(i + 1)
        warm = " (warm-up)" if i < args.warmup_steps else ""
        print(f"step {i + 1:3d}/{total}{warm} loss {loss:.4f}  loss scale {scale:g}  "
              f"{'SKIPPED (inf/NaN)' if skipped else 'applied'}  grad norm {norm:.3f}  "
              f"{ms:.1f} ms", flush=True)
    synchronize(device)
    step_s = (time.perf_counter() - start) / args.steps

    flops = training_flops(args.batch_size, seq, layers, hidden, vocab)
    tflops = flops / step_s / 1e12
    peak = peak_tflops(args, device)
    mfu = tflops / peak if peak else None
    tokens_per_s = args.batch_size * seq / step_s
    memory = torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None
    skipped_text = f" (steps {','.join(map(str, skipped_steps))})" if skipped_steps else ""
    mfu_text = (f"{100 * mfu:.1f}% of {peak:.0f} TFLOP/s" if mfu is not None
                else "unknown (no peak for this device: pass --peak-tflops)")
    memory_text = f"{memory:.2f} GB" if memory is not None else "n/a (CPU)"
    print(f"{args.preset} {args.dtype} on {device_name}: batch {args.batch_size} x {seq} tokens "
          f"(micro-batch {chunk}), {args.steps} timed steps: {step_s * 1e3:.1f} ms/step, "
          f"{tokens_per_s:.0f} tokens/s, {tflops:.2f} TFLOP/s (model), MFU {mfu_text}; loss "
          f"{losses[0]:.4f} -> {losses[-1]:.4f}; {len(skipped_steps)} skipped step(s)"
          f"{skipped_text}; peak memory {memory_text}")
    result = {
        "impl": impl, "preset": args.preset, "dtype": args.dtype, "device": device_name,
        "attention": "sdpa", "batch": args.batch_size, "micro_batch": chunk, "seq": seq,
        "steps": args.steps, "warmup_steps": args.warmup_steps, "tokens_per_s": tokens_per_s,
        "tflops": tflops, "mfu": mfu, "hw_tflops": tflops, "peak_tflops": peak,
        "step_ms": step_s * 1e3, "losses": [losses[0], losses[-1]],
        "skipped": len(skipped_steps),
        "last_skipped_step": skipped_steps[-1] if skipped_steps else 0,
        "peak_memory_gb": memory, "torch": torch.__version__,
    }
    print(json.dumps(result, separators=(",", ":")), flush=True)
    if args.profile_ops and args.profile_steps > 0:
        profile_ops(trainer, batches, args, device)
    return result


def release_memory(device):
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def sweep_micro_batch(args, device):
    """--sweep-micro-batch: benchmark() at 1, 2, 4, ... and the batch size, until out of memory."""
    sizes = []
    size = 1
    while size < args.batch_size:
        sizes.append(size)
        size *= 2
    sizes.append(args.batch_size)
    sweep, best, lines = [], None, []
    for size in sizes:
        args.chunk_size = size
        release_memory(device)
        print(f"\n==== micro-batch {size} of {args.batch_size}", flush=True)
        result, out_of_memory = None, None
        try:
            result = benchmark(args, device)
        except torch.OutOfMemoryError as e:
            out_of_memory = str(e).split("\n")[0]
        release_memory(device)  # outside the except block, which holds the failed run's frames
        if out_of_memory is not None:
            print(f"micro-batch {size}: out of device memory ({out_of_memory}); larger ones are "
                  "not tried", flush=True)
            sweep.append({"micro_batch": size, "error": "out of memory"})
            lines.append(f"  {size:>11}  {'out of memory':>12}")
            break
        memory = result["peak_memory_gb"]
        sweep.append({"micro_batch": size, "tokens_per_s": result["tokens_per_s"],
                      "step_ms": result["step_ms"], "peak_memory_gb": memory})
        memory_text = "n/a (CPU)" if memory is None else f"{memory:.2f}"
        lines.append(f"  {size:>11}  {result['tokens_per_s']:>12.0f}  {result['step_ms']:>10.1f}"
                     f"  {memory_text:>10}")
        if best is None or result["tokens_per_s"] > best["tokens_per_s"]:
            best = result
    if best is None:
        print("--sweep-micro-batch: even micro-batch 1 ran out of device memory", file=sys.stderr)
        return 1
    print(f"\nmicro-batch sweep, {args.preset} {args.dtype}, batch {args.batch_size} (tokens/s "
          "of the timed steps; peak memory in GB):\n"
          "  micro-batch      tokens/s     step ms     peak GB")
    print("\n".join(lines))
    print(f"best: micro-batch {best['micro_batch']}, {best['tokens_per_s']:.0f} tokens/s")
    best["sweep"] = sweep
    print(json.dumps(best, separators=(",", ":")), flush=True)
    return 0


def main(argv):
    args = parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    args.dtype = args.dtype or ("fp16" if device.type == "cuda" else "fp32")
    if args.sweep_micro_batch:
        return sweep_micro_batch(args, device)
    benchmark(args, device)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
