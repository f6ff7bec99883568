// Weight loaders against their reference implementations: gguf-py (GGML dequantization),
// mlx.core / mlx_lm (MLX affine packing and quantization), transformers (GGUF de-permutation,
// config), via the goldens written by scripts/make_loader_goldens.py and make_tiny_models.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"
#include "model/config_load.h"
#include "model/convert.h"
#include "model/gguf.h"
#include "model/gguf_names.h"
#include "model/mlx_quant.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tensor/dequantize.h"
#include "tensor/mlx_affine.h"
#include "resident_bytes.h"
#include <unistd.h>
#include <filesystem>

// Per-process scratch folder: CTest runs the cases of this file as parallel processes, and two
// cases writing the same temp name would truncate a file the other has mapped (SIGBUS).
static std::string scratch_dir() {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "/rapid_" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

using namespace rapid;
using namespace rapid::model;
namespace fs = std::filesystem;

static const std::string kGolden = std::string(RAPID_SOURCE_DIR) + "/tests/golden/model_loader/";
static const std::string kTiny = std::string(RAPID_SOURCE_DIR) + "/tests/golden/tiny/";

static std::string model_cache() {
  const char* c = std::getenv("RAPID_MODEL_CACHE");
  if (c && *c) return c;
  const char* h = std::getenv("HOME");
  return std::string(h ? h : "/root") + "/.cache/rapid-mlx/models";
}

static std::map<std::string, tensor::Tensor> by_name(const SafetensorsFile& f) {
  std::map<std::string, tensor::Tensor> m;
  for (auto& t : f.tensors) m[t.name] = t;
  return m;
}

static std::vector<float> row(const tensor::Tensor& t, int64_t r) {
  std::vector<float> v(size_t(t.cols()));
  tensor::dequantize_row(t, r, v.data());
  return v;
}

// Row r in HF order (GGUF llama Q/K tensors are loaded in pair order, see rope_interleaved_qk).
static std::vector<float> hf_row(const Checkpoint& ck, const tensor::Tensor& t, int64_t r) {
  std::vector<float> v(size_t(t.cols()));
  dequantize_hf_row(ck, t, r, v.data());
  return v;
}

static const float* f32(const tensor::Tensor& t) { return static_cast<const float*>(t.data); }

// ---------------------------------------------------------------- GGML block formats vs gguf-py

TEST(GgufDequant, EveryTypeMatchesGgufPy) {
  GgufFile g = read_gguf(kGolden + "ggml_types.gguf");
  auto expected = read_safetensors(kGolden + "ggml_types_expected.safetensors");
  auto exp = by_name(expected);
  int checked = 0;
  for (auto& t : g.tensors) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(exp.count(t.name));
    const tensor::Tensor& e = exp[t.name];
    ASSERT_EQ(t.shape, e.shape);
    for (int64_t r = 0; r < t.rows(); ++r) {
      auto got = row(t, r);
      const float* want = f32(e) + r * t.cols();
      for (int64_t c = 0; c < t.cols(); ++c)
        ASSERT_NEAR(got[c], want[c], 1e-6f * std::max(1.0f, std::fabs(want[c]))) << "row " << r << " col " << c;
    }
    ++checked;
  }
  // F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS, and the lattice
  // types IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M
  EXPECT_EQ(checked, 22);
}

TEST(GgufReader, MetadataOfAllKinds) {
  GgufFile g = read_gguf(kGolden + "ggml_types.gguf");
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.get_string("general.architecture"), "test");
  EXPECT_EQ(g.get_int("test.some_u32", 0), 7);
  EXPECT_EQ(g.get_string("test.str"), "h\xc3\xa9llo");
  auto* nested = g.get("test.nested");
  ASSERT_TRUE(nested && nested->is_array());
  EXPECT_EQ(nested->dump(), "[[1,2],[3]]");
  EXPECT_EQ(g.alignment, 32u);
  EXPECT_EQ(g.data_offset % 32, 0u);
  // Data of consecutive tensors is aligned (offsets are relative to the data section).
  for (auto& t : g.tensors)
    EXPECT_EQ((static_cast<const uint8_t*>(t.data) - g.file->data() - g.data_offset) % 32, 0) << t.name;
}

// ------------------------------------------------------------------------ MLX affine vs mlx.core

