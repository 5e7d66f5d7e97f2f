// The calibrated window rule (runtime/window_costs.h): interpolation of the
// measured verifier costs, and where one more draft pays.
#include <cmath>

#include "check.h"
#include "runtime/window_costs.h"

using namespace guild;

namespace {
WindowCosts costs_of(std::initializer_list<std::pair<int, double>> measured, double draft_step_ms) {
  WindowCosts c;
  for (const auto& [t, ms] : measured) c.verify_ms[static_cast<size_t>(t)] = ms;
  c.draft_step_ms = draft_step_ms;
  c.valid = true;
  return c;
}
bool near(double a, double b) { return std::fabs(a - b) < 1e-9; }
}  // namespace

TEST(verify_costs_interpolate_between_measured_sizes) {
  const WindowCosts c = costs_of({{1, 10}, {2, 12}, {4, 16}, {8, 40}}, 1.0);
  CHECK(near(c.verify(1), 10) && near(c.verify(2), 12) && near(c.verify(4), 16));
  CHECK(near(c.verify(3), 14));
  CHECK(near(c.verify(6), 28));
  CHECK(near(c.verify(12), 64));  // past 8: the slope of 4..8 (6 ms per row)
  CHECK(near(c.verify(16), 88));
  CHECK(near(c.verify(0), 10) && near(c.verify(40), 88));  // clamped to 1..16
}

TEST(a_draft_is_made_only_where_it_raises_tokens_per_ms) {
  // A window costs about one step (weights read once for all rows): confident
  // drafts pay, up to where a draft's share of the yield (0.9^k) no longer
  // covers its step: with free steps all 15; with 0.5 ms steps 13
  // (E(13) = 7.71 tokens / 16.5 ms = 0.4673; E(14) = 7.94 / 17 = 0.4671).
  auto drafts_made = [](const WindowCosts& c, double p) {
    double e = 1.0, a = 1.0;
    int d = 0;
    while (d < 15 && window_grows(c, d, e, a * p)) { a *= p; e += a; ++d; }
    return d;
  };
  CHECK(drafts_made(costs_of({{1, 10}, {16, 10}}, 0.0), 0.9) == 15);
  CHECK(drafts_made(costs_of({{1, 10}, {16, 10}}, 0.5), 0.9) == 13);
  // A window costs T steps (compute bound): no draft pays, however confident.
  const WindowCosts linear = costs_of({{1, 10}, {2, 20}, {16, 160}}, 1.0);
  CHECK(!window_grows(linear, 0, 1.0, 0.99));
  // In between the rule stops where the next draft's expected yield no longer
  // covers its share: 10 ms + 2 per row, 0.5 per draft step, p 0.5 each:
  // 1 draft: 1.5 tokens / 12.5 ms = 0.120 > 0.100; 2: 1.75 / 15 = 0.117 < 0.120.
  const WindowCosts mid = costs_of({{1, 10}, {16, 40}}, 0.5);
  CHECK(window_grows(mid, 0, 1.0, 0.5));
  CHECK(!window_grows(mid, 1, 1.5, 0.25));
  // Without a calibration the rule says nothing (confidence alone decides).
  CHECK(window_grows(WindowCosts{}, 3, 1.2, 0.001));
}
