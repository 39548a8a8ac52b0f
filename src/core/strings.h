#pragma once
// Small string helpers shared by every layer (g++ 12 has no <format>).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sg {

// printf-style formatting into a std::string.
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

std::vector<std::string> split(std::string_view text, char sep);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string trim(std::string_view text);

// Levenshtein distance; used for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word`, or "" when none is close enough to be a plausible typo.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// `word` as one POSIX shell word that pastes back unchanged: as is when only safe characters
// (letters, digits, _@%+=:,./-), else in single quotes; control characters as bash's $'\n' form.
std::string shell_quote(std::string_view word);
std::string shell_join(const std::vector<std::string>& words);

// "1.50 GiB", "312.0 MiB", "12 B".
std::string human_bytes(uint64_t bytes);

}  // namespace sg
