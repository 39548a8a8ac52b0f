// RECIPE resolution: a file on disk when the argument names one, else a shipped recipe embedded in
// the binary (so `stepgraph validate llama/tiny` works from any working directory).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/strings.h"
#include "config/config.h"

namespace sg::config {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "./recipes/llama/tiny.yaml" -> "llama/tiny"; "/abs/.../recipes/moe/tiny_moe.yml" ->
// "moe/tiny_moe".
std::string recipe_name_of(std::string_view arg) {
  std::string name(arg);
  while (name.rfind("./", 0) == 0) name.erase(0, 2);
  const size_t at = name.rfind("recipes/");
  if (at != std::string::npos && (at == 0 || name[at - 1] == '/')) name.erase(0, at + 8);
  if (ends_with(name, ".yaml")) {
    name.resize(name.size() - 5);
  } else if (ends_with(name, ".yml")) {
    name.resize(name.size() - 4);
  }
  return name;
}

std::string basename_of(const std::string& name) {
  const size_t slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

std::string read_file(const std::filesystem::path& path, const char* what = "recipe file") {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(strprintf("cannot read %s '%s'", what, path.string().c_str()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(strprintf("error reading %s '%s'", what, path.string().c_str()));
  return text.str();
}

}  // namespace

std::vector<std::string> shipped_recipe_names() {
  std::vector<std::string> names;
  for (const auto& r : embedded_recipes()) names.emplace_back(r.name);
  std::sort(names.begin(), names.end());
  return names;
}

RecipeText find_recipe(std::string_view name_or_path) {
  const std::string arg(name_or_path);
  if (arg.empty())
    throw ConfigError("empty recipe name; shipped recipes: " + join(shipped_recipe_names(), ", "));
  std::error_code ec;
  const std::filesystem::path path(arg);
  if (std::filesystem::is_regular_file(path, ec)) return {arg, arg, read_file(path), false};
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError("recipe '" + arg +
                      "' is a directory; give a .yaml file or a shipped recipe name");
  }

  const std::string name = recipe_name_of(arg);
  const auto& recipes = embedded_recipes();
  const auto embedded = [](const EmbeddedRecipe& r) {
    return RecipeText{r.name, "recipes/" + std::string(r.name) + ".yaml", r.text, true};
  };
  for (const auto& r : recipes) {
    if (name == r.name) return embedded(r);
  }
  // A bare name ("tiny") when exactly one shipped recipe has it.
  std::vector<const EmbeddedRecipe*> by_basename;
  for (const auto& r : recipes) {
    if (name.find('/') == std::string::npos && basename_of(r.name) == name)
      by_basename.push_back(&r);
  }
  if (by_basename.size() == 1) return embedded(*by_basename.front());
  if (by_basename.size() > 1) {
    std::vector<std::string> names;
    for (const auto* r : by_basename) names.emplace_back(r->name);
    throw ConfigError("recipe '" + arg + "' is ambiguous: " + join(names, ", "));
  }

  std::vector<std::string> candidates = shipped_recipe_names();
  for (const auto& r : recipes) candidates.push_back(basename_of(r.name));
  std::string message = "no recipe '" + arg + "': not a file";
  if (const std::string close = closest_match(name, candidates); !close.empty()) {
    message += ", and no shipped recipe has that name; did you mean '" + close + "'?";
  } else {
    message += ", and no shipped recipe has that name.";
  }
  message += " Shipped recipes: " + join(shipped_recipe_names(), ", ") + ".";
  throw ConfigError(message);
}

Config load_config(std::string_view name_or_path, const std::vector<std::string>& overrides) {
  return load_config(name_or_path, {}, overrides);
}

Config load_config(std::string_view name_or_path, const std::vector<std::string>& config_files,
                   const std::vector<std::string>& overrides) {
  return load_config(find_recipe(name_or_path), config_files, overrides);
}

Config load_config(const RecipeText& recipe, const std::vector<std::string>& config_files,
                   const std::vector<std::string>& overrides) {
  Config config = load_config_yaml(recipe.text, recipe.source);
  for (const std::string& file : config_files) merge_config_file(config, file);
  apply_overrides(config, overrides);
  return config;
}

void merge_config_file(Config& config, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError("--config-file '" + path + "' is not a file" +
                      (std::filesystem::exists(path, ec) ? "" : " (no such path)") +
                      "; give a YAML file of keys to set over the recipe");
  }
  merge_config_yaml(config, read_file(path, "config file"), path);
}

}  // namespace sg::config
