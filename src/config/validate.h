#pragma once
// Validation of a Config before any GPU work: the 16 rules of docs/configuration.md, every
// CUDA-graph restriction among them. validate() reports ALL violations at once, each naming the
// rule, the offending keys with their values, and the fix; and it normalizes the config (resolved
// defaults, cleared or completed graph scopes) so later stages read one canonical form.
#include <string>
#include <vector>

#include "config/config.h"

namespace sg::config {

inline constexpr int kNumRules = 16;

// One line summary of rule `rule` (1..16), as in the docs' table.
const char* rule_summary(int rule);

struct KeyValue {
  std::string key;    // "model.cuda_graph_impl"
  std::string value;  // as YAML: "transformer_engine", "[full_iteration, attn]"
};

struct Violation {
  int rule = 0;
  std::string message;           // the specific problem, one line
  std::vector<KeyValue> values;  // the offending keys and their values
  std::string fix;               // what to change
};

struct Note {
  int rule = 0;
  std::string message;
  std::vector<KeyValue> values;
};

struct ValidationReport {
  Config config;  // normalized: run this one
  std::vector<Violation> violations;
  std::vector<Note> notes;
  bool ok() const { return violations.empty(); }
};

ValidationReport validate(const Config& config);

// Features the config asks for that the engine does not have yet, one readable line each
// ("tensor parallelism (model.tensor_model_parallel_size = 2)"). validate() reports them as notes;
// `stepgraph train` refuses a config for which this is not empty.
std::vector<std::string> unimplemented_features(const Config& config);

// Human text: "[rule 4] message\n  key = value, key = value\n  fix: ...\n".
std::string format_violation(const Violation& violation);
// "note [rule 2]: message (key = value)\n".
std::string format_note(const Note& note);

namespace detail {
// A feature the config asks for that is not built, with the keys that ask for it (unimplemented_features.cpp).
struct UnimplementedFeature {
  std::string what;
  std::vector<std::string> keys;
};
std::vector<UnimplementedFeature> find_unimplemented(const Config& config);
// Each key with its value as format_value prints it: a violation's or note's values.
std::vector<KeyValue> key_values(const Config& config, const std::vector<std::string>& keys);
// validate_graph_spellings.cpp: Megatron's newer CUDA-graph spellings (cuda_graph_impl full_iteration, the scope
// "full") rewritten as stepgraph's, with a note each; a combination Megatron refuses is a violation.
void read_megatron_graph_spellings(Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);
// Rule 16's shape and value checks (validate_shapes*.cpp, one ShapeChecker: validate_shapes_checker.h), on a
// config whose defaults are resolved; accepted values that do less than Megatron's are notes.
void check_shapes(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);
// validate_data.cpp: the tokenizer (reads its files; sets model.vocab_size when null) and, after the
// shape checks, split / validation data / evaluation / eod_mask_loss / tensorboard_dir.
void resolve_tokenizer(Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);
void check_user_data(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);
// Rule 16's recompute checks (validate_recompute.cpp): the keys' own rules, what the layer kinds can recompute.
void check_recompute(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);
}  // namespace detail

}  // namespace sg::config
