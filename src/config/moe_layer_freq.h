#pragma once
// Megatron's model.moe_layer_freq, expanded to one 0/1 per GPT block:
//   an integer N      every N-th block is MoE (block b when b % N == 0; 1 = every block)
//   a 0/1 list        [1,0,1,...], one per block (YAML list, or "1,0,1")
//   a list expression Megatron's string form "([1]*3+[0])*2": lists of 0/1, '*' by an integer, '+'
//                     to concatenate, parentheses
// Throws ConfigError naming the key, the text and the fix.
#include <cstdint>
#include <string>
#include <vector>

namespace sg::config {

std::vector<int> expand_moe_layer_freq(const std::vector<std::string>& value, int64_t num_layers);

// The value as config show writes it, in Bridge's forms: an int, a list of ints, or the list expression as one
// string. Held as strings (config.h), it would otherwise print as ["1"], which Bridge reads as a string to eval.
std::string format_moe_layer_freq(const std::vector<std::string>& value);

}  // namespace sg::config
