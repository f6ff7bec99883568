#include "model/arch.h"

namespace rapid::model {

// gpt-oss: biases on q/k/v/o, a learned attention sink per head, sliding-window layers alternating
// with full ones (layer_types), and MoE MLPs in every layer with a biased router whose weights are a
// softmax over the top-k logits, biased experts and the clamped SwiGLU (model/moe.h).
ArchSpec gpt_oss_arch() {
  ArchSpec s;
  s.name = "gpt_oss";
  s.qkv_bias = true;
  s.attn_sinks = true;
  s.gpt_oss_moe = true;
  return s;
}

}  // namespace rapid::model
