// The generation step's bookkeeping twin: the step's tokens land in the history at the step index,
// positions move on by one, the step counter advances; a step past the history's end records nothing.
#include "reference/decode_state.h"

#include <gtest/gtest.h>

#include <vector>

namespace sg {
namespace {

TEST(DecodeStateReference, RecordsTokensAndAdvances) {
  const int64_t B = 3, stride = 2;
  std::vector<int32_t> history(B * stride, -1), positions = {4, 0, 9};
  int64_t step = 0;
  const std::vector<int32_t> first = {7, 8, 9}, second = {1, 2, 3};
  ref::decode_advance(history.data(), stride, first.data(), positions.data(), &step, B);
  ref::decode_advance(history.data(), stride, second.data(), positions.data(), &step, B);
  EXPECT_EQ(history, (std::vector<int32_t>{7, 1, 8, 2, 9, 3}));
  EXPECT_EQ(positions, (std::vector<int32_t>{6, 2, 11}));
  EXPECT_EQ(step, 2);
  ref::decode_advance(history.data(), stride, first.data(), positions.data(), &step, B);  // past the end
  EXPECT_EQ(history, (std::vector<int32_t>{7, 1, 8, 2, 9, 3}));
  EXPECT_EQ(step, 3);
}

}  // namespace
}  // namespace sg
