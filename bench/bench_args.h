#pragma once
// The command line of a tool in bench/: `--flag value` (or `--flag=value`) and switches, checked against the
// tool's list of flags. --help/-h prints the usage (what the tool measures, each flag with its default and
// range) and exits 0 before anything touches the GPU. An unknown flag, a flag without its value, a value of the
// wrong kind, out of range or not among the choices, a flag given twice or a stray argument is a usage error:
// exit 2, naming the flag and pointing at --help.
// Standard library only and C++17, so a CPU test and the probes built by hand with nvcc -std=c++17 include it.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sg::bench {

enum class ToolValue : uint8_t { none, integer, number, text };  // none: a switch

// Every member has an initializer, so a designated initializer may leave any out without a warning.
struct ToolFlag {
  std::string name{};                    // "--iters"
  ToolValue value = ToolValue::integer;  // what follows it
  bool list = false;                     // comma-separated values of that kind, each checked
  std::string default_value{};           // the value when absent, as text ("" : none; a switch is off)
  std::optional<double> min{};           // integer, number: the least accepted value
  std::optional<double> max{};           // integer, number: the largest accepted value
  std::vector<std::string> choices{};    // text: the accepted values (empty: any)
  std::string value_name{};              // in the usage; "" : N for integer, X for number, VALUE for text
  std::string help{};                    // what it sets; the default and the range are appended
};

struct ToolSpec {
  std::string program{};  // "ssd_scan_bench"
  std::string about{};    // what it measures and prints
  std::vector<ToolFlag> flags{};
};

// A bad command line: the message names the flag and points at --help.
class ToolUsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace tool_args_detail {

inline std::string shown_number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), v == std::floor(v) && std::fabs(v) < 1e15 ? "%.0f" : "%g", v);
  return text;
}

inline std::string value_name(const ToolFlag& f) {
  if (!f.value_name.empty()) return f.value_name;
  const std::string one = f.value == ToolValue::integer ? "N" : f.value == ToolValue::number ? "X" : "VALUE";
  return f.list ? one + "," + one + ",..." : one;
}

inline std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : separator) + items[i];
  return out;
}

// "1 to 100", "at least 1", "at most 100" or "".
inline std::string range(const ToolFlag& f) {
  if (f.min && f.max) return shown_number(*f.min) + " to " + shown_number(*f.max);
  if (f.min) return "at least " + shown_number(*f.min);
  if (f.max) return "at most " + shown_number(*f.max);
  return "";
}

inline std::vector<std::string> list_items(const std::string& text) {
  std::vector<std::string> items;
  size_t begin = 0;
  for (size_t comma = text.find(','); comma != std::string::npos; comma = text.find(',', begin)) {
    items.push_back(text.substr(begin, comma - begin));
    begin = comma + 1;
  }
  items.push_back(text.substr(begin));
  return items;
}

// The accepted values and the default, as the usage shows them after the flag's help.
inline std::string constraints(const ToolFlag& f) {
  const std::string each = f.list ? "each " : "";
  std::vector<std::string> parts;
  if (!f.choices.empty()) parts.push_back(each + "one of " + joined(f.choices, ", "));
  if (!range(f).empty()) parts.push_back(each + range(f));
  if (f.value != ToolValue::none && !f.default_value.empty()) parts.push_back("default " + f.default_value);
  return parts.empty() ? "" : " (" + joined(parts, "; ") + ")";
}

// Why `text` is not one value of `f`'s kind, or "" when it is one.
inline std::string item_problem(const ToolFlag& f, const std::string& text) {
  if (f.value == ToolValue::text) {
    for (const std::string& choice : f.choices) {
      if (text == choice) return "";
    }
    return f.choices.empty() ? "" : "is not one of " + joined(f.choices, ", ");
  }
  char* end = nullptr;
  double v = 0.0;
  errno = 0;
  if (f.value == ToolValue::integer) {
    const long long i = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') return "is not an integer";
    v = static_cast<double>(i);
  } else {
    v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(v)) return "is not a number";
  }
  if (errno == ERANGE || (f.min && v < *f.min) || (f.max && v > *f.max)) {
    return "is out of range" + (range(f).empty() ? std::string() : " (" + range(f) + ")");
  }
  return "";
}

// Why `text` is not a value of `f` ("'x' is not ..." for an item of a list), or "" when it is one.
inline std::string value_problem(const ToolFlag& f, const std::string& text) {
  if (!f.list) return item_problem(f, text);
  for (const std::string& item : list_items(text)) {
    if (item.empty()) return "has an empty item";
    const std::string problem = item_problem(f, item);
    if (!problem.empty()) return "'" + item + "' " + problem;
  }
  return "";
}

}  // namespace tool_args_detail

// The flags of one command line: each declared flag's value, as given or its default.
class ToolArgs {
 public:
  bool help = false;  // --help or -h: print tool_usage and exit 0

