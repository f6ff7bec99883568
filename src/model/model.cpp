#include <string>

#include "common/error.h"
#include "common/log.h"
#include "model/arch.h"
#include "model/lane_repack.h"

namespace rapid::model {

static std::unique_ptr<Model> create_arch_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts) {
  const std::string& a = ckpt->config.architecture;
  // ministral3 (Devstral Small 2, Ministral 3; the LM of mistral3 checkpoints): llama's blocks with
  // YaRN RoPE and the llama-4 query scaling, both read from the config.
  if (a == "llama" || a == "mistral" || a == "ministral3") return make_decoder_model(ckpt, llama_arch(), opts);
  if (a == "qwen2") return make_decoder_model(ckpt, qwen2_arch(), opts);
  if (a == "qwen3") return make_decoder_model(ckpt, qwen3_arch(), opts);
  if (a == "qwen3_moe") return make_decoder_model(ckpt, qwen3_moe_arch(), opts);
  if (a == "gemma3" || a == "gemma3_text") return make_decoder_model(ckpt, gemma3_arch(), opts);
  if (a == "gpt_oss") return make_decoder_model(ckpt, gpt_oss_arch(), opts);
  if (a == "gemma4") return make_gemma4_model(ckpt, opts);
  if (a == "glm4_moe_lite") return make_glm4_moe_lite_model(ckpt, opts);
  if (a == "qwen3_5" || a == "qwen3_5_text" || a == "qwen3_5_moe" || a == "qwen3_next")
    return make_qwen3_5_model(ckpt, opts);
  throw Error(ckpt->path + ": unsupported architecture '" + a +
              "' (supported: llama, mistral, ministral3, qwen2, qwen3, qwen3_moe, gemma3, gemma4, gpt_oss, qwen3_5, "
              "qwen3_5_moe, qwen3_next, glm4_moe_lite)");
}

// A layer refusing its tensors (wrong shape or dtype) names the tensor; the checkpoint's path
// makes the refusal actionable.
std::unique_ptr<Model> create_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts) {
  if (!ckpt) throw Error("create_model: no checkpoint");
  // The exact path reads f32 copies; every other path reads the repacked rows.
  RepackReport rep;
  if (opts.matmul == compute::MatmulPath::Fast) {
    rep = repack_for_lane_kernels(ckpt->weights);
    if (rep.tensors)
      log::debug("weights: " + std::to_string(rep.tensors) + " tensors (" + std::to_string(rep.bytes >> 20) +
                 " MiB) repacked into lane layouts");
    if (rep.skipped_bytes)
      log::info("weights: kept in the file's layout (a lane-layout copy of " + std::to_string(rep.skipped_bytes >> 20) +
                " MiB would exceed 60 % of available memory); decode runs slower");
  }
  size_t weight_bytes = 0;
  for (const auto& [name, t] : ckpt->weights.all()) weight_bytes += t.nbytes;
  compute::note_weight_bytes(weight_bytes);
  try {
    auto m = create_arch_model(ckpt, opts);
    drop_repacked_sources(ckpt->weights, rep);
    return m;
  } catch (const FileError&) {
    throw;
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(ckpt->path + ":", 0) == 0) throw;  // already names it
    throw FileError(ckpt->path, what);
  }
}

void Model::forward(const int32_t* tokens, int64_t n, SequenceState& state, float* logits, bool all_logits) {
  BatchEntry e;
  e.tokens = tokens;
  e.n = n;
  e.state = &state;
  e.logits = logits;
  e.all_logits = all_logits;
  forward_batch(&e, 1);
}

void SequenceState::restore_recurrent(const uint8_t*, size_t n) {
  if (n != 0) throw Error("this sequence state has no recurrent state to restore");
}

// Models without MTP heads: asking for them is a caller error.
cache::BlockShape Model::mtp_block_shape(int32_t) const { throw Error("this model has no MTP heads"); }
std::unique_ptr<SequenceState> Model::new_mtp_state(std::shared_ptr<cache::BlockPool>, int64_t) {
  throw Error("this model has no MTP heads");
}
void Model::forward_mtp(const MtpEntry*, size_t) { throw Error("this model has no MTP heads"); }

std::unique_ptr<Model> create_model(std::shared_ptr<Checkpoint> ckpt, int num_threads) {
  ModelOptions o;
  o.num_threads = num_threads;
  return create_model(std::move(ckpt), o);
}

}  // namespace rapid::model
