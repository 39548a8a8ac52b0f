#include "bench/mode_list.h"

#include <algorithm>

#include "core/strings.h"
#include "config/config.h"

namespace sg::bench {
namespace {

bool contains(const std::vector<std::string>& values, const std::string& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string close = closest_match(word, candidates);
  return close.empty() ? std::string() : " (did you mean '" + close + "'?)";
}

}  // namespace

std::string GraphMode::label() const {
  if (scope.empty()) return impl;
  return impl + ":" + join(scope, "+");
}

GraphMode parse_graph_mode(std::string_view text) {
  const std::string entry = trim(text);
  if (entry.empty()) throw config::ConfigError("--compare: empty mode; write modes as IMPL[:SCOPE[+SCOPE...]], e.g. "
                                       "none,local,transformer_engine:attn+mlp");
  GraphMode mode;
  const size_t colon = entry.find(':');
  mode.impl = trim(entry.substr(0, colon));
  if (!contains(graph_impl_names(), mode.impl)) {
    throw config::ConfigError("--compare: unknown cuda_graph_impl '" + mode.impl + "' in '" + entry + "'" +
                      did_you_mean(mode.impl, graph_impl_names()) + "; use one of " +
                      join(graph_impl_names(), ", "));
  }
  if (colon == std::string::npos) return mode;
  const std::string scopes = entry.substr(colon + 1);
  for (const std::string& raw : split(scopes, '+')) {
    const std::string scope = trim(raw);
    if (scope.empty()) {
      throw config::ConfigError("--compare: empty scope in '" + entry + "'; join scopes with '+', e.g. "
                        "transformer_engine:attn+mlp");
    }
    if (!contains(graph_scope_names(), scope)) {
      throw config::ConfigError("--compare: unknown cuda_graph_scope '" + scope + "' in '" + entry + "'" +
                        did_you_mean(scope, graph_scope_names()) + "; use scopes from " +
                        join(graph_scope_names(), ", "));
    }
    mode.scope.push_back(scope);
  }
  if (mode.impl == "none") {
    throw config::ConfigError("--compare: '" + entry + "': cuda_graph_impl none graphs nothing and takes no scope; "
                      "write plain 'none'");
  }
  return mode;
}

std::vector<GraphMode> parse_mode_list(std::string_view text) {
  if (trim(text).empty()) {
    throw config::ConfigError("--compare needs at least one mode, e.g. --compare none,local,transformer_engine:attn+mlp");
  }
  std::vector<GraphMode> modes;
  for (const std::string& entry : split(text, ',')) {
    GraphMode mode = parse_graph_mode(entry);
    for (const GraphMode& seen : modes) {
      if (seen == mode) throw config::ConfigError("--compare lists '" + mode.label() + "' twice; list each mode once");
    }
    modes.push_back(std::move(mode));
  }
  return modes;
}

}  // namespace sg::bench