  bool given(const std::string& name) const {
    for (const std::string& g : given_) {
      if (g == name) return true;
    }
    return false;
  }
  bool on(const std::string& name) const { return given(name); }  // a switch
  const std::string& text(const std::string& name) const {
    for (const auto& [flag, value] : values_) {
      if (flag == name) return value;
    }
    throw std::logic_error("bench_args: " + name + " is not a declared flag");
  }
  long long integer(const std::string& name) const { return std::strtoll(text(name).c_str(), nullptr, 10); }
  double number(const std::string& name) const { return std::strtod(text(name).c_str(), nullptr); }
  std::vector<std::string> items(const std::string& name) const {  // a list flag's values; none when empty
    return text(name).empty() ? std::vector<std::string>() : tool_args_detail::list_items(text(name));
  }

 private:
  friend ToolArgs parse_tool_args(int argc, const char* const* argv, const ToolSpec& spec);
  std::vector<std::pair<std::string, std::string>> values_;
  std::vector<std::string> given_;
};

// "Usage: PROGRAM [FLAGS]", what it measures, and one line per flag with its default and range.
inline std::string tool_usage(const ToolSpec& spec) {
  using namespace tool_args_detail;
  std::string out = "Usage: " + spec.program;
  std::vector<std::pair<std::string, std::string>> rows;
  size_t width = 10;  // "-h, --help"
  for (const ToolFlag& f : spec.flags) {
    const std::string left = f.name + (f.value == ToolValue::none ? "" : " " + value_name(f));
    out += " [" + left + "]";
    rows.emplace_back(left, f.help + constraints(f));
    width = std::max(width, left.size());
  }
  out += "\n" + spec.about + (spec.about.empty() || spec.about.back() == '\n' ? "" : "\n") + "\nFlags:\n";
  rows.emplace_back("-h, --help", "print this text and exit");
  // Each help wrapped at about 110 columns, continued under its first word.
  const size_t indent = width + 4, columns = std::max<size_t>(110, indent + 40);
  for (const auto& [left, help] : rows) {
    std::string line = "  " + left + std::string(width - left.size() + 2, ' ');
    size_t begin = 0;
    while (begin < help.size()) {
      size_t end = help.find(' ', begin);
      if (end == std::string::npos) end = help.size();
      const std::string word = help.substr(begin, end - begin);
      if (line.size() > indent && line.size() + 1 + word.size() > columns) {
        out += line + "\n";
        line = std::string(indent, ' ') + word;
      } else {
        line += (line.size() > indent ? " " : "") + word;
      }
      begin = end + 1;
    }
    out += line + "\n";
  }
  return out;
}

// Reads argv[1..argc) against spec.flags. Throws ToolUsageError; --help/-h anywhere wins over any error.
inline ToolArgs parse_tool_args(int argc, const char* const* argv, const ToolSpec& spec) {
  using namespace tool_args_detail;
  ToolArgs args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      args.help = true;
      return args;
    }
  }
  const auto usage_error = [&spec](const std::string& what) {
    return ToolUsageError(spec.program + ": " + what + "; see " + spec.program + " --help");
  };
  for (const ToolFlag& f : spec.flags) args.values_.emplace_back(f.name, f.default_value);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("-", 0) != 0) {
      const char* hint = spec.flags.empty() ? " (it takes no arguments)" : " (a value follows its flag: --flag VALUE)";
      throw usage_error("unexpected argument '" + arg + "'" + hint);
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const ToolFlag* flag = nullptr;
    for (const ToolFlag& f : spec.flags) {
      if (f.name == name) flag = &f;
    }
    if (flag == nullptr) throw usage_error("unknown flag '" + name + "'");
    if (args.given(name)) throw usage_error(name + " is given twice; give it once");
    args.given_.push_back(name);
    if (flag->value == ToolValue::none) {
      if (eq != std::string::npos) throw usage_error(name + " is a switch and takes no value");
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      value = argv[++i];
    } else {
      throw usage_error(name + " needs a value: " + name + " " + value_name(*flag));
    }
    const std::string problem = value_problem(*flag, value);
    if (!problem.empty()) throw usage_error(name + " " + value + ": " + problem);
    for (auto& [n, v] : args.values_) {
      if (n == name) v = value;
    }
  }
  return args;
}

// The flags of a bench that times CUDA-graph replays of --calls launches (decode_attention_bench,
// decode_linear_bench).
inline std::vector<ToolFlag> graph_replay_flags() {
  return {{.name = "--iters", .default_value = "50", .min = 1, .max = 100000, .help = "timed graph replays"},
          {.name = "--warmup", .default_value = "5", .min = 0, .max = 100000, .help = "untimed replays first"},
          {.name = "--calls", .default_value = "20", .min = 1, .max = 1000, .help = "launches per graph"}};
}

// parse_tool_args for a tool's main: --help prints the usage on stdout and exits 0, a usage error prints its
// message on stderr and exits 2. Call it before any CUDA call.
inline ToolArgs read_tool_args(int argc, const char* const* argv, const ToolSpec& spec) {
  try {
    const ToolArgs args = parse_tool_args(argc, argv, spec);
    if (args.help) {
      std::fputs(tool_usage(spec).c_str(), stdout);
      std::exit(0);
    }
    return args;
  } catch (const ToolUsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(2);
  }
}

}  // namespace sg::bench
