#include "model/arch.h"

namespace rapid::model {

// Gemma 3 text: (1+w) RMSNorms, a norm after attention and around the MLP, GELU-tanh MLP,
// embeddings scaled by sqrt(hidden), q/k norms, scale 1/sqrt(query_pre_attn_scalar), and
// interleaved sliding-window layers with their own RoPE base.
ArchSpec gemma3_arch() {
  ArchSpec s;
  s.name = "gemma3";
  s.qk_norm = true;
  s.norm_add_one = true;
  s.sandwich_norms = true;
  s.scale_embeddings = true;
  s.query_pre_attn_scalar = true;
  s.local_rope_base = true;
  s.act = Activation::GeluTanh;
  return s;
}

}  // namespace rapid::model
