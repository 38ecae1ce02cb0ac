#include "trainer/megatron_flags.h"

#include "absl/strings/str_cat.h"

namespace trainer {
namespace {

constexpr char kModelParallel[] =
    "Varuna splits the model into pipeline stages at cut points and replicates each stage for "
    "data parallelism; there is no tensor parallelism. Start a pipeline with //varuna:launch "
    "--nstages=P, or give --stage_to_rank_map";
constexpr char kDenseGpt2[] =
    "the model here is GPT-2 as in Megatron-LM of the Varuna era (dense, learned position "
    "embeddings, LayerNorm, GeLU MLP of 4 x hidden, multi-head attention, tied embedding and "
    "LM head): drop the flag";
constexpr char kMixtureOfExperts[] =
    "mixture-of-experts layers are not implemented: the GPT-2 MLP here is dense";

}  // namespace

const std::vector<UnsupportedMegatronFlag>& UnsupportedMegatronFlags() {
  static const auto* flags = new std::vector<UnsupportedMegatronFlag>{
      // Parallelism.
      {"tensor-model-parallel-size", kModelParallel},
      {"sequence-parallel", "it needs tensor parallelism, which Varuna does not have"},
      {"context-parallel-size", kModelParallel},
      {"pipeline-model-parallel-size",
       "the pipeline is Varuna's: start it with //varuna:launch --nstages=P (it sets "
       "--stage_to_rank_map for each worker), or give --stage_to_rank_map yourself"},
      {"virtual-pipeline-model-parallel-size",
       "the interleaved schedule is not implemented: use --schedule=varuna (recompute), 1f1b "
       "or gpipe"},
      {"num-layers-per-virtual-pipeline-stage",
       "the interleaved schedule is not implemented: use --schedule=varuna (recompute), 1f1b "
       "or gpipe"},
      {"tp-comm-overlap", "it needs tensor parallelism, which Varuna does not have"},
      {"expert-model-parallel-size", kMixtureOfExperts},
      {"expert-tensor-parallel-size", kMixtureOfExperts},
      {"num-experts", kMixtureOfExperts},
      {"moe-router-topk", kMixtureOfExperts},
      {"use-distributed-optimizer",
       "the optimizer state is not sharded over the replicas: each replica keeps its stage's "
       "full Adam state"},
      {"overlap-param-gather", "it needs the distributed optimizer, which is not implemented"},
      {"use-torch-fsdp2", "FSDP is not implemented: use pipeline stages to fit a large model"},
      {"deepspeed", "this trainer is not DeepSpeed's: drop the DeepSpeed flags"},
      {"zero-stage", "ZeRO (DeepSpeed's sharded optimizer) is not implemented"},
      // Model families and layer implementations.
      {"use-mcore-models", kDenseGpt2},
      {"use-legacy-models", kDenseGpt2},
      {"transformer-impl",
       "the layers are this project's own (LibTorch and its fused kernels); there is no "
       "Transformer Engine: drop the flag"},
      {"use-flash-attn",
       "use --attention-backend=sdpa (LibTorch's attention, which picks a flash kernel on a GPU "
       "where it can) or --attention-backend=auto"},
      {"position-embedding-type", kDenseGpt2},
      {"use-rotary-position-embeddings", kDenseGpt2},
      {"normalization", kDenseGpt2},
      {"swiglu", kDenseGpt2},
      {"squared-relu", kDenseGpt2},
      {"untie-embeddings-and-output-weights", kDenseGpt2},
      {"group-query-attention", kDenseGpt2},
      {"num-query-groups", kDenseGpt2},
      {"ffn-hidden-size", kDenseGpt2},
      {"kv-channels", kDenseGpt2},
      {"disable-bias-linear", kDenseGpt2},
      {"apply-layernorm-1p", kDenseGpt2},
      // Data, batch ramp-up, loggers.
      {"mock-data",
       "for data without files, leave --data-path out: the trainer then trains on its bundled "
       "sample corpus"},
      {"vocab-extra-ids",
       "T5's sentinel tokens: the GPT-2 vocabularies here (SentencePiece or GPT-2's BPE) have "
       "none"},
      {"rampup-batch-size", "a batch size ramp-up is not implemented: the batch is fixed"},
      {"dataloader-type",
       "the data is read in the training process, from the memory-mapped dataset, in Megatron's "
       "sample order (its 'single' loader): drop the flag"},
      {"num-workers",
       "the data is read in the training process, from the memory-mapped dataset: drop the "
       "flag"},
      {"wandb-project",
       "Weights & Biases is not supported: use --tensorboard-dir or --metrics-file"},
      {"wandb-exp-name",
       "Weights & Biases is not supported: use --tensorboard-dir or --metrics-file"},
  };
  return *flags;
}

std::string UnsupportedMegatronFlagMessage(const UnsupportedMegatronFlag& flag) {
  return absl::StrCat("Megatron's --", flag.name, " is not supported here: ", flag.reason);
}

void RefuseUnsupportedMegatronFlags(varuna::FlagParser& parser) {
  for (const UnsupportedMegatronFlag& flag : UnsupportedMegatronFlags()) {
    parser.Refuse(flag.name, UnsupportedMegatronFlagMessage(flag));
  }
}

}  // namespace trainer
