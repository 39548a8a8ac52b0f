// Every CUDA, cuBLAS(Lt), cuDNN, CUPTI and NVML call in the bench tools (bench/, src/bench/) has its status
// looked at: wrapped in a check (SG_CUDA_CHECK, SG_CUDA_CHECK_NOEXCEPT on cleanup paths, ...), compared, stored
// or passed on. GPU code cannot run in CI, so a dropped status (a bare `cudaFree(p);` in a destructor) is found
// here, in the source, where a run would only show it as a later, unrelated-looking failure. `(void)call()` is
// the one deliberate discard (cudaGetLastError clearing an error already reported).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// `text` with comments, string and character literals blanked (newlines kept, so offsets keep their lines).
std::string code_only(const std::string& text) {
  std::string out = text;
  size_t i = 0;
  const auto blank = [&out](size_t from, size_t to) {
    for (size_t k = from; k < to && k < out.size(); ++k) {
      if (out[k] != '\n') out[k] = ' ';
    }
  };
  while (i < text.size()) {
    if (text.compare(i, 2, "//") == 0) {
      const size_t end = text.find('\n', i);
      blank(i, end == std::string::npos ? text.size() : end);
      i = end == std::string::npos ? text.size() : end;
    } else if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? text.size() : end + 2;
      blank(i, stop);
      i = stop;
    } else if (text[i] == '"' && i > 0 && text[i - 1] == 'R') {  // R"delim( ... )delim"
      const size_t open = text.find('(', i);
      const std::string close = ")" + text.substr(i + 1, open - i - 1) + "\"";
      const size_t end = text.find(close, open);
      const size_t stop = end == std::string::npos ? text.size() : end + close.size();
      blank(i, stop);
      i = stop;
    } else if (text[i] == '\'' && i > 0 && std::isalnum(static_cast<unsigned char>(text[i - 1]))) {
      ++i;  // a digit separator (2'000'000), not a character literal
    } else if (text[i] == '"' || text[i] == '\'') {
      const char quote = text[i];
      size_t k = i + 1;
      while (k < text.size() && text[k] != quote && text[k] != '\n') k += text[k] == '\\' ? 2 : 1;
      blank(i, k + 1);
      i = k + 1;
    } else {
      ++i;
    }
  }
  return out;
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether the call starting at `at` in `code` (comments and literals blanked) is a statement of its own: its
// result dropped. It is when it follows the start of the file, `;`, `{`, `}`, a label, `else`, `do`, the
// condition of an if/for/while, or a comma that is no argument separator (a comma expression).
bool result_dropped(const std::string& code, size_t at) {
  size_t p = at;
  const auto skip_space = [&] {
    while (p > 0 && std::isspace(static_cast<unsigned char>(code[p - 1]))) --p;
  };
  skip_space();
  // The object a member is called on (`state_->api.Shutdown()`): the statement starts before it.
  while (p > 0 && (code[p - 1] == '.' || (p > 1 && code[p - 1] == '>' && code[p - 2] == '-'))) {
    p -= code[p - 1] == '.' ? 1 : 2;
    skip_space();
    while (p > 0 && is_word_char(code[p - 1])) --p;
    skip_space();
  }
  if (p == 0) return true;
  const char prev = code[p - 1];
  if (prev == ';' || prev == '{' || prev == '}') return true;
  if (prev == ':') return p < 2 || code[p - 2] != ':';  // a label or case; `::` qualifies the name
  if (is_word_char(prev)) {
    size_t w = p;
    while (w > 0 && is_word_char(code[w - 1])) --w;
    const std::string word = code.substr(w, p - w);
    return word == "else" || word == "do";
  }
  if (prev == ')') {  // `(void)call()` is a deliberate discard; `if (...) call();` is not
    int depth = 0;
    size_t k = p;
    while (k > 0) {
      --k;
      if (code[k] == ')') ++depth;
      if (code[k] == '(' && --depth == 0) break;
    }
    const std::string inside = code.substr(k + 1, p - 1 - (k + 1));
    return inside.find_first_not_of(' ') == std::string::npos ||
           inside.substr(inside.find_first_not_of(' ')).rfind("void", 0) != 0;
  }
  if (prev == ',') {  // an argument (inside parentheses or brackets) or a comma expression (a statement)
    int depth = 0;
    for (size_t k = p - 1; k > 0; --k) {
      const char c = code[k - 1];
      if (c == ')' || c == ']' || c == '}') ++depth;
      if (c == '(' || c == '[' || c == '{') {
        if (depth == 0) return c == '{';
        --depth;
      }
      if (c == ';' && depth == 0) return true;
    }
    return true;
  }
  return false;  // `=`, `(`, `!`, `&&`, `return`, ...: the result is used
}

