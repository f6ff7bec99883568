// GGUF tensor names/layouts → HF names/layouts.
#pragma once
#include <string>

#include "model/gguf.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace rapid::model {

// "blk.3.attn_q.weight" → "model.layers.3.self_attn.q_proj.weight" (architecture-aware for the
// gemma3 norms, qwen3_5's Gated DeltaNet tensors: "blk.0.ssm_a" → "...linear_attn.A_log", and
// gpt_oss's sinks, router and biased experts: "blk.0.ffn_gate_exps.bias" → "...mlp.experts.gate_proj.bias",
// glm4_moe_lite's latent attention and routing from deepseek2 files: "blk.1.attn_k_b.weight" →
// "...self_attn.embed_q.weight", "blk.1.exp_probs_b.bias" → "...mlp.gate.e_score_correction_bias").
// Names without an HF counterpart are returned unchanged.
// trunk_layers (qwen3_5 / qwen3_next, >= 0): blocks from there on are the MTP head that llama.cpp's
// converter appends (nextn_predict_layers): "blk.<L+i>.attn_q.weight" → "mtp.layers.<i>.self_attn.q_proj.weight",
// and block L's "nextn.eh_proj" / "nextn.enorm" / "nextn.hnorm" / "nextn.shared_head_norm" →
// "mtp.fc" / "mtp.pre_fc_norm_embedding" / "mtp.pre_fc_norm_hidden" / "mtp.norm".
std::string gguf_to_hf_name(const std::string& gguf_name, const std::string& arch, int64_t trunk_layers = -1);

// Whether llama.cpp's converter permuted the Q/K rows of this architecture (it does so for the
// llama family, ministral3's mistral3 files included, so it can use interleaved RoPE; Qwen and
// Gemma keep HF's rotate_half layout).
bool gguf_arch_permutes_qk(const std::string& arch);

// Adds every tensor of `g` to `store` under its HF name, undoing the "+1" norm offset of gemma3 and
// qwen3_5 / qwen3_next and their A = -exp(A_log), and splitting qwen3_next's fused ssm_ba into
// in_proj_b / in_proj_a (copies only those small tensors; the rest stay views of the mapping). Permuted Q/K rows are kept as
// stored (the caller sets Checkpoint::rope_interleaved_qk from gguf_arch_permutes_qk).
void add_gguf_tensors(const GgufFile& g, const ModelConfig& cfg, WeightStore& store);

}  // namespace rapid::model
