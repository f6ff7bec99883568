#include "model/convert.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"
#include "model/config_load.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tensor/dequantize.h"
#include "tensor/fp16.h"
#include "tensor/mlx_affine.h"
#include "tensor/quant_formats.h"

namespace rapid::model {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

bool is_float(tensor::DType t) { return t == tensor::DType::F32 || t == tensor::DType::F16 || t == tensor::DType::BF16; }

void append_floats(const float* x, int64_t n, tensor::DType dt, std::vector<uint8_t>& out) {
  size_t at = out.size();
  if (dt == tensor::DType::F32) {
    out.resize(at + size_t(n) * 4);
    std::memcpy(out.data() + at, x, size_t(n) * 4);
    return;
  }
  out.resize(at + size_t(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h = dt == tensor::DType::F16 ? tensor::f32_to_f16(x[i]) : tensor::f32_to_bf16(x[i]);
    std::memcpy(out.data() + at + 2 * i, &h, 2);
  }
}

// mlx_lm quantizes Linear and Embedding layers: 2-D ".weight" tensors other than norms.
bool quantizable(const tensor::Tensor& t) {
  const std::string& n = t.name;
  return t.shape.size() == 2 && n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0 &&
         n.find("norm") == std::string::npos;
}

void write_json(const std::string& path, const json& j) {
  std::ofstream o(path, std::ios::trunc);
  if (!o) throw FileError(path, "cannot open for writing");
  o << j.dump(4) << "\n";
}

void copy_tokenizer(const Checkpoint& ck, const std::string& from, const std::string& to) {
  if (fs::is_regular_file(ck.tokenizer_path)) {  // GGUF: the vocabulary lives in the .gguf
    fs::path dst = fs::path(to) / "tokenizer.gguf";
    std::error_code ec;
    fs::remove(dst, ec);
    fs::create_hard_link(ck.tokenizer_path, dst, ec);
    if (ec) fs::copy_file(ck.tokenizer_path, dst, fs::copy_options::overwrite_existing);
    return;
  }
  for (auto& e : fs::directory_iterator(ck.tokenizer_path)) {
    std::string n = e.path().filename().string();
    bool tok = n.rfind("tokenizer", 0) == 0 || n == "special_tokens_map.json" || n == "added_tokens.json" ||
               n == "vocab.json" || n == "merges.txt" || e.path().extension() == ".jinja";
    if (!tok || !e.is_regular_file()) continue;
    fs::path dst = fs::path(to) / n;
    std::error_code ec;
    fs::remove(dst, ec);
    fs::create_hard_link(e.path(), dst, ec);  // tokenizer.gguf can be large; share it when possible
    if (ec) fs::copy_file(e.path(), dst, fs::copy_options::overwrite_existing);
  }
}

}  // namespace

ConvertReport convert_checkpoint(const std::string& from, const std::string& to, const ConvertOptions& opt) {
  if (opt.quantize_bits && !tensor::mlx::valid_bits(*opt.quantize_bits))
    throw Error("--quantize must be one of 2,3,4,5,6,8");
  if (!tensor::mlx::valid_group_size(opt.group_size)) throw Error("--group-size must be 32, 64 or 128");
  if (opt.dtype && !is_float(*opt.dtype)) throw Error("--dtype must be f32, f16 or bf16");
  auto ck = load_checkpoint(from);
  // Its config.json would lose the MoE fields (and stacked experts stay unaligned in the mapping).
  if (ck->config.num_experts > 0)
    throw Error(from + ": convert does not handle mixture-of-experts models (" + ck->config.architecture + ") yet");
  if (fs::absolute(to) == fs::absolute(from)) throw Error("--to must differ from --from");
  // config.json: the source's own (HF), or one built from GGUF metadata; first, so a source whose
  // config cannot be written is refused before any tensor is.
  json cfg;
  fs::path src_cfg = fs::path(ck->path) / "config.json";
  if (fs::is_directory(ck->path) && fs::exists(src_cfg)) {
    cfg = json::parse(read_file(src_cfg.string()));
  } else {
    try {
      cfg = config_to_hf_json(ck->config);
    } catch (const Error& e) {
      throw Error(from + ": " + e.what());
    }
  }
  fs::create_directories(to);

  // Plan every output tensor, then stream them to disk one at a time (peak memory: one tensor).
  ConvertReport rep;
  std::vector<SafetensorsPlanned> plan;
  // Rows are read in HF order: GGUF llama Q/K tensors are loaded in pair order and un-permuted
  // here, while writing (see Checkpoint::rope_interleaved_qk).
  const Checkpoint* ckp = ck.get();
  for (auto& [name, tref] : ck->weights.all()) {
    const tensor::Tensor* t = &tref;
    if (name.rfind("model.", 0) != 0 && name.rfind("lm_head.", 0) != 0) continue;  // e.g. GGUF rope_freqs
    rep.tensors++;
    // Float output type: requested, else the source's own float type, else f32 (dequantized).
    tensor::DType fdt = opt.dtype ? *opt.dtype : (is_float(t->dtype) ? t->dtype : tensor::DType::F32);
    bool numeric = is_float(t->dtype) || t->dtype == tensor::DType::MLX_AFFINE || t->dtype == tensor::DType::MXFP4 ||
                   tensor::is_ggml_quant(t->dtype);
    if (!numeric) {  // integer tensors pass through
      plan.push_back({name, t->dtype, t->shape, [t] {
                        auto* p = static_cast<const uint8_t*>(t->data);
                        return std::vector<uint8_t>(p, p + t->nbytes);
                      }});
      continue;
    }
    int64_t rows = t->rows(), cols = t->cols();
    if (!(opt.quantize_bits && quantizable(*t) && cols % opt.group_size == 0)) {
      plan.push_back({name, fdt, t->shape, [ckp, t, fdt, rows, cols] {
                        std::vector<uint8_t> out;
                        out.reserve(size_t(rows * cols) * block_bytes(fdt));
                        std::vector<float> rowbuf(static_cast<size_t>(cols));
                        for (int64_t r = 0; r < rows; ++r) {
                          dequantize_hf_row(*ckp, *t, r, rowbuf.data());
                          append_floats(rowbuf.data(), cols, fdt, out);
                        }
                        return out;
                      }});
      continue;
    }
    rep.quantized++;
    int bits = *opt.quantize_bits, g = opt.group_size;
    // Scales/biases in the weights' float type, like mlx_lm (MLX_AFFINE/GGML sources: f16 unless told).
    tensor::DType sdt = opt.dtype ? *opt.dtype : (is_float(t->dtype) ? t->dtype : tensor::DType::F16);
    // weight/scales/biases come out of one pass; whichever is written first computes all three.
    struct Parts {
      bool done = false;
      std::vector<uint8_t> w, s, b;
    };
    auto parts = std::make_shared<Parts>();
    auto compute = [ckp, t, parts, rows, cols, bits, g, sdt] {
      if (parts->done) return;
      parts->done = true;
      std::vector<float> rowbuf(static_cast<size_t>(cols)), sc(static_cast<size_t>(cols / g)), bi(static_cast<size_t>(cols / g));
      std::vector<uint8_t> packed(size_t(tensor::mlx::packed_row_bytes(cols, bits)));
      parts->w.reserve(packed.size() * size_t(rows));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_hf_row(*ckp, *t, r, rowbuf.data());
        // MLX quantizes the weights in their stored type: round first when converting to f16/bf16.
        if (sdt != tensor::DType::F32)
          for (auto& v : rowbuf) v = sdt == tensor::DType::F16 ? tensor::f16_to_f32(tensor::f32_to_f16(v)) : tensor::bf16_to_f32(tensor::f32_to_bf16(v));
        tensor::mlx::quantize_row(rowbuf.data(), cols, bits, g, packed.data(), sc.data(), bi.data());
        parts->w.insert(parts->w.end(), packed.begin(), packed.end());
        append_floats(sc.data(), int64_t(sc.size()), sdt, parts->s);
        append_floats(bi.data(), int64_t(bi.size()), sdt, parts->b);
      }
    };
    std::string module = name.substr(0, name.size() - 7);
    plan.push_back({name, tensor::DType::U32, {rows, tensor::mlx::packed_row_bytes(cols, bits) / 4}, [compute, parts] {
                      compute();
                      return std::move(parts->w);
                    }});
    plan.push_back({module + ".scales", sdt, {rows, cols / g}, [compute, parts] {
                      compute();
                      return std::move(parts->s);
                    }});
    plan.push_back({module + ".biases", sdt, {rows, cols / g}, [compute, parts] {
                      compute();
                      return std::move(parts->b);
                    }});
  }
  // Same metadata as the writers of each layout (transformers' "pt", mlx_lm's "mlx").
  rep.bytes = write_safetensors_streamed((fs::path(to) / "model.safetensors").string(), std::move(plan),
                                         {{"format", opt.quantize_bits ? "mlx" : "pt"}});

  // config.json (the source's own, or built from GGUF metadata above) with quantization updated.
  cfg.erase("quantization");
  cfg.erase("quantization_config");
  if (opt.quantize_bits) {
    json q = {{"group_size", opt.group_size}, {"bits", *opt.quantize_bits}, {"mode", "affine"}};
    cfg["quantization"] = q;
    cfg["quantization_config"] = q;
  }
  if (opt.dtype) {
    const char* dn = *opt.dtype == tensor::DType::F32 ? "float32" : *opt.dtype == tensor::DType::F16 ? "float16" : "bfloat16";
    if (cfg.contains("dtype")) cfg["dtype"] = dn;
    cfg["torch_dtype"] = dn;
  }
  write_json((fs::path(to) / "config.json").string(), cfg);
  fs::path src_gen = fs::path(ck->path) / "generation_config.json";
  if (fs::is_directory(ck->path) && fs::exists(src_gen))
    fs::copy_file(src_gen, fs::path(to) / "generation_config.json", fs::copy_options::overwrite_existing);
  else
    write_json((fs::path(to) / "generation_config.json").string(), generation_config_to_hf_json(ck->config));
  copy_tokenizer(*ck, from, to);
  return rep;
}

}  // namespace rapid::model