// "FILE:LINE: call" for every call of the libraries (and of power_sampler's NVML table, `api.Name(`) whose
// result is dropped.
std::vector<std::string> dropped_calls(const std::string& name, const std::string& text) {
  static const std::regex call(R"((::)?\b((cuda|cublas|cublasLt|cudnn|cupti|nvml)[A-Z]\w*|api\.[A-Z]\w*)\s*\()");
  const std::string code = code_only(text);
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), call); it != std::sregex_iterator(); ++it) {
    const size_t at = static_cast<size_t>(it->position(0));
    if (!result_dropped(code, at)) continue;
    const size_t line = static_cast<size_t>(std::count(code.begin(), code.begin() + static_cast<long>(at), '\n')) + 1;
    found.push_back(name + ":" + std::to_string(line) + ": " + (*it)[2].str());
  }
  return found;
}

TEST(BenchCudaCalls, TheScannerTellsDroppedResultsFromCheckedOnes) {
  EXPECT_EQ(dropped_calls("t", "~Buffers() { cudaFree(a), cudaFree(b); }"),
            (std::vector<std::string>{"t:1: cudaFree", "t:1: cudaFree"}));
  EXPECT_EQ(dropped_calls("t", "int f() {\n  if (p)\n    cudnnDestroy(h);\n}"),
            (std::vector<std::string>{"t:3: cudnnDestroy"}));
  const std::vector<std::string> dropped = {
      "cudaFree(p);",
      "~Buffer() { cudaFree(p); }",
      "if (p) cudaFree(p);",
      "void f() {\n  cublasLtMatrixLayoutDestroy(l);\n}",
      "x = 1, cudaEventDestroy(e);",
      "if (ok) state_->api.Shutdown();",
      "st.api.Shutdown();",
      "else cudnnDestroy(h);",
      "  ::cudaDeviceSynchronize();",
      "const int64_t n = 2'000'000; cudaFree(p);",
      "const char* js = R\"js(f(\"x\");)js\"; cudaFree(p);",
  };
  for (const std::string& text : dropped) EXPECT_EQ(dropped_calls("t", text).size(), 1u) << text;
  const std::vector<std::string> checked = {
      "SG_CUDA_CHECK(cudaFree(p));",
      "SG_CUDA_CHECK_NOEXCEPT(\n    cudaFree(p));",
      "(void)cudaGetLastError();",
      "const cudaError_t e = cudaGetDevice(&d);",
      "if (cudaGetDevice(&d) != cudaSuccess || cudaDeviceGetPCIBusId(b, 8, d) != cudaSuccess) {}",
      "log(cudaFree(p), \"cudaFree\");",
      "std::printf(\"%s\", cudaGetErrorString(e));",
      "return cuptiGetVersion(&v);",
      "if (api.GetClockInfo(d, c, &m) == NVML_SUCCESS) {}",
      "r = st.api.Init();",
      "// cudaFree(p);",
      "/* cudaFree(p); */",
      "throw Error(\"cudaFree(p); failed\");",
      "decltype(&nvmlShutdown) Shutdown = nullptr;",
      "const char* js = R\"js(f(\"x\"); cudaFree(p);)js\";",
      "const int64_t n = 2'000'000; SG_CUDA_CHECK(cudaFree(p));",
  };
  for (const std::string& text : checked) EXPECT_TRUE(dropped_calls("t", text).empty()) << text;
}

TEST(BenchCudaCalls, TheBenchToolsLookAtEveryStatus) {
  std::vector<std::string> found;
  int files = 0;
  for (const char* root : {"bench", "src/bench"}) {
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(fs::path(STEPGRAPH_SOURCE_DIR) / root)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".cu" && ext != ".h" && ext != ".cuh")) continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      const std::string name = fs::relative(e.path(), STEPGRAPH_SOURCE_DIR).string();
      for (std::string& f : dropped_calls(name, text.str())) found.push_back(std::move(f));
      ++files;
    }
  }
  EXPECT_GT(files, 10);  // the tree was found
  std::string list;
  for (const std::string& f : found) list += "\n  " + f;
  EXPECT_TRUE(found.empty()) << "calls whose status is dropped (wrap them in SG_CUDA_CHECK, or on a cleanup path "
                                "SG_CUDA_CHECK_NOEXCEPT and its cuBLASLt/CUPTI twins):"
                             << list;
}

}  // namespace
