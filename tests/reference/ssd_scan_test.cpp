// SSD scan reference: the sequential recurrence against the naive quadratic (attention-like) form, its
// reverse-time backward against central finite differences in fp64 (including sequences longer than the
// backward's recomputation segment), and the fp32 entry points against the fp64 generic code.
#include "reference/ssd_scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

using ref::SsdScanShape;

struct Inputs {
  std::vector<double> x, dt, A, Bm, Cm, D;
};

int64_t x_size(const SsdScanShape& s) { return s.batch * s.seqlen * s.nheads * s.headdim; }
int64_t dt_size(const SsdScanShape& s) { return s.batch * s.seqlen * s.nheads; }
int64_t bc_size(const SsdScanShape& s) { return s.batch * s.seqlen * s.ngroups * s.dstate; }

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// dt in (0.01, 0.6) like softplus outputs, A in [-4, -0.5]: decays that matter over a few steps.
Inputs make_inputs(const SsdScanShape& s, uint64_t seed) {
  Inputs in;
  in.x = to_double(test::random_normal(x_size(s), seed));
  in.Bm = to_double(test::random_normal(bc_size(s), seed + 1, 0.7f));
  in.Cm = to_double(test::random_normal(bc_size(s), seed + 2, 0.7f));
  in.D = to_double(test::random_normal(s.nheads, seed + 3));
  std::mt19937_64 gen(seed + 4);
  std::uniform_real_distribution<double> udt(0.01, 0.6), ua(0.5, 4.0);
  in.dt.resize(dt_size(s));
  for (auto& v : in.dt) v = udt(gen);
  in.A.resize(s.nheads);
  for (auto& v : in.A) v = -ua(gen);
  return in;
}

std::vector<double> forward(const Inputs& in, const SsdScanShape& s, bool with_d = true) {
  std::vector<double> y(x_size(s));
  ref::ssd_scan_forward_generic<double>(y.data(), in.x.data(), in.dt.data(), in.A.data(), in.Bm.data(),
                                        in.Cm.data(), with_d ? in.D.data() : nullptr, s);
  return y;
}

// y[b,t,h,:] = sum_{s<=t} (C_t . B_s) exp(A_h sum_{r=s+1..t} dt_r) dt_s x_s + D_h x_t, term by term.
std::vector<double> quadratic_form(const Inputs& in, const SsdScanShape& s) {
  std::vector<double> y(x_size(s), 0.0);
  const int64_t P = s.headdim, N = s.dstate, hpg = s.nheads / s.ngroups;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.nheads; ++h) {
      const int64_t g = h / hpg;
      for (int64_t t = 0; t < s.seqlen; ++t) {
        double* yt = &y[((b * s.seqlen + t) * s.nheads + h) * P];
        double decay_sum = 0.0;  // sum_{r=s+1..t} dt_r, grown as s walks down from t
        for (int64_t j = t; j >= 0; --j) {
          if (j < t) decay_sum += in.dt[(b * s.seqlen + j + 1) * s.nheads + h];
          double cb = 0.0;
          for (int64_t n = 0; n < N; ++n)
            cb += in.Cm[((b * s.seqlen + t) * s.ngroups + g) * N + n] * in.Bm[((b * s.seqlen + j) * s.ngroups + g) * N + n];
          const double w = cb * std::exp(in.A[h] * decay_sum) * in.dt[(b * s.seqlen + j) * s.nheads + h];
          for (int64_t p = 0; p < P; ++p) yt[p] += w * in.x[((b * s.seqlen + j) * s.nheads + h) * P + p];
        }
        for (int64_t p = 0; p < P; ++p) yt[p] += in.D[h] * in.x[((b * s.seqlen + t) * s.nheads + h) * P + p];
      }
    }
  return y;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(SsdScanReference, ForwardMatchesQuadraticForm) {
  for (const SsdScanShape s : {SsdScanShape{2, 9, 4, 3, 2, 5}, SsdScanShape{1, 70, 2, 4, 1, 8}}) {
    const Inputs in = make_inputs(s, 100 + s.seqlen);
    const auto y = forward(in, s);
    const auto y_q = quadratic_form(in, s);
    EXPECT_LT(max_abs_diff(y, y_q), 1e-10) << "seqlen " << s.seqlen;
    double norm = 0.0;
    for (double v : y) norm += v * v;
    EXPECT_GT(norm, 1.0) << "test setup: outputs should not vanish";
  }
}