TEST(MlxQuant, DequantizeAndQuantizeMatchMlx) {
  auto f = read_safetensors(kGolden + "mlx_quant.safetensors");
  auto m = by_name(f);
  int checked = 0;
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    for (int g : {32, 64, 128}) {
      std::string k = "b" + std::to_string(bits) + "g" + std::to_string(g);
      SCOPED_TRACE(k);
      const tensor::Tensor &w = m.at(k + ".w"), &wq = m.at(k + ".weight"), &s = m.at(k + ".scales"),
                   &b = m.at(k + ".biases"), &e = m.at(k + ".expected");
      ASSERT_EQ(wq.dtype, tensor::DType::U32);
      tensor::Tensor q = wq;
      q.dtype = tensor::DType::MLX_AFFINE;
      q.shape = w.shape;
      q.bits = bits;
      q.group_size = g;
      q.group_dtype = tensor::DType::F32;
      q.scales = s.data;
      q.biases = b.data;
      int64_t cols = w.cols();
      ASSERT_EQ(int64_t(wq.nbytes), w.rows() * tensor::mlx::packed_row_bytes(cols, bits));
      for (int64_t r = 0; r < w.rows(); ++r) {
        auto got = row(q, r);
        for (int64_t c = 0; c < cols; ++c) ASSERT_FLOAT_EQ(got[c], f32(e)[r * cols + c]) << r << "," << c;
        // Our quantizer reproduces mlx.core.quantize bit for bit.
        std::vector<uint8_t> packed(size_t(tensor::mlx::packed_row_bytes(cols, bits)));
        std::vector<float> sc(size_t(cols / g)), bi(size_t(cols / g));
        tensor::mlx::quantize_row(f32(w) + r * cols, cols, bits, g, packed.data(), sc.data(), bi.data());
        EXPECT_EQ(std::memcmp(packed.data(), static_cast<const uint8_t*>(wq.data) + r * packed.size(), packed.size()), 0)
            << "packed row " << r;
        for (int64_t j = 0; j < cols / g; ++j) {
          EXPECT_EQ(sc[j], f32(s)[r * (cols / g) + j]);
          EXPECT_EQ(bi[j], f32(b)[r * (cols / g) + j]);
        }
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18);
}

TEST(MlxQuant, Bf16ScalesMatchMlx) {
  auto f = read_safetensors(kGolden + "mlx_quant.safetensors");
  auto m = by_name(f);
  const tensor::Tensor &wq = m.at("bf16.weight"), &e = m.at("bf16.expected");
  tensor::Tensor q = wq;
  q.dtype = tensor::DType::MLX_AFFINE;
  q.shape = e.shape;
  q.bits = 4;
  q.group_size = 64;
  ASSERT_EQ(m.at("bf16.scales").dtype, tensor::DType::BF16);
  q.group_dtype = tensor::DType::BF16;
  q.scales = m.at("bf16.scales").data;
  q.biases = m.at("bf16.biases").data;
  for (int64_t r = 0; r < q.rows(); ++r) {
    auto got = row(q, r);
    for (int64_t c = 0; c < q.cols(); ++c) ASSERT_NEAR(got[c], f32(e)[r * q.cols() + c], 1e-6f);
  }
}

TEST(MlxQuant, QuantConfigOverrides) {
  auto j = nlohmann::json::parse(R"({"quantization": {"group_size": 64, "bits": 4,
      "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8}, "lm_head": false}})");
  auto qc = mlx::parse_quant_config(j);
  ASSERT_TRUE(qc);
  EXPECT_EQ(qc->for_module("model.layers.1.mlp.down_proj")->bits, 4);
  EXPECT_EQ(qc->for_module("model.layers.0.mlp.down_proj")->bits, 8);
  EXPECT_EQ(qc->for_module("model.layers.0.mlp.down_proj")->group_size, 32);
  EXPECT_FALSE(qc->for_module("lm_head").has_value());
  EXPECT_THROW(mlx::parse_quant_config(nlohmann::json::parse(R"({"quantization": {"bits": 7}})")), Error);
  EXPECT_FALSE(mlx::parse_quant_config(nlohmann::json::parse(R"({"hidden_size": 4})")));
}

// mlx-lm's mode "mxfp4" config (as quantize_model writes gpt_oss's: routers overridden without a
// mode, which mlx's nn.quantize hands to to_quantized and so quantizes affine), other modes and
// MXFP4 geometries refused, and a transformers "mxfp4" quantization_config left to the gpt-oss loader.
TEST(MlxQuant, Mxfp4ModeAndOverrides) {
  auto qc = mlx::parse_quant_config(nlohmann::json::parse(R"({"quantization": {"group_size": 32, "bits": 4,
      "mode": "mxfp4", "model.layers.0.mlp.router": {"group_size": 64, "bits": 8}}})"));
  ASSERT_TRUE(qc);
  auto e = qc->for_module("model.layers.0.mlp.experts.down_proj");
  EXPECT_TRUE(e->mxfp4);
  EXPECT_EQ(e->bits, 4);
  EXPECT_EQ(e->group_size, 32);
  auto r = qc->for_module("model.layers.0.mlp.router");
  EXPECT_FALSE(r->mxfp4);
  EXPECT_EQ(r->bits, 8);
  EXPECT_EQ(r->group_size, 64);
  for (const char* bad : {R"({"quantization": {"group_size": 64, "bits": 4, "mode": "mxfp4"}})",
                          R"({"quantization": {"group_size": 32, "bits": 8, "mode": "mxfp4"}})",
                          R"({"quantization": {"group_size": 32, "bits": 4, "mode": "nvfp4"}})"})
    EXPECT_THROW(mlx::parse_quant_config(nlohmann::json::parse(bad)), Error) << bad;
  EXPECT_FALSE(mlx::parse_quant_config(nlohmann::json::parse(
      R"({"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["router"]}})")));
}

// An mlx_lm.convert -q checkpoint loads as MLX_AFFINE tensors, and our quantizer applied to the
// original f32 weights reproduces mlx_lm's bytes exactly (so `convert --quantize` is faithful).
TEST(MlxCheckpoint, LoadsMlxLmConvertOutput) {
  auto ck = load_checkpoint(kGolden + "tiny-llama-mlx-q4");
  auto orig = load_checkpoint(kTiny + "llama");
  EXPECT_EQ(ck->config.hidden_size, 64);
  int quantized = 0;
  for (auto& [name, t] : ck->weights.all()) {
    const tensor::Tensor& o = orig->weights.get(name);
    EXPECT_EQ(t.shape, o.shape) << name;
    if (t.dtype != tensor::DType::MLX_AFFINE) {
      EXPECT_EQ(t.dtype, tensor::DType::F32) << name;
      continue;
    }
    ++quantized;
    EXPECT_EQ(t.bits, 4);
    EXPECT_EQ(t.group_size, 64);
    int64_t cols = t.cols(), ng = cols / 64;
    for (int64_t r = 0; r < t.rows(); ++r) {
      std::vector<uint8_t> packed(size_t(tensor::mlx::packed_row_bytes(cols, 4)));
      std::vector<float> sc(static_cast<size_t>(ng)), bi(static_cast<size_t>(ng));
      tensor::mlx::quantize_row(f32(o) + r * cols, cols, 4, 64, packed.data(), sc.data(), bi.data());
      ASSERT_EQ(std::memcmp(packed.data(), static_cast<const uint8_t*>(t.data) + r * packed.size(), packed.size()), 0)
          << name << " row " << r;
      ASSERT_EQ(t.group_dtype, tensor::DType::F32);
      // The loader hands out aligned data even though mlx_lm's file leaves it unaligned.
      ASSERT_EQ(reinterpret_cast<uintptr_t>(t.scales) % 4, 0u);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(t.data) % 4, 0u);
      for (int64_t j = 0; j < ng; ++j) {
        EXPECT_EQ(sc[size_t(j)], static_cast<const float*>(t.scales)[r * ng + j]);
        EXPECT_EQ(bi[size_t(j)], static_cast<const float*>(t.biases)[r * ng + j]);
      }
      // Affine rounding error is at most one quantization step (clipping at the far edge).
      auto got = row(t, r);
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_LE(std::fabs(got[c] - f32(o)[r * cols + c]), std::fabs(sc[size_t(c / 64)]) + 1e-6f);
    }
  }
  EXPECT_EQ(quantized, 2 * 7 + 2);  // 7 Linear per layer + embed + lm_head
  EXPECT_EQ(ck->weights.all().size(), orig->weights.all().size());
}

