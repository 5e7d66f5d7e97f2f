#include "runtime/window_costs.h"

namespace guild {

double WindowCosts::verify(int T) const {
  if (T < 1) T = 1;
  if (T > kMaxT) T = kMaxT;
  if (verify_ms[T] > 0) return verify_ms[T];
  int lo = 0, hi = 0;  // the measured sizes around T
  for (int t = T - 1; t >= 1 && lo == 0; --t)
    if (verify_ms[t] > 0) lo = t;
  for (int t = T + 1; t <= kMaxT && hi == 0; ++t)
    if (verify_ms[t] > 0) hi = t;
  if (lo > 0 && hi > 0) return verify_ms[lo] + (verify_ms[hi] - verify_ms[lo]) * (T - lo) / (hi - lo);
  if (lo > 0) {
    // Past the largest measured size: go on with the slope of the last two.
    int below = 0;
    for (int t = lo - 1; t >= 1 && below == 0; --t)
      if (verify_ms[t] > 0) below = t;
    const double slope = below > 0 ? (verify_ms[lo] - verify_ms[below]) / (lo - below) : verify_ms[lo] / lo;
    return verify_ms[lo] + slope * (T - lo);
  }
  return hi > 0 ? verify_ms[hi] * T / hi : 0.0;
}

bool window_grows(const WindowCosts& c, int d, double e_d, double a_next) {
  if (!c.valid) return true;
  return c.rate(d + 1, e_d + a_next) > c.rate(d, e_d);
}

}  // namespace guild
