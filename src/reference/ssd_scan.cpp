#include "reference/ssd_scan.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/strings.h"

namespace sg::ref {
namespace {

void check_shape(const char* op, const SsdScanShape& s) {
  SG_CHECK(s.batch >= 0 && s.seqlen >= 0 && s.nheads > 0 && s.headdim > 0 && s.ngroups > 0 && s.dstate > 0 &&
               s.nheads % s.ngroups == 0,
           strprintf("%s: bad shape batch=%lld seqlen=%lld nheads=%lld headdim=%lld ngroups=%lld dstate=%lld "
                     "(nheads must be a positive multiple of ngroups)",
                     op, static_cast<long long>(s.batch), static_cast<long long>(s.seqlen),
                     static_cast<long long>(s.nheads), static_cast<long long>(s.headdim),
                     static_cast<long long>(s.ngroups), static_cast<long long>(s.dstate)));
}

// Index helpers for the [B, S, H, P], [B, S, H] and [B, S, G, N] layouts.
struct Index {
  const SsdScanShape& s;
  int64_t x(int64_t b, int64_t t, int64_t h) const { return ((b * s.seqlen + t) * s.nheads + h) * s.headdim; }
  int64_t dt(int64_t b, int64_t t, int64_t h) const { return (b * s.seqlen + t) * s.nheads + h; }
  int64_t bc(int64_t b, int64_t t, int64_t g) const { return ((b * s.seqlen + t) * s.ngroups + g) * s.dstate; }
};

// One step of the recurrence: state = exp(dt A) state + dt x B^T.
template <class Real>
void advance(Real* state, const Real* x, const Real* Bv, Real dt, Real A, int64_t P, int64_t N) {
  const Real decay = static_cast<Real>(std::exp(static_cast<double>(dt) * static_cast<double>(A)));
  for (int64_t p = 0; p < P; ++p) {
    const Real dtx = dt * x[p];
    for (int64_t n = 0; n < N; ++n) state[p * N + n] = decay * state[p * N + n] + dtx * Bv[n];
  }
}

// The forward from zero states (kept == nullptr) or from the states in `kept` [batch, nheads, P, N], which
// are left holding the states after the last row.
template <class Real>
void scan_forward(Real* y, Real* kept, const Real* x, const Real* dt, const Real* A, const Real* Bm, const Real* Cm,
                  const Real* D, const SsdScanShape& s) {
  const Index ix{s};
  const int64_t P = s.headdim, N = s.dstate, heads_per_group = s.nheads / s.ngroups;
  std::vector<Real> state(P * N);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.nheads; ++h) {
      const int64_t g = h / heads_per_group;
      Real* held = kept != nullptr ? kept + (b * s.nheads + h) * P * N : nullptr;
      if (held != nullptr) {
        std::copy(held, held + P * N, state.begin());
      } else {
        std::fill(state.begin(), state.end(), Real(0));
      }
      for (int64_t t = 0; t < s.seqlen; ++t) {
        const Real* xt = x + ix.x(b, t, h);
        advance(state.data(), xt, Bm + ix.bc(b, t, g), dt[ix.dt(b, t, h)], A[h], P, N);
        const Real* Ct = Cm + ix.bc(b, t, g);
        Real* yt = y + ix.x(b, t, h);
        for (int64_t p = 0; p < P; ++p) {
          double acc = D != nullptr ? static_cast<double>(D[h]) * xt[p] : 0.0;
          for (int64_t n = 0; n < N; ++n) acc += static_cast<double>(state[p * N + n]) * Ct[n];
          yt[p] = static_cast<Real>(acc);
        }
      }
      if (held != nullptr) std::copy(state.begin(), state.end(), held);
    }
  }
}

}  // namespace

template <class Real>
void ssd_scan_forward_generic(Real* y, const Real* x, const Real* dt, const Real* A, const Real* Bm, const Real* Cm,
                              const Real* D, const SsdScanShape& s) {
  check_shape("ref::ssd_scan_forward", s);
  scan_forward<Real>(y, nullptr, x, dt, A, Bm, Cm, D, s);
}