// mlx_lm's safetensors leave the tensor data misaligned, so the loader copies it; the copied bytes
// must then leave the file mapping's resident set, or an MLX checkpoint is resident twice (it was:
// a Qwen3.5-0.8B-shaped MLX 4-bit model peaked at 950 MB over 472 MB of weights). Only the header's
// pages, which the parser read, may stay.
TEST(MlxCheckpoint, MisalignedTensorsAreNotResidentTwice) {
  const std::string file = fs::canonical(kGolden + "tiny-llama-mlx-q4/model.safetensors").string();
  auto ck = load_checkpoint(kGolden + "tiny-llama-mlx-q4");
  uint64_t header = 0;
  std::ifstream(file, std::ios::binary).read(reinterpret_cast<char*>(&header), 8);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  ASSERT_GT(fs::file_size(file), 8 * page);  // else the check below could not tell
  for (auto& [name, t] : ck->weights.all()) ASSERT_EQ(reinterpret_cast<uintptr_t>(t.data) % 4, 0u) << name;
  EXPECT_LE(test_mem::resident_bytes_of(file), (8 + header + page - 1) / page * page + page);
  // The aligned tensors are copied as well: a read of one left in the mapping would map the
  // page-cache folio around it (up to 2 MB on Linux 6.18), its copied neighbours included (a
  // Qwen3.5-0.8B-shaped MLX 4-bit model ran 50 MB over its weights so).
  for (auto& [name, t] : ck->weights.all()) {
    EXPECT_EQ(ck->weights.mapping_of(t.data), nullptr) << name;
    if (t.scales) EXPECT_EQ(ck->weights.mapping_of(t.scales), nullptr) << name;
    if (t.biases) EXPECT_EQ(ck->weights.mapping_of(t.biases), nullptr) << name;
  }
}

// ----------------------------------------------------------------------- HF configs and weights

TEST(HfCheckpoint, TinyModelsLoadWithConfigs) {
  for (std::string arch : {"llama", "qwen2", "qwen3", "gemma3"}) {
    SCOPED_TRACE(arch);
    auto ck = load_checkpoint(kTiny + arch);
    auto raw = nlohmann::json::parse(read_file(kTiny + arch + "/config.json"));
    const ModelConfig& c = ck->config;
    EXPECT_EQ(c.architecture, arch);
    EXPECT_EQ(c.hidden_size, raw["hidden_size"].get<int64_t>());
    EXPECT_EQ(c.num_hidden_layers, raw["num_hidden_layers"].get<int64_t>());
    EXPECT_EQ(c.num_key_value_heads, raw["num_key_value_heads"].get<int64_t>());
    EXPECT_EQ(c.vocab_size, raw["vocab_size"].get<int64_t>());
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, raw["rms_norm_eps"].get<double>());
    EXPECT_EQ(c.tie_word_embeddings, raw["tie_word_embeddings"].get<bool>());
    EXPECT_EQ(c.head_dim, raw.value("head_dim", c.hidden_size / c.num_attention_heads));
    const tensor::Tensor& emb = ck->weights.get("model.embed_tokens.weight");
    EXPECT_EQ(emb.shape, (std::vector<int64_t>{256, 64}));
    EXPECT_EQ(emb.dtype, arch == "llama" ? tensor::DType::F32 : tensor::DType::BF16);
    EXPECT_EQ(ck->weights.find("lm_head.weight") != nullptr, !c.tie_word_embeddings);
    const tensor::Tensor& q = ck->weights.get("model.layers.1.self_attn.q_proj.weight");
    EXPECT_EQ(q.shape, (std::vector<int64_t>{c.num_attention_heads * c.head_dim, 64}));
  }
  auto g = load_checkpoint(kTiny + "gemma3")->config;
  EXPECT_EQ(g.layer_is_sliding, (std::vector<bool>{true, false}));
  EXPECT_EQ(g.sliding_window, 4);
  EXPECT_DOUBLE_EQ(g.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(g.rope_local_base_freq, 1e4);
  EXPECT_DOUBLE_EQ(g.query_pre_attn_scalar, 32);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_EQ(g.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(load_checkpoint(kTiny + "qwen2")->config.attention_bias);
  EXPECT_DOUBLE_EQ(load_checkpoint(kTiny + "qwen3")->config.rope_theta, 1e6);
}

TEST(HfConfig, OlderConfigFormsAndGenerationConfig) {
  auto cfg = nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 8192,
    "rope_theta": 500000.0, "tie_word_embeddings": true, "eos_token_id": 128001, "bos_token_id": 128000,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  auto gen = nlohmann::json::parse(R"({"eos_token_id": [128001, 128008, 128009], "temperature": 0.6, "top_p": 0.9})");
  ModelConfig c = config_from_hf(cfg, gen);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_DOUBLE_EQ(*c.temperature, 0.6);
  // Multimodal wrapper: the LM lives in text_config.
  auto mm = nlohmann::json::parse(R"({"model_type": "gemma3", "eos_token_id": [1, 106],
    "text_config": {"model_type": "gemma3_text", "hidden_size": 640, "num_hidden_layers": 12,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "sliding_window_pattern": 6,
    "rope_local_base_freq": 10000.0, "rope_theta": 1000000.0, "query_pre_attn_scalar": 256}})");
  ModelConfig g = config_from_hf(mm);
  EXPECT_EQ(g.architecture, "gemma3");
  EXPECT_TRUE(g.tie_word_embeddings);
  ASSERT_EQ(g.layer_is_sliding.size(), 12u);
  EXPECT_FALSE(g.layer_is_sliding[5]);
  EXPECT_TRUE(g.layer_is_sliding[6]);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_THROW(config_from_hf(nlohmann::json::parse(R"({"model_type": "llama"})")), Error);
}

