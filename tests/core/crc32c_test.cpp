// CRC-32C against published check values (RFC 3720 appendix B.4 and the "123456789" check).
#include "core/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(sg::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(sg::crc32c("", 0), 0x00000000u);
  const std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF);
  EXPECT_EQ(sg::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(sg::crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  std::vector<uint8_t> increasing(32);
  for (size_t i = 0; i < increasing.size(); ++i) increasing[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(sg::crc32c(increasing.data(), increasing.size()), 0x46DD794Eu);
}

TEST(Crc32c, MaskedIsRotatedPlusConstant) {
  const uint32_t crc = sg::crc32c("abc", 3);
  EXPECT_EQ(sg::masked_crc32c("abc", 3), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
  EXPECT_NE(sg::masked_crc32c("abc", 3), crc);
}

}  // namespace
