#pragma once
// Token arrays of every integer dtype as a .bin holds them, for the token scan's tests (data/token_scan.h,
// data/token_scan_share.h).
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "data/indexed_dataset.h"

namespace sg::test {

// Tokens of one dtype as the .bin holds them, and the values they stand for.
struct Array {
  data::TokenDtype dtype;
  std::vector<int64_t> values;
  std::vector<uint8_t> bytes;

  void set(size_t i, int64_t v) {
    values[i] = v;
    std::memcpy(bytes.data() + i * data::token_dtype_size(dtype), &v, data::token_dtype_size(dtype));  // little-endian
  }
};

inline int64_t lowest(data::TokenDtype dtype) {
  switch (dtype) {
    case data::TokenDtype::int8: return INT8_MIN;
    case data::TokenDtype::int16: return INT16_MIN;
    case data::TokenDtype::int32: return INT32_MIN;
    case data::TokenDtype::int64: return INT64_MIN;
    default: return 0;
  }
}

inline int64_t highest(data::TokenDtype dtype) {
  switch (dtype) {
    case data::TokenDtype::uint8: return UINT8_MAX;
    case data::TokenDtype::int8: return INT8_MAX;
    case data::TokenDtype::int16: return INT16_MAX;
    case data::TokenDtype::uint16: return UINT16_MAX;
    case data::TokenDtype::int32: return INT32_MAX;
    default: return INT64_MAX;
  }
}

// n tokens drawn from [lo, hi] (the dtype's whole range by default).
inline Array random_array(data::TokenDtype dtype, size_t n, uint64_t seed, int64_t lo, int64_t hi) {
  Array a{dtype, std::vector<int64_t>(n), std::vector<uint8_t>(n * data::token_dtype_size(dtype))};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(lo, hi);
  for (size_t i = 0; i < n; ++i) a.set(i, pick(rng));
  return a;
}

inline Array random_array(data::TokenDtype dtype, size_t n, uint64_t seed) {
  return random_array(dtype, n, seed, lowest(dtype), highest(dtype));
}

inline constexpr data::TokenDtype kIntegerDtypes[] = {data::TokenDtype::uint8, data::TokenDtype::int8,
                                                      data::TokenDtype::int16, data::TokenDtype::uint16,
                                                      data::TokenDtype::int32, data::TokenDtype::int64};

}  // namespace sg::test