// A config shaped like Devstral Small 2's (the mistral3 wrapper): the LM's model_type from text_config,
// YaRN with mscale = mscale_all_dim (attention factor 1, as transformers and mlx-lm compute it) and
// the llama-4 query scaling over the original context. A scaling beta without that context is
// refused (it would divide by zero). The arithmetic is checked against mlx-lm in model_tiny_test.
TEST(HfConfig, Mistral3WrapperReadsYarnAndQueryScaling) {
  auto cfg = nlohmann::json::parse(R"({"model_type": "mistral3", "vision_config": {"model_type": "pixtral"},
    "text_config": {"model_type": "ministral3", "hidden_size": 5120, "num_hidden_layers": 40, "head_dim": 128,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 131072, "intermediate_size": 32768,
    "max_position_embeddings": 393216, "rope_parameters": {"rope_type": "yarn", "rope_theta": 100000000.0,
    "factor": 48.0, "original_max_position_embeddings": 8192, "beta_fast": 32.0, "beta_slow": 1.0,
    "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}}})");
  ModelConfig c = config_from_hf(cfg);
  EXPECT_EQ(c.architecture, "ministral3");
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(*c.rope_scaling.attention_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.query_scale_beta, 0.1);
  EXPECT_EQ(c.query_scale_interval, 8192);
  cfg["text_config"]["rope_parameters"].erase("original_max_position_embeddings");
  try {
    config_from_hf(cfg);
    ADD_FAILURE() << "accepted llama_4_scaling_beta without original_max_position_embeddings";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("original_max_position_embeddings"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------------------------ GGUF checkpoints

TEST(GgufNames, MapsToHf) {
  EXPECT_EQ(gguf_to_hf_name("token_embd.weight", "llama"), "model.embed_tokens.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.12.attn_q.weight", "llama"), "model.layers.12.self_attn.q_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.0.attn_q.bias", "qwen2"), "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(gguf_to_hf_name("blk.3.attn_output.weight", "llama"), "model.layers.3.self_attn.o_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.ffn_norm.weight", "llama"), "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.ffn_norm.weight", "gemma3"), "model.layers.3.pre_feedforward_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.post_attention_norm.weight", "gemma3"), "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.post_ffw_norm.weight", "gemma3"), "model.layers.3.post_feedforward_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.1.attn_k_norm.weight", "qwen3"), "model.layers.1.self_attn.k_norm.weight");
  EXPECT_EQ(gguf_to_hf_name("output_norm.weight", "llama"), "model.norm.weight");
  EXPECT_EQ(gguf_to_hf_name("output.weight", "llama"), "lm_head.weight");
  EXPECT_EQ(gguf_to_hf_name("rope_freqs.weight", "llama"), "rope_freqs.weight");
  EXPECT_TRUE(gguf_arch_permutes_qk("llama"));
  EXPECT_FALSE(gguf_arch_permutes_qk("qwen2"));
  EXPECT_FALSE(gguf_arch_permutes_qk("gemma3"));
}

// llama.cpp's converter appends Qwen3.5's MTP head after the trunk (nextn_predict_layers): block
// L's layer tensors and its nextn.* parts are the head's; other architectures are untouched.
TEST(GgufNames, Qwen35MtpBlocksMapToTheHead) {
  EXPECT_EQ(gguf_to_hf_name("blk.3.attn_q.weight", "qwen3_5", 4), "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.4.attn_q.weight", "qwen3_5", 4), "mtp.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.5.ffn_down.weight", "qwen3_5", 4), "mtp.layers.1.mlp.down_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.4.nextn.eh_proj.weight", "qwen3_5", 4), "mtp.fc.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.4.nextn.enorm.weight", "qwen3_5_moe", 4), "mtp.pre_fc_norm_embedding.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.4.nextn.hnorm.weight", "qwen3_5", 4), "mtp.pre_fc_norm_hidden.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.4.nextn.shared_head_norm.weight", "qwen3_5", 4), "mtp.norm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.5.nextn.eh_proj.weight", "qwen3_5", 4), "blk.5.nextn.eh_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.4.attn_q.weight", "qwen3_5"), "model.layers.4.self_attn.q_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.4.attn_q.weight", "llama", 4), "model.layers.4.self_attn.q_proj.weight");
}

// The tiny llama GGUF was written like llama.cpp's converter (Q/K rows permuted, Q8_0): after
// loading, every row must match the original HF weights within Q8_0 rounding — a wrong or missing
// un-permutation moves whole rows and fails by far.
static void expect_close_to_hf(const Checkpoint& gg, const Checkpoint& hf, float rel_tol) {
  int compared = 0;
  for (auto& [name, t] : hf.weights.all()) {
    SCOPED_TRACE(name);
    const tensor::Tensor* g = gg.weights.find(name);
    if (!g && name == "lm_head.weight") continue;
    ASSERT_TRUE(g) << "missing in GGUF checkpoint";
    ASSERT_EQ(g->shape, t.shape);
    for (int64_t r = 0; r < t.rows(); ++r) {
      auto a = hf_row(gg, *g, r), b = row(t, r);
      float amax = 0;
      for (float v : b) amax = std::max(amax, std::fabs(v));
      for (size_t c = 0; c < a.size(); ++c) ASSERT_NEAR(a[c], b[c], rel_tol * amax + 1e-6f) << "row " << r << " col " << c;
    }
    ++compared;
  }
  EXPECT_GE(compared, 18);
}

TEST(GgufCheckpoint, TinyLlamaQ8UnpermutedMatchesHf) {
  auto gg = load_checkpoint(kTiny + "llama-q8_0.gguf");
  auto hf = load_checkpoint(kTiny + "llama");
  EXPECT_EQ(gg->config.architecture, "llama");
  EXPECT_EQ(gg->config.num_attention_heads, 4);
  EXPECT_EQ(gg->config.num_key_value_heads, 2);
  EXPECT_EQ(gg->config.head_dim, 16);
  EXPECT_EQ(gg->config.vocab_size, 256);
  EXPECT_EQ(gg->config.intermediate_size, 128);
  EXPECT_FALSE(gg->config.tie_word_embeddings);
  EXPECT_EQ(gg->tokenizer_path, kTiny + "llama-q8_0.gguf");
  EXPECT_EQ(gg->weights.get("model.layers.0.self_attn.q_proj.weight").dtype, tensor::DType::Q8_0);
  expect_close_to_hf(*gg, *hf, 1.0f / 127);  // Q8_0: |err| <= d/2 = amax/254 per block
}

