#pragma once
// JSON as Python's json.dumps writes it: strict JSON plus the bare constants Infinity, -Infinity and NaN, which
// json.dumps writes for non-finite floats (allow_nan=True, its default). Hugging Face folders carry them: the
// NemotronH configs that transformers 4 and NVIDIA's releases wrote hold "time_step_limit": [0.0, Infinity].
// Each such constant outside a string is read as {"__float__": "Infinity"} (or "-Infinity", "NaN"), the form
// transformers 5 writes, so a reader handles both the same way.
#include <nlohmann/json.hpp>
#include <string>

namespace sg::checkpoint {

// The text with the bare constants replaced as above; strings (their escapes included) are left as they are.
std::string json_with_tagged_non_finite(const std::string& text);

// Parses `text` (the contents of `path`); sg::Error naming `path` when it is not JSON even so.
nlohmann::json parse_python_json(const std::string& text, const std::string& path);

}  // namespace sg::checkpoint
