// How architectures are described. Most decoders differ only in a few switches over shared
// layers (ArchSpec → DecoderModel); an architecture with a different block structure (hybrid
// linear attention, MoE, MTP heads) adds its own Model subclass and one line in model.cpp.
#pragma once
#include <memory>
#include <string>

#include "compute/matmul.h"
#include "model/model.h"

namespace rapid::model {

struct ModelOptions {
  int num_threads = 0;                 // 0 → all cores
  compute::MatmulPath matmul = compute::MatmulPath::Fast;
  tensor::DType kv_dtype = tensor::DType::F16;         // F16 (default), BF16 or F32
  // Qwen3.5: prefill runs of >= 16 tokens through the chunk-parallel DeltaNet form. Off by default:
  // on AVX2 it is slower than the recurrence so far (bench/compute_gated_delta_bench).
  bool chunked_deltanet = false;
};

enum class Activation { Silu, GeluTanh };

struct ArchSpec {
  std::string name;
  bool qkv_bias = false;          // q/k/v projections carry a bias (Qwen2)
  bool qk_norm = false;           // per-head RMSNorm of q and k before RoPE (Qwen3, Gemma 3)
  bool norm_add_one = false;      // RMSNorm scales by (1 + w) (Gemma)
  bool sandwich_norms = false;    // extra post-attention / pre+post-feedforward norms (Gemma 3)
  bool scale_embeddings = false;  // embeddings × sqrt(hidden_size) (Gemma)
  bool query_pre_attn_scalar = false;  // attention scale from config.query_pre_attn_scalar
  bool local_rope_base = false;   // sliding layers use config.rope_local_base_freq, no scaling
  Activation act = Activation::Silu;
  bool attn_sinks = false;        // self_attn.sinks: a per-head logit in the softmax (gpt-oss)
  bool gpt_oss_moe = false;       // MoE MLPs in gpt-oss's form (MoeShape::gpt_oss)
};

ArchSpec llama_arch();   // llama, mistral (SmolLM2, Llama 2/3.x)
ArchSpec qwen2_arch();
ArchSpec qwen3_arch();
ArchSpec qwen3_moe_arch();
ArchSpec gemma3_arch();
ArchSpec gpt_oss_arch();

std::unique_ptr<Model> make_decoder_model(std::shared_ptr<Checkpoint> ckpt, const ArchSpec& spec,
                                          const ModelOptions& opts);

// Qwen3.5 hybrid (Gated DeltaNet + gated full attention; dense or MoE MLPs), model/qwen3_5.cpp.
std::unique_ptr<Model> make_qwen3_5_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts);

// Gemma 4 text (per-layer head sizes, kv-shared layers, per-layer inputs), model/gemma4.cpp.
std::unique_ptr<Model> make_gemma4_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts);

// GLM-4.7-Flash (multi-head latent attention, DeepSeek-V3-routed experts), model/glm4_moe_lite.cpp.
std::unique_ptr<Model> make_glm4_moe_lite_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts);

// create_model with explicit options (threads, exact f32 path, KV dtype).
std::unique_ptr<Model> create_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts);

}  // namespace rapid::model
