#include "reference/grouped_gemm.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "reference/column_sums.h"
#include "reference/linear.h"

namespace sg::ref {
namespace {

// Checks every segment (throws naming the first bad one).
void check_segments(const char* op, const GroupedRows& r) {
  SG_CHECK(r.num_groups >= 0 && (r.num_groups == 0 || (r.counts != nullptr && r.offsets != nullptr)),
           strprintf("%s: counts/offsets must be given for %d groups", op, r.num_groups));
  for (int g = 0; g < r.num_groups; ++g) {
    const int64_t first = r.offsets[g], rows = r.counts[g];
    SG_CHECK(rows >= 0 && first >= 0 && first + rows <= r.total_rows,
             strprintf("%s: expert %d's segment [%lld, %lld) is outside the %lld rows of the buffer", op, g,
                       static_cast<long long>(first), static_cast<long long>(first + rows),
                       static_cast<long long>(r.total_rows)));
  }
}

// Checks every segment first (nothing is written when one is bad), then calls f(g, first_row, rows) for
// the non-empty ones, in expert order.
template <class F>
void for_each_segment(const char* op, const GroupedRows& r, F&& f) {
  check_segments(op, r);
  for (int g = 0; g < r.num_groups; ++g) {
    if (r.counts[g] > 0) f(g, int64_t{r.offsets[g]}, int64_t{r.counts[g]});
  }
}

}  // namespace

// Each expert is one dense linear on its segment: the twin is reference/linear applied per segment.

void grouped_linear_forward(float* y, const float* x, const float* w, const GroupedRows& rows, int64_t N, int64_t K) {
  for_each_segment("grouped_linear_forward", rows, [&](int g, int64_t first, int64_t m) {
    linear_forward(y + first * N, x + first * K, w + g * N * K, m, K, N);
  });
}

void grouped_linear_backward_input(float* dx, const float* dy, const float* w, const GroupedRows& rows, int64_t N,
                                   int64_t K) {
  for_each_segment("grouped_linear_backward_input", rows, [&](int g, int64_t first, int64_t m) {
    linear_backward_input(dx + first * K, dy + first * N, w + g * N * K, m, K, N);
  });
}

void grouped_linear_backward_weight(float* dw, const float* dy, const float* x, const GroupedRows& rows, int64_t N,
                                    int64_t K, bool accumulate) {
  if (!accumulate) {
    // Overwrite = accumulate into zeros; experts without rows keep the zeros.
    check_segments("grouped_linear_backward_weight", rows);
    std::fill(dw, dw + int64_t{rows.num_groups} * N * K, 0.0f);
  }
  for_each_segment("grouped_linear_backward_weight", rows, [&](int g, int64_t first, int64_t m) {
    linear_backward_weight(dw + g * N * K, dy + first * N, x + first * K, m, K, N);
  });
}

void grouped_bias_forward(float* y, const float* bias, const GroupedRows& rows, int64_t N) {
  for_each_segment("grouped_bias_forward", rows, [&](int g, int64_t first, int64_t m) {
    for (int64_t r = first; r < first + m; ++r) {
      for (int64_t c = 0; c < N; ++c) y[r * N + c] += bias[g * N + c];
    }
  });
}

void grouped_bias_backward(float* dbias, const float* dy, const GroupedRows& rows, int64_t N) {
  for_each_segment("grouped_bias_backward", rows,
                   [&](int g, int64_t first, int64_t m) { column_sums(dbias + g * N, dy + first * N, m, N, N); });
}

}  // namespace sg::ref
