#pragma once
// CPU fp32 twin of src/kernels/ssd_scan: the Mamba2 SSD scan (A = a_h * identity per head) as the plain
// sequential recurrence, per batch b and head h (group g = h / (nheads / ngroups)):
//   state_t = exp(dt_t A_h) state_{t-1} + dt_t x_t B_t^T        (state [headdim, dstate], state_{-1} = 0)
//   y_t     = state_t C_t + D_h x_t
// and its exact backward as the reverse-time recurrence. It shares nothing with the chunked GPU algorithm,
// so it checks it independently.
//
// Layouts (row-major, contiguous): x, y, dy, dx [B, S, H, P]; dt, ddt [B, S, H]; A, D, dA, dD [H];
// Bm, Cm, dBm, dCm [B, S, G, N]. D may be null (no skip; dD then untouched and may be null).
// Every gradient is OVERWRITTEN.
#include <cstdint>

namespace sg::ref {

struct SsdScanShape {
  int64_t batch = 0, seqlen = 0, nheads = 0, headdim = 0, ngroups = 0, dstate = 0;
};

void ssd_scan_forward(float* y, const float* x, const float* dt, const float* A, const float* Bm, const float* Cm,
                      const float* D, const SsdScanShape& shape);

// The scan continued from kept states, as decoding runs it (a prompt, then one token at a time):
// state [batch, nheads, headdim, dstate] holds each sequence's state before its first row (zero at the
// sequence's start) and is left holding the state after its last. The same arithmetic as ssd_scan_forward,
// which is this from zero states, so a sequence scanned in pieces gives the same y bit for bit.
void ssd_scan_forward_continued(float* y, float* state, const float* x, const float* dt, const float* A,
                                const float* Bm, const float* Cm, const float* D, const SsdScanShape& shape);
void ssd_scan_backward(float* dx, float* ddt, float* dA, float* dBm, float* dCm, float* dD, const float* dy,
                       const float* x, const float* dt, const float* A, const float* Bm, const float* Cm,
                       const float* D, const SsdScanShape& shape);

// Scalar-generic versions (float and double instantiated; the fp32 functions above call them) so tests can
// check the gradients against finite differences in fp64. Inner sums accumulate in double either way.
template <class Real>
void ssd_scan_forward_generic(Real* y, const Real* x, const Real* dt, const Real* A, const Real* Bm, const Real* Cm,
                              const Real* D, const SsdScanShape& shape);
template <class Real>
void ssd_scan_backward_generic(Real* dx, Real* ddt, Real* dA, Real* dBm, Real* dCm, Real* dD, const Real* dy,
                               const Real* x, const Real* dt, const Real* A, const Real* Bm, const Real* Cm,
                               const Real* D, const SsdScanShape& shape);

}  // namespace sg::ref