// The Q/K tensors of a llama GGUF stay views of the mapping in GGUF's pair order (no heap copy):
// stored row 2j+s of a head is HF row s*hd/2 + j; other tensors and other architectures keep HF order.
TEST(GgufCheckpoint, LlamaQkStayInPairOrderInsideTheMapping) {
  auto gg = load_checkpoint(kTiny + "llama-q8_0.gguf");
  auto hf = load_checkpoint(kTiny + "llama");
  EXPECT_TRUE(gg->rope_interleaved_qk);
  EXPECT_FALSE(hf->rope_interleaved_qk);
  EXPECT_FALSE(load_checkpoint(kTiny + "qwen3-q4_0.gguf")->rope_interleaved_qk);
  const tensor::Tensor& q = gg->weights.get("model.layers.0.self_attn.q_proj.weight");
  const tensor::Tensor& emb = gg->weights.get("model.embed_tokens.weight");
  // Both point into the same file mapping: the tensor data are ordered by file offset, all within
  // a span no larger than the file.
  auto lo = std::min(static_cast<const uint8_t*>(q.data), static_cast<const uint8_t*>(emb.data));
  auto hi = std::max(static_cast<const uint8_t*>(q.data), static_cast<const uint8_t*>(emb.data));
  EXPECT_LT(size_t(hi - lo), size_t(fs::file_size(kTiny + "llama-q8_0.gguf")));
  const int64_t hd = gg->config.head_dim;
  EXPECT_EQ(stored_qk_index(*gg, q, 1), 2);                    // HF row 1 = pair 1, first element
  EXPECT_EQ(stored_qk_index(*gg, q, hd / 2), 1);               // HF row hd/2 = pair 0, second element
  EXPECT_EQ(stored_qk_index(*gg, q, hd + 3), hd + 6);
  EXPECT_EQ(stored_qk_index(*gg, gg->weights.get("model.layers.0.mlp.up_proj.weight"), 5), 5);
  const tensor::Tensor& qh = hf->weights.get("model.layers.0.self_attn.q_proj.weight");
  auto stored = row(q, 1), want = row(qh, hd / 2);
  float amax = 0;
  for (float v : want) amax = std::max(amax, std::fabs(v));
  for (size_t c = 0; c < want.size(); ++c) ASSERT_NEAR(stored[c], want[c], amax / 127 + 1e-6f);
}

TEST(GgufCheckpoint, TinyQwen3Q4NotPermutedMatchesHf) {
  auto gg = load_checkpoint(kTiny + "qwen3-q4_0.gguf");
  auto hf = load_checkpoint(kTiny + "qwen3");
  EXPECT_EQ(gg->config.architecture, "qwen3");
  EXPECT_EQ(gg->config.head_dim, 32);
  EXPECT_TRUE(gg->config.tie_word_embeddings);
  expect_close_to_hf(*gg, *hf, 1.0f / 7);  // Q4_0: |err| <= d/2 with d = amax/8
}

// The config fields both real-model goldens carry (written from transformers' GGUF loading).
static void expect_config_matches(const ModelConfig& c, const nlohmann::json& want, const std::string& arch,
                                  double eps_tolerance) {
  EXPECT_EQ(c.architecture, arch);
  EXPECT_EQ(c.vocab_size, want["vocab_size"].get<int64_t>());
  EXPECT_EQ(c.hidden_size, want["hidden_size"].get<int64_t>());
  EXPECT_EQ(c.intermediate_size, want["intermediate_size"].get<int64_t>());
  EXPECT_EQ(c.num_hidden_layers, want["num_hidden_layers"].get<int64_t>());
  EXPECT_EQ(c.num_attention_heads, want["num_attention_heads"].get<int64_t>());
  EXPECT_EQ(c.num_key_value_heads, want["num_key_value_heads"].get<int64_t>());
  EXPECT_EQ(c.max_position_embeddings, want["max_position_embeddings"].get<int64_t>());
  EXPECT_NEAR(c.rms_norm_eps, want["rms_norm_eps"].get<double>(), eps_tolerance);
  EXPECT_EQ(c.bos_token_id, want["bos_token_id"].get<int32_t>());
  ASSERT_FALSE(c.eos_token_ids.empty());
  EXPECT_EQ(c.eos_token_ids[0], want["eos_token_id"].get<int32_t>());
}

// Every golden row (transformers' dequantized values; a golden may hold only a row's first
// columns) equals ours to 1e-6
// (absolute, or relative to the value's size for `relative`); counts the tensors compared.
// (void: gtest's ASSERT_* may only return from a void function.)
static void expect_rows_match(const Checkpoint& ck, const std::string& golden_file, bool relative,
                              int& compared) {
  auto golden = read_safetensors(golden_file);
  compared = 0;
  for (auto& g : golden.tensors) {
    SCOPED_TRACE(g.name);
    const tensor::Tensor& t = ck.weights.get(g.name);
    int64_t n = g.shape.size() == 2 ? g.shape[0] : 1, w = g.shape.back();
    ASSERT_LE(w, t.cols());
    for (int64_t r = 0; r < n; ++r) {
      auto got = hf_row(ck, t, r);
      for (int64_t k = 0; k < w; ++k) {
        float want = f32(g)[r * w + k];
        float tol = relative ? 1e-6f * std::max(1.0f, std::fabs(want)) : 1e-6f;
        ASSERT_NEAR(got[size_t(k)], want, tol) << "row " << r << " col " << k;
      }
    }
    ++compared;
  }
}

// The real SmolLM2-135M Q4_1 GGUF against transformers' own GGUF loading (which de-permutes Q/K).
TEST(GgufCheckpoint, SmolLM2MatchesTransformers) {
  std::string path = model_cache() + "/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << "SmolLM2 GGUF not in the model cache (run scripts/fetch_models.sh)";
  auto ck = load_checkpoint(path);
  auto want = nlohmann::json::parse(read_file(kGolden + "smollm2_config.json"));
  const ModelConfig& c = ck->config;
  expect_config_matches(c, want, "llama", 1e-12);
  EXPECT_DOUBLE_EQ(c.rope_theta, want["rope_theta"].get<double>());
  EXPECT_EQ(c.tie_word_embeddings, want["tie_word_embeddings"].get<bool>());
  EXPECT_EQ(ck->weights.all().size(), 2u + 9u * 30u);
  int compared = 0;
  expect_rows_match(*ck, kGolden + "smollm2_rows.safetensors", /*relative=*/false, compared);
  EXPECT_GT(compared, 0);
}