// Reverse-time recurrence. With decay_t = exp(dt_t A) and grad_t = dL/dstate_t (total):
//   grad_t  = dy_t C_t^T + decay_{t+1} grad_{t+1}
//   dx_t    = dt_t grad_t B_t + D dy_t          dB_t += dt_t grad_t^T x_t       dC_t += state_t^T dy_t
//   ddt_t   = A decay_t <grad_t, state_{t-1}> + <grad_t, x_t B_t^T>
//   dA     += dt_t decay_t <grad_t, state_{t-1}>                                dD   += <dy_t, x_t>
// The states are recomputed segment by segment from checkpoints (every kSegment steps), newest first.
template <class Real>
void ssd_scan_backward_generic(Real* dx, Real* ddt, Real* dA, Real* dBm, Real* dCm, Real* dD, const Real* dy,
                               const Real* x, const Real* dt, const Real* A, const Real* Bm, const Real* Cm,
                               const Real* D, const SsdScanShape& s) {
  check_shape("ref::ssd_scan_backward", s);
  constexpr int64_t kSegment = 64;
  const Index ix{s};
  const int64_t P = s.headdim, N = s.dstate, heads_per_group = s.nheads / s.ngroups, S = s.seqlen;
  const int64_t num_segments = (S + kSegment - 1) / kSegment;
  std::fill(dBm, dBm + s.batch * S * s.ngroups * N, Real(0));
  std::fill(dCm, dCm + s.batch * S * s.ngroups * N, Real(0));
  std::vector<double> dA_acc(s.nheads, 0.0), dD_acc(s.nheads, 0.0);
  std::vector<Real> checkpoints(num_segments * P * N), states((kSegment + 1) * P * N), grad(P * N);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.nheads; ++h) {
      const int64_t g = h / heads_per_group;
      // Forward: the state entering each segment.
      std::vector<Real> state(P * N, Real(0));
      for (int64_t seg = 0; seg < num_segments; ++seg) {
        std::copy(state.begin(), state.end(), checkpoints.begin() + seg * P * N);
        for (int64_t t = seg * kSegment; t < std::min(S, (seg + 1) * kSegment); ++t)
          advance(state.data(), x + ix.x(b, t, h), Bm + ix.bc(b, t, g), dt[ix.dt(b, t, h)], A[h], P, N);
      }
      std::fill(grad.begin(), grad.end(), Real(0));  // holds decay_{t+1} grad_{t+1} at the top of each step
      for (int64_t seg = num_segments - 1; seg >= 0; --seg) {
        const int64_t t0 = seg * kSegment, t1 = std::min(S, t0 + kSegment);
        // states[k] = state_{t0 + k - 1}; states[0] is the checkpoint.
        std::copy(checkpoints.begin() + seg * P * N, checkpoints.begin() + (seg + 1) * P * N, states.begin());
        for (int64_t t = t0; t < t1; ++t) {
          Real* next = states.data() + (t - t0 + 1) * P * N;
          std::copy(next - P * N, next, next);
          advance(next, x + ix.x(b, t, h), Bm + ix.bc(b, t, g), dt[ix.dt(b, t, h)], A[h], P, N);
        }
        for (int64_t t = t1 - 1; t >= t0; --t) {
          const Real* prev = states.data() + (t - t0) * P * N;  // state_{t-1}
          const Real* cur = prev + P * N;                      // state_t
          const Real* xt = x + ix.x(b, t, h);
          const Real* dyt = dy + ix.x(b, t, h);
          const Real* Bt = Bm + ix.bc(b, t, g);
          const Real* Ct = Cm + ix.bc(b, t, g);
          const Real dtt = dt[ix.dt(b, t, h)];
          const double decay = std::exp(static_cast<double>(dtt) * static_cast<double>(A[h]));
          for (int64_t p = 0; p < P; ++p)
            for (int64_t n = 0; n < N; ++n) grad[p * N + n] += dyt[p] * Ct[n];
          Real* dCt = dCm + ix.bc(b, t, g);
          for (int64_t n = 0; n < N; ++n) {
            double acc = 0.0;
            for (int64_t p = 0; p < P; ++p) acc += static_cast<double>(cur[p * N + n]) * dyt[p];
            dCt[n] += static_cast<Real>(acc);
          }
          Real* dxt = dx + ix.x(b, t, h);
          double grad_dot_prev = 0.0, grad_dot_input = 0.0;
          for (int64_t p = 0; p < P; ++p) {
            double acc = 0.0;
            for (int64_t n = 0; n < N; ++n) {
              acc += static_cast<double>(grad[p * N + n]) * Bt[n];
              grad_dot_prev += static_cast<double>(grad[p * N + n]) * prev[p * N + n];
            }
            grad_dot_input += acc * xt[p];
            dxt[p] = static_cast<Real>(dtt * acc + (D != nullptr ? static_cast<double>(D[h]) * dyt[p] : 0.0));
          }
          Real* dBt = dBm + ix.bc(b, t, g);
          for (int64_t n = 0; n < N; ++n) {
            double acc = 0.0;
            for (int64_t p = 0; p < P; ++p) acc += static_cast<double>(grad[p * N + n]) * xt[p];
            dBt[n] += static_cast<Real>(dtt * acc);
          }
          ddt[ix.dt(b, t, h)] = static_cast<Real>(A[h] * decay * grad_dot_prev + grad_dot_input);
          dA_acc[h] += dtt * decay * grad_dot_prev;
          double skip = 0.0;
          for (int64_t p = 0; p < P; ++p) skip += static_cast<double>(dyt[p]) * xt[p];
          dD_acc[h] += skip;
          for (auto& v : grad) v = static_cast<Real>(v * decay);
        }
      }
    }
  }
  for (int64_t h = 0; h < s.nheads; ++h) {
    dA[h] = static_cast<Real>(dA_acc[h]);
    if (dD != nullptr) dD[h] = static_cast<Real>(dD_acc[h]);
  }
}

