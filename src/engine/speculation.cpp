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

// Before two different token counts are seen: 10 ms a step and 15 % of that per extra token (a
// small model on a CPU is weight-bandwidth bound, so verifying looks cheap until measured).
constexpr double kPriorC0 = 0.010, kPriorC1 = 0.0015;

void StepCostModel::observe(int64_t tokens, double seconds) {
  // Every count's weight ages with each step, so a value not seen again lately (the cold first steps
  // of a process, a contended minute) stops being trusted and its neighbours stand in for it.
  for (double& w : weight_) w *= 0.95;
  if (tokens < kCounts) {
    const size_t n = size_t(tokens);
    if (weight_[n] < kFresh) weight_[n] = mean_[n] = 0;  // not measured lately: start over
    weight_[n] = weight_[n] * 0.9 + 1;                      // about the last ten steps of this size
    // A plain mean: biased towards the fast steps, it made the counts seen every step (one token)
    // look cheaper than those only drafts reach, on a loaded machine most of all.
    mean_[n] += (seconds - mean_[n]) / weight_[n];
  }
  constexpr double kDecay = 0.995;
  const double x = double(tokens), y = seconds;
  sw_ = sw_ * kDecay + 1;
  sx_ = sx_ * kDecay + x;
  sy_ = sy_ * kDecay + y;
  sxx_ = sxx_ * kDecay + x * x;
  sxy_ = sxy_ * kDecay + x * y;
}

double StepCostModel::slope() const {
  if (sw_ < 1.5) return kPriorC1;  // two steps of different sizes give a slope (var below)
  const double mx = sx_ / sw_, my = sy_ / sw_;
  const double var = sxx_ / sw_ - mx * mx;
  if (var < 1e-6) return kPriorC1;
  return std::max(1e-6, (sxy_ / sw_ - mx * my) / var);
}

double StepCostModel::line_c0() const {
  if (sw_ < 1) return kPriorC0;
  return std::max(1e-6, sy_ / sw_ - slope() * sx_ / sw_);
}

double StepCostModel::ratio() const { return std::clamp(slope() / line_c0(), 0.005, 10.0); }

double StepCostModel::seconds(int64_t tokens) const {
  const int64_t n = std::max<int64_t>(tokens, 1);
  auto fresh = [&](int64_t c) { return weight_[size_t(c)] >= kFresh; };
  int64_t lo = std::min(n, kCounts) - 1, hi = n + 1;
  while (lo > 0 && !fresh(lo)) --lo;
  while (hi < kCounts && !fresh(hi)) ++hi;
  const bool has_lo = lo > 0, has_hi = hi < kCounts;
  double t = line_c0() + slope() * double(n);
  if (n < kCounts && fresh(n))
    t = mean_[size_t(n)];
  else if (has_lo && has_hi)
    t = mean_[size_t(lo)] + (mean_[size_t(hi)] - mean_[size_t(lo)]) * double(n - lo) / double(hi - lo);
  else if (has_lo)
    t = mean_[size_t(lo)] + slope() * double(n - lo);
  else if (has_hi)
    t = std::max(1e-6, mean_[size_t(hi)] - slope() * double(hi - n));
  // More tokens never take less time: any larger count measured lately bounds it from above.
  for (int64_t c = hi; c < kCounts; ++c)
    if (fresh(c)) t = std::min(t, mean_[size_t(c)]);
  return t;
}

int SpeculationController::depth(const SpecState& s, int64_t batch, int64_t tokens) const {
  if (!enabled()) return 0;
  if (o_.mode == SpecMode::Ngram || o_.mode == SpecMode::Draft || o_.mode == SpecMode::Mtp) return o_.max_draft;
  const double a = std::min(s.rate(), 0.995);
  const int64_t n = std::max<int64_t>(tokens, 1);
  const double base = cost_.seconds(n);
  double best = double(batch) / base;
  int best_k = 0;
  double gain = 0, ak = 1;
  for (int k = 1; k <= o_.max_draft; ++k) {
    ak *= a;
    gain += ak;  // a + a^2 + ... + a^k
    // A draft model runs one forward per drafted token before the step.
    const double v = (double(batch) + gain) / (std::max(base, cost_.seconds(n + k)) + draft_step_s_ * k);
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
  if (idle_ + 1 < probe_gap_) return {};
  // One draft pays when a > B·c1 / (c0 + c1·N); with the prior's cheap c1 that is the least
  // acceptance at which a probe could find drafting worthwhile.
  const double hopeless = double(batch) * kPriorC1 / (kPriorC0 + kPriorC1 * double(std::max<int64_t>(tokens, 1)));
  if (s.shadows > 0 && s.rate() <= hopeless) return {};
  return {o_.max_draft, true};
}

SpecState SpeculationController::new_state() const {
  SpecState s;
  const double r = shared_.rate();
  s.accepted = 2 * r;
  s.rejected = 2 * (1 - r);
  return s;
}

namespace {

// k drafted tokens of which a were accepted, into the decayed acceptance counts.
void count(SpecEstimate& s, int d, int a) {
  constexpr double kDecay = 0.9;  // about the last ten drafted steps
  s.accepted = s.accepted * kDecay + a;
  s.rejected = s.rejected * kDecay + (a < d ? 1 : 0);
}

}  // namespace

void SpeculationController::observe(SpecState& s, int d, int a, bool probe) {
  ++s.summary.decode_steps;
  if (d <= 0) {
    ++idle_;
    return;
  }
  idle_ = 0;
  if (probe) probe_gap_ = std::min(2 * probe_gap_, kProbeMax);
  count(s, d, a);
  count(shared_, d, a);
  ++s.summary.draft_steps;
  s.summary.probe_steps += probe ? 1 : 0;
  s.summary.drafted += d;
  s.summary.accepted += a;
}

void SpeculationController::start_shadow(SpecState& s, std::vector<int32_t> guess, size_t at) {
  s.shadow = std::move(guess);
  s.shadow_at = at;
}

void SpeculationController::settle_shadow(SpecState& s, const std::vector<int32_t>& tokens) {
  if (s.shadow.empty() || tokens.size() <= s.shadow_at) return;
  size_t a = 0;
  while (a < s.shadow.size() && s.shadow_at + a < tokens.size() && tokens[s.shadow_at + a] == s.shadow[a]) ++a;
  const bool settled = a == s.shadow.size() || s.shadow_at + a < tokens.size();  // all right, or one wrong
  if (!settled) return;
  count(s, int(s.shadow.size()), int(a));
  count(shared_, int(s.shadow.size()), int(a));
  s.shadow.clear();
  ++s.shadows;
}

void SpeculationController::observe_draft_step(double seconds) {
  draft_step_s_ = draft_step_s_ > 0 ? 0.9 * draft_step_s_ + 0.1 * seconds : seconds;
}

}  // namespace rapid::engine