// The real Gemma 3 270M Q4_K_M GGUF (Q4_K, Q6_K, Q5_0, Q8_0 tensors; norms stored as 1 + w)
// against transformers' GGUF loading.
TEST(GgufCheckpoint, Gemma3MatchesTransformers) {
  std::string path = model_cache() + "/gemma-3-270m/gemma-3-270m-q4_k_m.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << "Gemma 3 GGUF not in the model cache (run scripts/fetch_models.sh)";
  auto ck = load_checkpoint(path);
  auto want = nlohmann::json::parse(read_file(kGolden + "gemma3_config.json"));
  const ModelConfig& c = ck->config;
  expect_config_matches(c, want, "gemma3", 1e-15);
  EXPECT_EQ(c.head_dim, want["head_dim"].get<int64_t>());
  EXPECT_EQ(c.sliding_window, want["sliding_window"].get<int64_t>());
  EXPECT_DOUBLE_EQ(c.query_pre_attn_scalar, want["query_pre_attn_scalar"].get<double>());
  // <end_of_turn> (106 in Gemma's vocabulary, HF generation_config eos [1, 106]) also stops.
  EXPECT_NE(std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), 106), c.eos_token_ids.end());
  EXPECT_TRUE(c.tie_word_embeddings);
  ASSERT_EQ(c.layer_is_sliding.size(), want["layer_types"].size());
  for (size_t i = 0; i < c.layer_is_sliding.size(); ++i)
    EXPECT_EQ(c.layer_is_sliding[i], want["layer_types"][i] == "sliding_attention") << "layer " << i;
  int compared = 0;
  expect_rows_match(*ck, kGolden + "gemma3_rows.safetensors", /*relative=*/true, compared);
  for (auto& g : read_safetensors(kGolden + "gemma3_rows.safetensors").tensors)  // whole rows here
    EXPECT_EQ(ck->weights.get(g.name).cols(), g.shape.back()) << g.name;
  EXPECT_EQ(compared, 15);  // embed, final norm, and the 13 tensors of layer 0
}

// A sharded checkpoint (model.safetensors.index.json + 2 shards, written by our writer) loads
// the same tensors as the single-file original; an index that lies about a shard is refused.
TEST(HfCheckpoint, ShardedWithIndex) {
  std::string dir = scratch_dir() + "/sharded_llama";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kTiny + "llama/config.json", dir + "/config.json");
  auto orig = load_checkpoint(kTiny + "llama");
  std::vector<SafetensorsEntry> shard[2];
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (auto& [name, t] : orig->weights.all()) {
    int s = (i++) % 2;
    auto* p = static_cast<const uint8_t*>(t.data);
    shard[s].push_back({name, t.dtype, t.shape, std::vector<uint8_t>(p, p + t.nbytes)});
    index["weight_map"][name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
  }
  for (int s = 0; s < 2; ++s)
    write_safetensors(dir + "/model-0000" + std::to_string(s + 1) + "-of-00002.safetensors", shard[s]);
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  auto ck = load_checkpoint(dir);
  ASSERT_EQ(ck->weights.all().size(), orig->weights.all().size());
  for (auto& [name, t] : orig->weights.all()) {
    const tensor::Tensor& u = ck->weights.get(name);
    ASSERT_EQ(u.shape, t.shape);
    ASSERT_EQ(u.nbytes, t.nbytes);
    EXPECT_EQ(std::memcmp(u.data, t.data, t.nbytes), 0) << name;
  }
  // Lie: claim the first tensor lives in the other shard.
  auto first = orig->weights.all().begin()->first;
  index["weight_map"][first] = "model-00002-of-00002.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json", std::ios::trunc) << index.dump();
  EXPECT_THROW(load_checkpoint(dir), FileError);
  index["weight_map"][first] = "../../etc/passwd";
  std::ofstream(dir + "/model.safetensors.index.json", std::ios::trunc) << index.dump();
  EXPECT_THROW(load_checkpoint(dir), FileError);
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------- refusals (unit)

static std::string write_tmp(const std::string& name, const std::string& bytes) {
  std::string p = scratch_dir() + "/" + name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

static std::string safetensors_bytes(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  uint64_t n = header.size();
  std::memcpy(s.data(), &n, 8);
  return s + header + std::string(data_bytes, '\x01');
}

static std::string refusal(const std::string& path) {
  try {
    read_safetensors(path);
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), path);
    return e.reason();
  }
  return "(accepted)";
}

TEST(SafetensorsReader, RefusesLyingHeaders) {
  auto r = [](const std::string& h, size_t data) { return refusal(write_tmp("st.safetensors", safetensors_bytes(h, data))); };
  EXPECT_NE(r(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 8).find("past end of file"), std::string::npos);
  EXPECT_NE(r(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16).find("need 16"), std::string::npos);
  EXPECT_NE(r(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8).find("unsupported dtype"), std::string::npos);
  EXPECT_NE(r(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", 8)
                .find("overlap"), std::string::npos);
  EXPECT_NE(r(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 8).find("shape"), std::string::npos);
  EXPECT_NE(r(R"({"a":)", 8).find("not valid JSON"), std::string::npos);
  EXPECT_EQ(r(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8), "(accepted)");
  std::string big(8, '\xff');
  EXPECT_NE(refusal(write_tmp("st2.safetensors", big)).find("header length"), std::string::npos);
}

// A file with one misaligned tensor is copied whole, its aligned tensors too: a read of one left
// in the mapping maps the page-cache folio around it (up to 2 MB on Linux 6.18), copied neighbours
// included (a Qwen3.5-0.8B-shaped mlx-lm file ran 50 MB over its weights so). Here the data
// starts 2 bytes past a 4-byte boundary: the F32 tensor is misaligned, the BF16 one is not.
TEST(HfCheckpoint, AFileWithAMisalignedTensorLeavesNothingInTheMapping) {
  const std::string dir = scratch_dir() + "/half_aligned";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kTiny + "llama/config.json", dir + "/config.json");
  std::string header = R"({"model.norm.weight":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                       R"("model.layers.0.input_layernorm.weight":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]}})";
  while ((8 + header.size()) % 4 != 2) header += ' ';
  std::string bytes = safetensors_bytes(header, 24);
  for (size_t i = 0; i < 24; ++i) bytes[bytes.size() - 24 + i] = static_cast<char>(i * 11 + 1);
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << bytes;
  auto ck = load_checkpoint(dir);
  ASSERT_EQ(ck->weights.all().size(), 2u);
  for (auto& [name, t] : ck->weights.all()) {
    EXPECT_EQ(ck->weights.mapping_of(t.data), nullptr) << name;
    const size_t off = name == "model.norm.weight" ? 0 : 16;
    EXPECT_EQ(std::memcmp(t.data, bytes.data() + bytes.size() - 24 + off, t.nbytes), 0) << name;
  }
  fs::remove_all(dir);
}