template void ssd_scan_forward_generic<float>(float*, const float*, const float*, const float*, const float*,
                                              const float*, const float*, const SsdScanShape&);
template void ssd_scan_forward_generic<double>(double*, const double*, const double*, const double*, const double*,
                                               const double*, const double*, const SsdScanShape&);
template void ssd_scan_backward_generic<float>(float*, float*, float*, float*, float*, float*, const float*,
                                               const float*, const float*, const float*, const float*,
                                               const float*, const float*, const SsdScanShape&);
template void ssd_scan_backward_generic<double>(double*, double*, double*, double*, double*, double*,
                                                const double*, const double*, const double*, const double*,
                                                const double*, const double*, const double*, const SsdScanShape&);

void ssd_scan_forward(float* y, const float* x, const float* dt, const float* A, const float* Bm, const float* Cm,
                      const float* D, const SsdScanShape& shape) {
  ssd_scan_forward_generic<float>(y, x, dt, A, Bm, Cm, D, shape);
}

void ssd_scan_forward_continued(float* y, float* state, const float* x, const float* dt, const float* A,
                                const float* Bm, const float* Cm, const float* D, const SsdScanShape& shape) {
  check_shape("ref::ssd_scan_forward_continued", shape);
  scan_forward<float>(y, state, x, dt, A, Bm, Cm, D, shape);
}

void ssd_scan_backward(float* dx, float* ddt, float* dA, float* dBm, float* dCm, float* dD, const float* dy,
                       const float* x, const float* dt, const float* A, const float* Bm, const float* Cm,
                       const float* D, const SsdScanShape& shape) {
  ssd_scan_backward_generic<float>(dx, ddt, dA, dBm, dCm, dD, dy, x, dt, A, Bm, Cm, D, shape);
}

}  // namespace sg::ref
