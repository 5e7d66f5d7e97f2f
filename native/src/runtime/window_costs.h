// What a speculative window costs in this model and placement, measured once
// (the first drafting request of a model: GuildSession::calibrate_windows), and
// the rule that uses it: a window grows by one more draft only while the
// expected tokens per millisecond go up. Expected tokens take the drafter's
// own top-1 probabilities as acceptance estimates: with d drafts of
// probabilities p_1..p_d, E(d) = 1 + Σ_k Π_{i<=k} p_i, and the window costs
// C(d) = verify(d + 1) + d · draft_step. Where a window of T costs about T single
// steps (a CPU bound by compute, not by reading weights) no draft pays and
// none is made; where it costs little more than one (weights read once for
// all rows) drafting goes on while the drafter stays confident.
#pragma once
#include <array>
#include <cstdint>

namespace guild {

struct WindowCosts {
  static constexpr int kMaxT = 16;
  bool valid = false;
  std::array<double, kMaxT + 1> verify_ms{};  // [T]: a verifier pass of T rows (0: not measured)
  double draft_step_ms = 0.0;                 // one row of the drafter (block + head)

  // The verifier's cost of T rows: measured, else interpolated between the
  // measured sizes around T (extrapolated past the largest).
  double verify(int T) const;
  // Expected tokens per ms of a window with d drafts whose expected yield is
  // e_d tokens (E(d) above).
  double rate(int d, double e_d) const { return e_d / (verify(d + 1) + d * draft_step_ms); }
};

// The calibrated rule: with d drafts made (expected yield e_d), does a window
// with one more, accepted with probability a_next (Π p up to it), yield more
// tokens per ms? Always true when costs are not valid (no calibration).
bool window_grows(const WindowCosts& c, int d, double e_d, double a_next);

}  // namespace guild