TEST(GgufReader, RefusesBadFiles) {
  auto reason = [](const std::string& bytes) -> std::string {
    std::string p = write_tmp("bad.gguf", bytes);
    try {
      read_gguf(p);
    } catch (const FileError& e) {
      EXPECT_EQ(e.path(), p);
      return e.reason();
    }
    return "(accepted)";
  };
  EXPECT_NE(reason("GGML").find("bad magic"), std::string::npos);
  std::string v1("GGUF\x01\0\0\0", 8);
  EXPECT_NE(reason(v1).find("version 1"), std::string::npos);
  std::string hdr("GGUF\x03\0\0\0", 8);
  std::string counts(16, '\0');
  counts[0] = 1;  // one tensor, no KV, but nothing follows
  EXPECT_NE(reason(hdr + counts).find("exceeds file size"), std::string::npos);
  std::string ok_header = hdr + std::string(16, '\0');
  EXPECT_EQ(reason(ok_header), "(accepted)");
}

// A GGML type the kernels do not take (the ternary TQ types) is refused with the file, the tensor
// and the type's name: t.IQ4_XS of the golden file relabelled TQ2_0 (35).
TEST(GgufReader, UnsupportedTypeIsRefusedByName) {
  std::ifstream in(kGolden + "ggml_types.gguf", std::ios::binary);
  std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string name = "t.IQ4_XS";
  const size_t at = b.find(name);
  ASSERT_NE(at, std::string::npos);
  uint32_t nd = 0, type = 0;
  std::memcpy(&nd, b.data() + at + name.size(), 4);
  const size_t type_at = at + name.size() + 4 + 8 * nd;  // after n_dims and the dims
  std::memcpy(&type, b.data() + type_at, 4);
  ASSERT_EQ(type, 23u);  // IQ4_XS
  type = 35;
  std::memcpy(b.data() + type_at, &type, 4);
  const std::string p = write_tmp("tq2.gguf", b);
  try {
    read_gguf(p);
    FAIL() << "accepted";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), p);
    EXPECT_EQ(e.reason(), "tensor 't.IQ4_XS': unsupported GGML type 35 (TQ2_0)");
  }
}

TEST(WeightStore, MissingTensorIsNamed) {
  WeightStore ws;
  try {
    ws.get("model.norm.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.norm.weight"), std::string::npos);
  }
  EXPECT_THROW(load_checkpoint("/nonexistent/model"), FileError);
}

// ------------------------------------------------------------------------------------- convert

// HF → MLX must equal mlx_lm.convert -q's output tensor for tensor, byte for byte: f32 llama at
// 4 bits / group 64, and bf16 qwen3 (tied embeddings, bf16 scales) at 8 bits / group 32.
static void expect_same_as_mlx_lm(const std::string& arch, int bits, int group, int want_quantized) {
  SCOPED_TRACE(arch);
  std::string golden = kGolden + "tiny-" + arch + "-mlx-q" + std::to_string(bits);
  std::string out = scratch_dir() + "/convert_" + arch;
  fs::remove_all(out);
  ConvertOptions opt;
  opt.quantize_bits = bits;
  opt.group_size = group;
  auto rep = convert_checkpoint(kTiny + arch, out, opt);
  EXPECT_EQ(rep.quantized, want_quantized);
  auto ours_file = read_safetensors(out + "/model.safetensors");
  auto theirs_file = read_safetensors(golden + "/model.safetensors");
  auto ours = by_name(ours_file), theirs = by_name(theirs_file);
  ASSERT_EQ(ours.size(), theirs.size());
  for (auto& [name, t] : theirs) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(ours.count(name));
    const tensor::Tensor& o = ours[name];
    EXPECT_EQ(o.dtype, t.dtype);
    EXPECT_EQ(o.shape, t.shape);
    ASSERT_EQ(o.nbytes, t.nbytes);
    EXPECT_EQ(std::memcmp(o.data, t.data, t.nbytes), 0);
  }
  auto cfg = nlohmann::json::parse(read_file(out + "/config.json"));
  auto want = nlohmann::json::parse(read_file(golden + "/config.json"));
  EXPECT_EQ(cfg["quantization"], want["quantization"]);
  EXPECT_EQ(cfg["quantization_config"], want["quantization_config"]);
  // Both load back identically as MLX_AFFINE tensors.
  auto a = load_checkpoint(out), b = load_checkpoint(golden);
  const tensor::Tensor& qa = a->weights.get("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(qa.dtype, tensor::DType::MLX_AFFINE);
  EXPECT_EQ(qa.bits, bits);
  EXPECT_EQ(row(qa, 3), row(b->weights.get("model.layers.0.mlp.up_proj.weight"), 3));
}

TEST(Convert, HfToMlxEqualsMlxLm) {
  expect_same_as_mlx_lm("llama", 4, 64, 16);  // 7 Linear x 2 layers + embed + lm_head
  expect_same_as_mlx_lm("qwen3", 8, 32, 15);  // tied: no lm_head
}