// L = sum(W * y); every gradient against central differences (a sample of entries for the larger shape).
void check_gradients(const SsdScanShape& s, uint64_t seed, int64_t max_checks_per_tensor) {
  const Inputs in = make_inputs(s, seed);
  const auto W = to_double(test::random_normal(x_size(s), seed + 10));
  std::vector<double> dx(x_size(s), -7.0), ddt(dt_size(s), -7.0), dA(s.nheads, -7.0), dB(bc_size(s), -7.0),
      dC(bc_size(s), -7.0), dD(s.nheads, -7.0);
  ref::ssd_scan_backward_generic<double>(dx.data(), ddt.data(), dA.data(), dB.data(), dC.data(), dD.data(), W.data(),
                                         in.x.data(), in.dt.data(), in.A.data(), in.Bm.data(), in.Cm.data(),
                                         in.D.data(), s);
  auto loss = [&](const Inputs& v) {
    const auto y = forward(v, s);
    double l = 0.0;
    for (size_t i = 0; i < y.size(); ++i) l += W[i] * y[i];
    return l;
  };
  std::mt19937_64 gen(seed + 20);
  auto check = [&](const char* name, std::vector<double> Inputs::*member, const std::vector<double>& grad) {
    const int64_t n = static_cast<int64_t>(grad.size());
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    const int64_t checks = std::min(n, max_checks_per_tensor);
    for (int64_t c = 0; c < checks; ++c) {
      const int64_t i = checks == n ? c : pick(gen);
      Inputs plus = in, minus = in;
      const double step = 1e-6 * std::max(1.0, std::fabs((in.*member)[i]));
      (plus.*member)[i] += step;
      (minus.*member)[i] -= step;
      const double fd = (loss(plus) - loss(minus)) / (2 * step);
      EXPECT_NEAR(grad[i], fd, 1e-6 * (1.0 + std::fabs(fd))) << name << "[" << i << "] seqlen " << s.seqlen;
    }
  };
  check("dx", &Inputs::x, dx);
  check("ddt", &Inputs::dt, ddt);
  check("dA", &Inputs::A, dA);
  check("dB", &Inputs::Bm, dB);
  check("dC", &Inputs::Cm, dC);
  check("dD", &Inputs::D, dD);
}

TEST(SsdScanReference, BackwardMatchesFiniteDifferencesFp64) { check_gradients({2, 7, 4, 3, 2, 5}, 1, 1 << 30); }

// Longer than the 64-step recomputation segment of the backward, 2 heads per group.
TEST(SsdScanReference, BackwardAcrossSegmentsMatchesFiniteDifferences) { check_gradients({1, 150, 4, 2, 2, 3}, 7, 60); }

TEST(SsdScanReference, NullDSkipsTheSkipConnection) {
  const SsdScanShape s{1, 5, 2, 3, 1, 4};
  const Inputs in = make_inputs(s, 31);
  const auto with_d = forward(in, s, true);
  const auto without_d = forward(in, s, false);
  for (size_t i = 0; i < with_d.size(); ++i) {
    const int64_t h = (static_cast<int64_t>(i) / s.headdim) % s.nheads;
    EXPECT_NEAR(with_d[i] - without_d[i], in.D[h] * in.x[i], 1e-12);
  }
}

TEST(SsdScanReference, Fp32EntryPointsMatchFp64) {
  const SsdScanShape s{2, 40, 4, 8, 2, 16};
  const Inputs in = make_inputs(s, 41);
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const auto x = as_float(in.x), dt = as_float(in.dt), A = as_float(in.A), Bm = as_float(in.Bm),
             Cm = as_float(in.Cm), D = as_float(in.D);
  const auto W = test::random_normal(x_size(s), 42);
  std::vector<float> y(x_size(s)), dx(x_size(s)), ddt(dt_size(s)), dA(s.nheads), dB(bc_size(s)), dC(bc_size(s)),
      dD(s.nheads);
  ref::ssd_scan_forward(y.data(), x.data(), dt.data(), A.data(), Bm.data(), Cm.data(), D.data(), s);
  ref::ssd_scan_backward(dx.data(), ddt.data(), dA.data(), dB.data(), dC.data(), dD.data(), W.data(), x.data(),
                         dt.data(), A.data(), Bm.data(), Cm.data(), D.data(), s);
  // fp64 on the same (fp32-representable) inputs.
  Inputs in32{to_double(x), to_double(dt), to_double(A), to_double(Bm), to_double(Cm), to_double(D)};
  const auto y64 = forward(in32, s);
  std::vector<double> dx64(x_size(s)), ddt64(dt_size(s)), dA64(s.nheads), dB64(bc_size(s)), dC64(bc_size(s)),
      dD64(s.nheads);
  const auto W64 = to_double(W);
  ref::ssd_scan_backward_generic<double>(dx64.data(), ddt64.data(), dA64.data(), dB64.data(), dC64.data(),
                                         dD64.data(), W64.data(), in32.x.data(), in32.dt.data(), in32.A.data(),
                                         in32.Bm.data(), in32.Cm.data(), in32.D.data(), s);
  EXPECT_LT(test::relative_error(y, as_float(y64)), 1e-5);
  EXPECT_LT(test::relative_error(dx, as_float(dx64)), 1e-5);
  EXPECT_LT(test::relative_error(ddt, as_float(ddt64)), 1e-5);
  EXPECT_LT(test::relative_error(dA, as_float(dA64)), 1e-5);
  EXPECT_LT(test::relative_error(dB, as_float(dB64)), 1e-5);
  EXPECT_LT(test::relative_error(dC, as_float(dC64)), 1e-5);
  EXPECT_LT(test::relative_error(dD, as_float(dD64)), 1e-5);
}

