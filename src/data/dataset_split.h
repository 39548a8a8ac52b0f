#pragma once
// Megatron's train/valid/test split (dataset.split = "969,30,1"): every dataset of the blend is cut
// at DOCUMENT boundaries into three consecutive ranges whose sizes follow the normalised shares, and
// each split blends its parts of the datasets. The rounding is Megatron's (_get_split_indices in
// megatron/core/datasets/blended_megatron_dataset_builder.py): start at 0, add round(share * documents)
// per split (round half to even, as Python's round), then shift every boundary after the first so the
// last one is the document count.
#include <array>
#include <cstdint>
#include <string>

namespace sg::data {

enum class Split : uint8_t { train = 0, valid = 1, test = 2 };
const char* split_name(Split split);  // "train", "valid", "test"

using SplitShares = std::array<double, 3>;  // normalised: they sum to 1

// "969,30,1" -> {0.969, 0.03, 0.001}; "99,1" -> {0.99, 0.01, 0} (missing parts are 0, as Megatron
// pads them); "90/10/0" and "90, 10, 0" as Megatron reads them too. sg::Error naming the text when it is not
// 1 to 3 non-negative numbers separated by ',' or '/' with a positive sum.
SplitShares parse_split(const std::string& text);

// Boundaries [b0=0, b1, b2, b3=num_documents]: split s holds documents [b_s, b_{s+1}).
std::array<uint64_t, 4> split_document_bounds(const SplitShares& shares, uint64_t num_documents);

}  // namespace sg::data
