#include "engine/speculation.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace rapid::engine {

SpecMode parse_spec_mode(const std::string& s) {
  if (s == "off") return SpecMode::Off;
  if (s == "auto") return SpecMode::Auto;
  if (s == "ngram") return SpecMode::Ngram;
  if (s == "draft") return SpecMode::Draft;
  if (s == "mtp") return SpecMode::Mtp;
  throw Error("speculative mode '" + s + "' is not one of auto, off, ngram, draft, mtp");
}

const char* spec_mode_name(SpecMode m) {
  switch (m) {
    case SpecMode::Off: return "off";
    case SpecMode::Auto: return "auto";
    case SpecMode::Ngram: return "ngram";
    case SpecMode::Draft: return "draft";
    case SpecMode::Mtp: return "mtp";
  }
  return "?";
}

double SpeculationController::cost_per_token_ratio() const {
  // Until a few steps of different sizes are seen, assume an extra token costs 15 % of a step
  // (a small model on a CPU is weight-bandwidth bound, so verifying is cheap).
  constexpr double kPrior = 0.15;
  if (sw_ < 3) return kPrior;
  const double mx = sx_ / sw_, my = sy_ / sw_;
  const double var = sxx_ / sw_ - mx * mx;
  if (var < 1e-6) return kPrior;
  const double c1 = std::max(0.0, (sxy_ / sw_ - mx * my) / var);
  const double c0 = my - c1 * mx;
  if (c0 <= 0) return kPrior;
  return std::clamp(c1 / c0, 0.005, 10.0);
}

int SpeculationController::depth(const SpecState& s, int64_t batch, int64_t tokens) const {
  if (!enabled()) return 0;
  if (o_.mode == SpecMode::Ngram || o_.mode == SpecMode::Draft || o_.mode == SpecMode::Mtp) return o_.max_draft;
  const double a = std::min(s.rate(), 0.995);
  double r = cost_per_token_ratio();
  const double per_draft = draft_step_s_ > 0 ? r * draft_step_s_ / std::max(1e-6, step_c1()) : 0.0;
  // In units of c0: the step costs 1 + r·tokens; k drafts add r·k.
  const double base_cost = 1.0 + r * double(std::max<int64_t>(tokens, 1));
  double best = double(batch) / base_cost;
  int best_k = 0;
  double gain = 0, ak = 1;
  for (int k = 1; k <= o_.max_draft; ++k) {
    ak *= a;
    gain += ak;  // a + a^2 + ... + a^k
    const double v = (double(batch) + gain) / (base_cost + (r + per_draft) * k);
    if (v > best * 1.0001) {
      best = v;
      best_k = k;
    }
  }
  return best_k;
}

SpecChoice SpeculationController::choose(const SpecState& s, int64_t batch, int64_t tokens) const {
  const int k = depth(s, batch, tokens);
  if (k > 0 || o_.mode != SpecMode::Auto || !enabled()) return {k, false};
  const bool due = shared_on_ ? shared_.idle + 1 >= shared_.probe_gap : s.idle + 1 >= s.probe_gap;
  if (due) return {o_.max_draft, true};
  return {};
}

SpecState SpeculationController::new_state() const {
  SpecState s;
  if (shared_on_) {
    const double r = shared_.rate();
    s.accepted = 2 * r;
    s.rejected = 2 * (1 - r);
  }
  return s;
}

namespace {

// One decode step's outcome for the pacing and the decayed counts (per sequence or model-wide).
void learn(SpecEstimate& s, int d, int a, bool probe) {
  if (d <= 0) {
    ++s.idle;
    return;
  }
  s.idle = 0;
  // A probe backs the next one off; the rule drafting on its own means probing is not needed.
  s.probe_gap = probe ? std::min(2 * s.probe_gap, kProbeMax) : kProbeFirst;
  constexpr double kDecay = 0.9;  // about the last ten drafted steps
  s.accepted = s.accepted * kDecay + a;
  s.rejected = s.rejected * kDecay + (a < d ? 1 : 0);
}

}  // namespace

void SpeculationController::observe(SpecState& s, int d, int a, bool probe) {
  ++s.summary.decode_steps;
  learn(s, d, a, probe);
  if (shared_on_) learn(shared_, d, a, probe);
  if (d <= 0) return;
  ++s.summary.draft_steps;
  s.summary.probe_steps += probe ? 1 : 0;
  s.summary.drafted += d;
  s.summary.accepted += a;
}

void SpeculationController::observe_draft_step(double seconds) {
  draft_step_s_ = draft_step_s_ > 0 ? 0.9 * draft_step_s_ + 0.1 * seconds : seconds;
}

double SpeculationController::step_c1() const {
  // Seconds per token of the target (the slope of the step-time fit), or a guess before data.
  if (sw_ < 3) return 1e-3;
  const double mx = sx_ / sw_, my = sy_ / sw_;
  const double var = sxx_ / sw_ - mx * mx;
  if (var < 1e-6) return 1e-3;
  return std::max(1e-6, (sxy_ / sw_ - mx * my) / var);
}

void SpeculationController::observe_step(int64_t tokens, double seconds) {
  constexpr double kDecay = 0.995;
  const double x = double(tokens), y = seconds;
  sw_ = sw_ * kDecay + 1;
  sx_ = sx_ * kDecay + x;
  sy_ = sy_ * kDecay + y;
  sxx_ = sxx_ * kDecay + x * x;
  sxy_ = sxy_ * kDecay + x * y;
}

}  // namespace rapid::engine
