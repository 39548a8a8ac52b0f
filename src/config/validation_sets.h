#pragma once
// Megatron-LM's validation.multiple_validation_sets (Bridge's training loop does not read it): each dataset of the
// validation data is evaluated on its own, with its own loss, instead of the blend's one. The datasets are
// dataset.valid_data_path's, or dataset.data_path's with their dataset.split valid shares; validation_set_names names
// them in order (Megatron's --validation-set-names), else they are named by their index, as Megatron's "-0", "-1"
// suffixes. Megatron asserts an unweighted list, and so does validation here.
#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"

namespace sg::config {

struct ValidationSet {
  std::string name;    // validation_set_names' entry, or the index
  std::string prefix;  // the dataset (PREFIX.bin / PREFIX.idx)
};

// The validation data's datasets as configured: dataset.valid_data_path when set, else dataset.data_path (its
// dataset.split valid shares), and the key they come from, as messages name it.
const std::vector<std::string>& validation_data_paths(const Config& config);
const std::string& validation_data_key(const Config& config);

// The sets multiple_validation_sets evaluates, in order (one with the key off: the blend, named ""). Throws sg::Error
// for a data path that does not parse; validate reports it first.
std::vector<ValidationSet> validation_sets(const Config& config);

// The rules: not with mock data, not with a weighted blend, names (when given) one a dataset, unique, of letters,
// digits, '.', '_' and '-' (they name TensorBoard tags and metrics records), and names only with the key on.
void check_validation_sets(const Config& config, std::vector<Violation>& violations);

}  // namespace sg::config
