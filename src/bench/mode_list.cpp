#include "bench/mode_list.h"

#include <algorithm>
#include <optional>

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
  std::string text = graph::graph_impl_name(impl);
  if (!scope.empty()) text.append(":").append(join(scope, "+"));
  if (recompute) text.append("+").append(recompute->label());
  return text;
}

GraphMode parse_graph_mode(std::string_view text) {
  const std::string entry = trim(text);
  if (entry.empty()) {
    throw config::ConfigError("--compare: empty mode; write modes as IMPL[:SCOPE[+SCOPE...]][+RECOMPUTE], "
                              "e.g. none,local,transformer_engine:attn+mlp,local+recompute_full");
  }
  GraphMode mode;
  // The recompute setting is the last '+'-joined item; what comes before it is the graph mode.
  std::string graph_part = entry;
  const std::vector<std::string> items = split(entry, '+');
  for (size_t i = 0; i < items.size(); ++i) {
    if (!is_recompute_item(items[i])) continue;
    // What follows the recompute setting is either misplaced scopes or recompute settings (refused with
    // the order rule) or part of its own malformed value ("recompute_full=uniform/+1"), which
    // parse_recompute_mode refuses with the real reason.
    bool misplaced = false;
    for (size_t j = i + 1; j < items.size(); ++j) {
      misplaced = misplaced || is_recompute_item(items[j]) || contains(graph_scope_names(), trim(items[j]));
    }
    if (misplaced) {
      throw config::ConfigError("--compare: '" + entry + "': the recompute setting '" + trim(items[i]) +
                                "' must come last, after the scopes, and only once (e.g. "
                                "transformer_engine:attn+mlp+recompute_selective)");
    }
    if (i == 0) {
      throw config::ConfigError("--compare: '" + entry + "': a recompute setting goes after a graph mode, e.g. "
                                "none+" + trim(items[i]) + " or local+" + trim(items[i]));
    }
    std::vector<std::string> rest(items.begin() + static_cast<std::ptrdiff_t>(i), items.end());
    mode.recompute = parse_recompute_mode(join(rest, "+"), entry);
    std::vector<std::string> before(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(i));
    graph_part = join(before, "+");
    break;
  }
  const size_t colon = graph_part.find(':');
  const std::string impl = trim(graph_part.substr(0, colon));
  const std::optional<graph::GraphImpl> known = graph::find_graph_impl(impl);
  if (!known) {
    throw config::ConfigError("--compare: unknown cuda_graph_impl '" + impl + "' in '" + entry + "'" +
                      did_you_mean(impl, graph_impl_names()) + "; use one of " +
                      join(graph_impl_names(), ", "));
  }
  mode.impl = *known;
  if (colon == std::string::npos) return mode;
  const std::string scopes = graph_part.substr(colon + 1);
  for (const std::string& raw : split(scopes, '+')) {
    const std::string scope = trim(raw);
    if (scope.empty()) {
      throw config::ConfigError("--compare: empty scope in '" + entry + "'; join scopes with '+', e.g. "
                        "transformer_engine:attn+mlp");
    }
    if (!contains(graph_scope_names(), scope)) {
      std::vector<std::string> candidates = graph_scope_names();
      candidates.insert(candidates.end(), recompute_item_names().begin(), recompute_item_names().end());
      throw config::ConfigError("--compare: unknown cuda_graph_scope '" + scope + "' in '" + entry + "'" +
                        did_you_mean(scope, candidates) + "; use scopes from " + join(graph_scope_names(), ", ") +
                        ", then optionally one recompute setting (" + join(recompute_item_names(), ", ") + ")");
    }
    mode.scope.push_back(scope);
  }
  if (mode.impl == graph::GraphImpl::none) {
    throw config::ConfigError("--compare: '" + entry + "': cuda_graph_impl none graphs nothing and takes no scope; "
                      "write plain 'none' (or none+recompute_...)");
  }
  return mode;
}

std::vector<GraphMode> parse_mode_list(std::string_view text) {
  if (trim(text).empty()) {
    throw config::ConfigError(
        "--compare needs at least one mode, e.g. --compare none,local,transformer_engine:attn+mlp");
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
