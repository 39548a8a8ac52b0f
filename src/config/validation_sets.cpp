#include "config/validation_sets.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/strings.h"
#include "data/blended_dataset.h"

namespace sg::config {

namespace {

bool good_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
           ch == '-';
  });
}

}  // namespace

const std::vector<std::string>& validation_data_paths(const Config& config) {
  return config.dataset.valid_data_path.empty() ? config.dataset.data_path : config.dataset.valid_data_path;
}

const std::string& validation_data_key(const Config& config) {
  static const std::string kValid = "dataset.valid_data_path", kData = "dataset.data_path";
  return config.dataset.valid_data_path.empty() ? kData : kValid;
}

std::vector<ValidationSet> validation_sets(const Config& config) {
  if (!config.validation.multiple_validation_sets || config.dataset.mock) return {{"", ""}};
  const std::vector<data::WeightedPrefix> blend =
      data::parse_data_path(validation_data_paths(config), validation_data_key(config));
  std::vector<ValidationSet> sets;
  for (size_t i = 0; i < blend.size(); ++i) {
    const std::vector<std::string>& names = config.validation.validation_set_names;
    sets.push_back({i < names.size() ? names[i] : std::to_string(i), blend[i].prefix});
  }
  return sets;
}

void check_validation_sets(const Config& config, std::vector<Violation>& violations) {
  const ValidationConfig& v = config.validation;
  const auto fail = [&](const std::string& message, const std::vector<std::string>& keys, const std::string& fix) {
    violations.push_back({16, message, detail::key_values(config, keys), fix});
  };
  if (!v.multiple_validation_sets) {
    if (!v.validation_set_names.empty()) {
      fail("validation.validation_set_names names the sets of validation.multiple_validation_sets, which is false",
           {"validation.validation_set_names", "validation.multiple_validation_sets"},
           "add validation.multiple_validation_sets=true (one loss per validation dataset), or drop the names");
    }
    return;
  }
  if (config.dataset.mock) {
    fail(
        "validation.multiple_validation_sets evaluates each validation dataset on its own, and dataset.mock has "
        "no datasets",
        {"validation.multiple_validation_sets", "dataset.mock"},
        "validate on your data (dataset.mock=false with dataset.valid_data_path, or dataset.data_path and "
        "dataset.split), or drop validation.multiple_validation_sets");
    return;
  }
  const std::string& key = validation_data_key(config);
  std::vector<data::WeightedPrefix> blend;
  try {
    blend = data::parse_data_path(validation_data_paths(config), key);
  } catch (const Error&) {
    return;  // the data checks report a list that does not parse
  }
  if (blend.size() > 1 && blend[0].weight >= 0.0) {
    fail("validation.multiple_validation_sets evaluates each validation dataset on its own, so their weights in " +
             key + " would mean nothing (Megatron asserts an unweighted list)",
         {"validation.multiple_validation_sets", key}, "list the validation datasets without weights");
    return;
  }
  const std::vector<std::string>& names = v.validation_set_names;
  if (names.empty()) return;
  if (names.size() != blend.size()) {
    fail(strprintf("validation.validation_set_names gives %zu name%s for %zu validation dataset%s", names.size(),
                   names.size() == 1 ? "" : "s", blend.size(), blend.size() == 1 ? "" : "s"),
         {"validation.validation_set_names", key}, "give one name a dataset of " + key + ", in its order");
    return;
  }
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (!good_name(name)) {
      fail("validation set name '" + name +
               "' is not a name: use letters, digits, '.', '_' and '-' (it names TensorBoard tags and metrics records)",
           {"validation.validation_set_names"}, "rename it, e.g. " + std::string("wiki_en"));
      return;
    }
    if (!seen.insert(name).second) {
      fail("validation set name '" + name + "' is given twice", {"validation.validation_set_names"},
           "give each validation dataset its own name");
      return;
    }
  }
}

}  // namespace sg::config