// Decoding's continued scan: a sequence scanned in pieces (a prompt, then single tokens, then a chunk),
// each piece from the state the last one left, gives the whole scan's y exactly, for each of two
// sequences with their own states; and the state left after the last piece is the recurrence's final state.
TEST(SsdScanReference, ContinuedInPiecesEqualsTheWholeScan) {
  const SsdScanShape whole{.batch = 2, .seqlen = 11, .nheads = 4, .headdim = 3, .ngroups = 2, .dstate = 5};
  const Inputs in = make_inputs(whole, 61);
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const auto x = as_float(in.x), dt = as_float(in.dt), A = as_float(in.A), Bm = as_float(in.Bm), Cm = as_float(in.Cm),
             D = as_float(in.D);
  std::vector<float> want(x_size(whole));
  ref::ssd_scan_forward(want.data(), x.data(), dt.data(), A.data(), Bm.data(), Cm.data(), D.data(), whole);
  const int64_t H = whole.nheads, P = whole.headdim, N = whole.dstate, G = whole.ngroups;
  std::vector<float> y(x_size(whole), std::nanf("")), state(whole.batch * H * P * N, 0.0f);
  for (int64_t b = 0; b < whole.batch; ++b) {
    float* held = state.data() + b * H * P * N;
    for (const auto& [t0, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 1}, {5, 1}, {6, 5}}) {
      const SsdScanShape piece{.batch = 1, .seqlen = n, .nheads = H, .headdim = P, .ngroups = G, .dstate = N};
      const int64_t row = b * whole.seqlen + t0;
      ref::ssd_scan_forward_continued(y.data() + row * H * P, held, x.data() + row * H * P, dt.data() + row * H,
                                      A.data(), Bm.data() + row * G * N, Cm.data() + row * G * N, D.data(), piece);
    }
  }
  EXPECT_EQ(y, want);
  // One more token with x = 0 reads the final state through C alone: y = state C.
  for (int64_t b = 0; b < whole.batch; ++b) {
    const SsdScanShape one{.batch = 1, .seqlen = 1, .nheads = H, .headdim = P, .ngroups = G, .dstate = N};
    std::vector<float> x0(H * P, 0.0f), dt0(H, 0.1f), B0(G * N, 0.0f), C1(G * N), y1(H * P);
    for (int64_t i = 0; i < G * N; ++i) C1[i] = static_cast<float>(i % N == 2);  // picks state column 2
    std::vector<float> held(state.begin() + b * H * P * N, state.begin() + (b + 1) * H * P * N);
    ref::ssd_scan_forward_continued(y1.data(), held.data(), x0.data(), dt0.data(), A.data(), B0.data(), C1.data(),
                                    D.data(), one);
    // The recurrence's final state, element (h, p, 2), in fp64 from the inputs.
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      for (int64_t p = 0; p < P; ++p) {
        double s = 0.0;
        for (int64_t t = 0; t < whole.seqlen; ++t) {
          const int64_t r = b * whole.seqlen + t;
          s = std::exp(in.dt[r * H + h] * in.A[h]) * s +
              in.dt[r * H + h] * in.x[(r * H + h) * P + p] * in.Bm[(r * G + g) * N + 2];
        }
        s *= std::exp(0.1f * A[h]);
        EXPECT_NEAR(y1[h * P + p], s, 1e-5 * (1.0 + std::abs(s))) << "b=" << b << " h=" << h << " p=" << p;
      }
    }
  }
}

}  // namespace
}  // namespace sg