// GGUF → f32 safetensors: every tensor equals the GGUF loader's dequantization (HF layout), the
// config round-trips, and the tokenizer travels as tokenizer.gguf.
TEST(Convert, GgufToF32RoundTrips) {
  std::string out = scratch_dir() + "/convert_f32";
  fs::remove_all(out);
  convert_checkpoint(kTiny + "llama-q8_0.gguf", out, ConvertOptions{});
  auto src = load_checkpoint(kTiny + "llama-q8_0.gguf");
  auto dst = load_checkpoint(out);
  EXPECT_EQ(dst->tokenizer_path, out + "/tokenizer.gguf");
  EXPECT_EQ(dst->config.architecture, "llama");
  EXPECT_EQ(dst->config.num_key_value_heads, src->config.num_key_value_heads);
  EXPECT_EQ(dst->config.head_dim, src->config.head_dim);
  EXPECT_DOUBLE_EQ(dst->config.rope_theta, src->config.rope_theta);
  EXPECT_EQ(dst->config.eos_token_ids, src->config.eos_token_ids);
  EXPECT_EQ(dst->config.tie_word_embeddings, src->config.tie_word_embeddings);
  ASSERT_EQ(dst->weights.all().size(), src->weights.all().size());
  for (auto& [name, t] : src->weights.all()) {
    const tensor::Tensor& d = dst->weights.get(name);
    EXPECT_EQ(d.dtype, tensor::DType::F32);
    ASSERT_EQ(d.shape, t.shape);
    for (int64_t r = 0; r < t.rows(); ++r) ASSERT_EQ(row(d, r), hf_row(*src, t, r)) << name << " row " << r;
  }
}

// Llama 3.x GGUFs carry rope scaling as a rope_freqs tensor; the HF parameters are recovered.
TEST(GgufConfig, Llama3RopeScalingFromRopeFreqs) {
  auto ck = load_checkpoint(kGolden + "llama3_rope.gguf");
  const RopeScaling& r = ck->config.rope_scaling;
  EXPECT_EQ(r.type, "llama3");
  EXPECT_DOUBLE_EQ(r.factor, 8.0);
  EXPECT_DOUBLE_EQ(r.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(r.high_freq_factor, 4.0);
  EXPECT_EQ(r.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(ck->config.rope_theta, 500000.0);
  EXPECT_TRUE(ck->weights.find("rope_freqs.weight"));
}

// The copies scripts/derive_models.sh makes of SmolLM2 (hf-f32, mlx-q4, mlx-q8) describe the same
// model as the GGUF: same config, f32 weights equal to the GGUF's dequantization, quantized ones
// within one quantization step of them, and the GGUF vocabulary as tokenizer.
TEST(DerivedModels, SmolLM2CopiesAgreeWithGguf) {
  std::string dir = model_cache() + "/smollm2-135m-instruct";
  if (!fs::exists(dir + "/hf-f32/model.safetensors") || !fs::exists(dir + "/mlx-q4/model.safetensors"))
    GTEST_SKIP() << "derived SmolLM2 copies absent (run scripts/derive_models.sh after the build)";
  auto gg = load_checkpoint(dir + "/SmolLM2-135M-Instruct.Q4_1.gguf");
  auto f32c = load_checkpoint(dir + "/hf-f32");
  auto q4 = load_checkpoint(dir + "/mlx-q4");
  for (auto* ck : {f32c.get(), q4.get()}) {
    EXPECT_EQ(ck->config.architecture, gg->config.architecture);
    EXPECT_EQ(ck->config.num_hidden_layers, gg->config.num_hidden_layers);
    EXPECT_EQ(ck->config.num_key_value_heads, gg->config.num_key_value_heads);
    EXPECT_EQ(ck->config.vocab_size, gg->config.vocab_size);
    EXPECT_EQ(ck->config.eos_token_ids, gg->config.eos_token_ids);
    EXPECT_EQ(ck->config.tie_word_embeddings, gg->config.tie_word_embeddings);
    EXPECT_EQ(fs::path(ck->tokenizer_path).filename(), "tokenizer.gguf");
    EXPECT_EQ(ck->weights.all().size(), gg->weights.all().size());
  }
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.7.mlp.down_proj.weight"}) {
    const tensor::Tensor &a = gg->weights.get(name), &b = f32c->weights.get(name), &q = q4->weights.get(name);
    EXPECT_EQ(q.dtype, tensor::DType::MLX_AFFINE);
    for (int64_t r = 0; r < 8; ++r) {
      auto ra = hf_row(*gg, a, r), rb = row(b, r), rq = row(q, r);
      EXPECT_EQ(ra, rb) << name;
      float amax = 0;
      for (float v : ra) amax = std::max(amax, std::fabs(v));
      for (size_t c = 0; c < ra.size(); ++c) ASSERT_NEAR(rq[c], ra[c], 2 * amax / 15 * 1.02f + 1e-3f) << name << " " << r;
    }
  }
}

// GGUF → MLX 8-bit directly: the quantized tensors stay within one step of the GGUF's values,
// norms stay float, and the config carries the quantization.
TEST(Convert, GgufToMlxQ8) {
  std::string out = scratch_dir() + "/convert_gguf_q8";
  fs::remove_all(out);
  ConvertOptions opt;
  opt.quantize_bits = 8;
  opt.group_size = 32;
  convert_checkpoint(kTiny + "qwen3-q4_0.gguf", out, opt);
  auto src = load_checkpoint(kTiny + "qwen3-q4_0.gguf");
  auto dst = load_checkpoint(out);
  EXPECT_EQ(dst->config.architecture, "qwen3");
  EXPECT_EQ(dst->config.head_dim, 32);
  EXPECT_EQ(dst->weights.get("model.layers.0.self_attn.q_norm.weight").dtype, tensor::DType::F32);
  for (auto& [name, t] : src->weights.all()) {
    const tensor::Tensor& d = dst->weights.get(name);
    ASSERT_EQ(d.shape, t.shape) << name;
    bool q = d.dtype == tensor::DType::MLX_AFFINE;
    EXPECT_EQ(q, t.shape.size() == 2) << name;
    for (int64_t r = 0; r < t.rows(); ++r) {
      auto a = row(t, r), b = row(d, r);
      float lo = *std::min_element(a.begin(), a.end()), hi = *std::max_element(a.begin(), a.end());
      for (size_t c = 0; c < a.size(); ++c) ASSERT_NEAR(b[c], a[c], q ? (hi - lo) / 255 * 1.01f + 1e-3f : 0.0f) << name;
    }
  }
}
