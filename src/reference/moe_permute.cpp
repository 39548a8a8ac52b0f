#include "reference/moe_permute.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/strings.h"

namespace sg::ref {

double moe_expert_capacity_exact(int64_t T, int64_t k, int64_t E, double capacity_factor) {
  SG_CHECK(E >= 1 && capacity_factor > 0.0 && std::isfinite(capacity_factor),
           strprintf("moe_expert_capacity: moe_expert_capacity_factor=%g must be finite and > 0 (E=%lld)",
                     capacity_factor, (long long)E));
  SG_CHECK(T >= 0 && k >= 1, strprintf("moe_expert_capacity: bad shape T=%lld k=%lld", (long long)T, (long long)k));
  return std::ceil(static_cast<double>(T) * static_cast<double>(k) / static_cast<double>(E) * capacity_factor);
}

int64_t moe_expert_capacity(int64_t T, int64_t k, int64_t E, double capacity_factor, bool pad_to_capacity) {
  const double exact = moe_expert_capacity_exact(T, k, E, capacity_factor);
  // Clamped in double, before the conversion (a double past int64's range does not convert).
  const double limit = pad_to_capacity ? 0x1p62 : static_cast<double>(T);
  return static_cast<int64_t>(std::min(exact, limit));
}

void check_moe_dispatch(const MoeDispatch& d, const char* op) {
  SG_CHECK(d.T >= 0 && d.E >= 1 && d.k >= 1 && d.k <= d.E,
           strprintf("%s: bad shape T=%lld E=%lld k=%lld (T >= 0, 1 <= k <= E)", op, (long long)d.T, (long long)d.E,
                     (long long)d.k));
  SG_CHECK(d.capacity >= 0, strprintf("%s: capacity=%lld must be >= 0 (0 = dropless)", op, (long long)d.capacity));
  SG_CHECK(!d.pad_to_capacity || d.capacity > 0,
           strprintf("%s: moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor (capacity > 0)", op));
  // The kernels hold the capacity and row ids in int32 (moe_expert_capacity clamps an unpadded capacity to T).
  constexpr int64_t kMaxRows = INT32_MAX;
  SG_CHECK(d.capacity <= kMaxRows,
           strprintf("%s: capacity=%lld exceeds 2^31 - 1 (int32 row ids); lower model.moe_expert_capacity_factor", op,
                     (long long)d.capacity));
  SG_CHECK(d.T * d.k <= kMaxRows && (!d.pad_to_capacity || d.capacity <= kMaxRows / d.E),
           strprintf("%s: the permuted rows (T k = %lld x %lld%s) do not fit int32 row ids; use fewer tokens per "
                     "microbatch%s",
                     op, (long long)d.T, (long long)d.k,
                     d.pad_to_capacity
                         ? strprintf(", padded E capacity = %lld x %lld", (long long)d.E, (long long)d.capacity).c_str()
                         : "",
                     d.pad_to_capacity ? " or a lower model.moe_expert_capacity_factor" : ""));
}

MoePermutation moe_preprocess(const int32_t* routing_map, const float* probs, const MoeDispatch& d) {
  check_moe_dispatch(d, "moe_preprocess");
  const int64_t slots = d.T * d.k, E = d.E;
  // The slots of each expert in token order (a slot index grows with its token).
  std::vector<std::vector<int32_t>> by_expert(E);
  for (int64_t s = 0; s < slots; ++s) {
    const int32_t e = routing_map[s];
    SG_CHECK(e >= 0 && e < E, strprintf("moe_preprocess: routing_map[%lld] = %d is not an expert id in [0, %lld)",
                                        (long long)s, e, (long long)E));
    by_expert[e].push_back(static_cast<int32_t>(s));
  }
  MoePermutation p;
  p.kept_counts.assign(E, 0);
  p.expert_rows.assign(E, 0);
  p.expert_row_offsets.assign(E + 1, 0);
  p.slot_to_row.assign(slots, -1);
  p.row_to_slot.assign(d.permuted_rows(), -1);
  for (int64_t e = 0; e < E; ++e) {
    std::vector<int32_t>& kept = by_expert[e];
    if (!d.dropless() && static_cast<int64_t>(kept.size()) > d.capacity) {
      if (d.drop_policy == MoeDropPolicy::probs) {
        // The capacity largest probs (ties: lower slot, i.e. lower token), then back to token order.
        std::stable_sort(kept.begin(), kept.end(), [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
        kept.resize(d.capacity);
        std::sort(kept.begin(), kept.end());
      } else {
        kept.resize(d.capacity);
      }
    }
    p.kept_counts[e] = static_cast<int32_t>(kept.size());
    p.expert_rows[e] = d.pad_to_capacity ? static_cast<int32_t>(d.capacity) : p.kept_counts[e];
    p.expert_row_offsets[e + 1] = p.expert_row_offsets[e] + p.expert_rows[e];
    for (size_t i = 0; i < kept.size(); ++i) {
      const int32_t row = p.expert_row_offsets[e] + static_cast<int32_t>(i);
      p.slot_to_row[kept[i]] = row;
      p.row_to_slot[row] = kept[i];
    }
  }
  return p;
}

void moe_permute_forward(float* permuted, const float* hidden, const int32_t* row_to_slot, int64_t rows, int64_t k,
                         int64_t H) {
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t s = row_to_slot[r];
    float* out = permuted + r * H;
    if (s < 0) {
      std::fill(out, out + H, 0.0f);
    } else {
      std::copy(hidden + (s / k) * H, hidden + (s / k + 1) * H, out);
    }
  }
}

void moe_permute_backward(float* dhidden, const float* dpermuted, const int32_t* slot_to_row, int64_t T, int64_t k,
                          int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    float* out = dhidden + t * H;
    std::fill(out, out + H, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t row = slot_to_row[t * k + j];
      if (row < 0) continue;
      for (int64_t h = 0; h < H; ++h) out[h] += dpermuted[row * H + h];
    }
  }
}

}  // namespace sg::ref
