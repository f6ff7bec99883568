#include "model/arch.h"

namespace rapid::model {

// Llama layout with biases on the q/k/v projections.
ArchSpec qwen2_arch() {
  ArchSpec s;
  s.name = "qwen2";
  s.qkv_bias = true;
  return s;
}

// Llama layout with a per-head RMSNorm on q and k (no biases).
ArchSpec qwen3_arch() {
  ArchSpec s;
  s.name = "qwen3";
  s.qk_norm = true;
  return s;
}

// Qwen3 attention with mixture-of-experts MLPs (model/moe.h) in the layers the config routes.
ArchSpec qwen3_moe_arch() {
  ArchSpec s = qwen3_arch();
  s.name = "qwen3_moe";
  return s;
}

}  // namespace rapid::model
