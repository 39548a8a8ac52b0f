#include "train/run_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/durable_io.h"
#include "core/strings.h"
#include "train/svg_chart.h"

namespace sg::train {
namespace {

// The widths report.html draws its line charts at (render_line_chart), which their series' envelopes are kept for.
constexpr int kLossChartWidth = 980, kChartWidth = 640;
// The evaluations table lists at most about this many rows (EvalRows).
constexpr size_t kMaxEvalRows = 1000;

struct EvalRow {
  double step, val_loss, val_ppl, batches, ms;
  std::string set;  // the validation set's name (multiple_validation_sets), else ""
};

// The evaluations the table lists, in bounded memory however many a run records (an evaluation every step is
// allowed): every one while there are at most kMaxEvalRows, then one in `stride` (the 1st, the stride + 1-th, ...;
// the stride doubling whenever more would be kept), and always the last.
class EvalRows {
 public:
  void add(const EvalRow& row) {
    if (count_ % stride_ == 0) {
      kept_.push_back(row);
      if (kept_.size() > kMaxEvalRows) {  // kept_[k] is evaluation k x stride: keep the even k
        for (size_t k = 0; 2 * k < kept_.size(); ++k) kept_[k] = kept_[2 * k];
        kept_.resize((kept_.size() + 1) / 2);
        stride_ *= 2;
      }
    }
    last_ = row;
    ++count_;
  }
  size_t count() const { return count_; }
  size_t stride() const { return stride_; }
  const EvalRow& last() const { return last_; }
  // The rows listed, in order.
  std::vector<EvalRow> listed() const {
    std::vector<EvalRow> rows = kept_;
    if (count_ > 0 && (count_ - 1) % stride_ != 0) rows.push_back(last_);
    return rows;
  }

 private:
  std::vector<EvalRow> kept_;
  size_t count_ = 0, stride_ = 1;
  EvalRow last_{};
};

// What report.html shows of metrics.jsonl, reduced while it is read: the charts' series as their envelopes
// (train/svg_chart.h: the same charts as from every record), the numbers the page prints as they are, so its
// memory does not grow with the run's length (a line a step: ~560 MB at 10M steps, held whole before).
struct Records {
  SeriesEnvelope loss{kLossChartWidth};
  // The validation loss: one series, or one a validation set (multiple_validation_sets) in the order they appear,
  // each with its last evaluation.
  struct ValSeries {
    std::string set;
    SeriesEnvelope loss{kLossChartWidth};
    EvalRow last;
  };
  std::vector<ValSeries> val_losses;
  SeriesEnvelope lr{kChartWidth}, grad_norm{kChartWidth}, tokens_per_s{kChartWidth}, step_ms{kChartWidth},
      memory_mib{kChartWidth};
  size_t steps = 0;                                           // training records
  double first_step = NAN, last_step = NAN, last_loss = NAN;  // of the first and the last training record
  EvalRows evals;
  std::optional<EvalRow> test;        // the test split's evaluation after the last step (the last one recorded)
  std::vector<ChartMarker> captures;  // one a process start at most (a resume captures again)
};

// A line of metrics.jsonl read as nlohmann::json::parse reads it (the same lexer and grammar: a line that does not
// parse is no record; a key given twice has its last value), keeping only the top-level values the report shows,
// without building the object: the run end reads every line of the file (a line a step).
class RecordLine final : public nlohmann::json_sax<nlohmann::json> {
 public:
  enum Field : int {
    kStep,
    kLoss,
    kLr,
    kGradNorm,
    kTokensPerS,
    kStepMs,
    kMemory,
    kValLoss,
    kValPpl,
    kEvalMs,
    kEvalBatches,
    kCapture,
    kTestLoss,
    kTestPpl,
    kValSet,
    kFields
  };

  // Whether `line` is a JSON object; its fields are then read.
  bool read(const std::string& line) {
    std::fill(std::begin(present_), std::end(present_), false);
    std::fill(std::begin(numbers_), std::end(numbers_), NAN);
    capture_ = object_ = false;
    val_set_.clear();
    depth_ = 0;
    field_ = -1;
    return nlohmann::json::sax_parse(line, this) && object_;
  }
  bool has(Field f) const { return present_[f]; }
  double number(Field f) const { return numbers_[f]; }  // NaN unless the value is a number
  bool capture() const { return capture_; }             // "capture": true
  const std::string& val_set() const { return val_set_; }  // "val_set": a string, else ""

  bool null() override { return scalar(NAN); }
  bool boolean(bool value) override {
    scalar(NAN);
    if (depth_ == 1 && field_ == kCapture) capture_ = value;
    return true;
  }
  bool number_integer(number_integer_t value) override { return scalar(static_cast<double>(value)); }
  bool number_unsigned(number_unsigned_t value) override { return scalar(static_cast<double>(value)); }
  bool number_float(number_float_t value, const string_t&) override { return scalar(value); }
  bool string(string_t& value) override {
    if (depth_ == 1 && field_ == kValSet) val_set_ = value;
    return scalar(NAN);
  }
  bool binary(binary_t&) override { return scalar(NAN); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) object_ = true;
    return open();
  }
  bool start_array(std::size_t) override { return open(); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& name) override {
    if (depth_ != 1) return true;
    static constexpr const char* kNames[kFields] = {
        "step",     "loss",    "lr",      "grad_norm",    "tokens_per_s", "step_ms",   "device_memory_used",
        "val_loss", "val_ppl", "eval_ms", "eval_batches", "capture",      "test_loss", "test_ppl",
        "val_set"};
    field_ = -1;
    for (int f = 0; f < kFields; ++f) {
      if (name == kNames[f]) field_ = f;
    }
    if (field_ >= 0) present_[field_] = true;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  // A value of a top-level field (`value`: NaN unless it is a number); the last one counts.
  bool scalar(double value) {
    if (depth_ == 1 && field_ >= 0) {
      numbers_[field_] = value;
      if (field_ == kCapture) capture_ = false;
    }
    return true;
  }
  bool open() {
    scalar(NAN);  // an object or an array as a field's value
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  bool present_[kFields];
  double numbers_[kFields];
  bool capture_ = false, object_ = false;
  std::string val_set_;
  int depth_ = 0, field_ = -1;
};

Records read_metrics(const std::string& path) {
  Records r;
  // Only a file holds records: a device (/dev/full in the full-disk tests) would read without end.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return r;
  std::ifstream in(path);
  std::string line;
  RecordLine j;
  while (std::getline(in, line)) {
    // Not an object: a torn last line of a killed run.
    if (!j.read(line) || !j.has(RecordLine::kStep)) continue;
    const double step = j.number(RecordLine::kStep);
    if (j.has(RecordLine::kValLoss)) {
      const EvalRow row{step,
                        j.number(RecordLine::kValLoss),
                        j.number(RecordLine::kValPpl),
                        j.number(RecordLine::kEvalBatches),
                        j.number(RecordLine::kEvalMs),
                        j.val_set()};
      r.evals.add(row);
      auto series = std::find_if(r.val_losses.begin(), r.val_losses.end(),
                                 [&](const Records::ValSeries& s) { return s.set == row.set; });
      if (series == r.val_losses.end()) series = r.val_losses.insert(r.val_losses.end(), {row.set});
      series->loss.add(step, row.val_loss);
      series->last = row;
      continue;
    }
    if (j.has(RecordLine::kTestLoss)) {
      r.test = EvalRow{step, j.number(RecordLine::kTestLoss), j.number(RecordLine::kTestPpl),
                       j.number(RecordLine::kEvalBatches), j.number(RecordLine::kEvalMs)};
      continue;
    }
    if (r.steps++ == 0) r.first_step = step;
    r.last_step = step;
    r.last_loss = j.number(RecordLine::kLoss);
    r.loss.add(step, r.last_loss);
    r.lr.add(step, j.number(RecordLine::kLr));
    r.grad_norm.add(step, j.number(RecordLine::kGradNorm));
    // The capture step's time includes the capture: kept out of the throughput curves, marked instead.
    if (j.capture()) {
      r.captures.push_back({step, "graph capture"});
    } else {
      r.tokens_per_s.add(step, j.number(RecordLine::kTokensPerS));
      r.step_ms.add(step, j.number(RecordLine::kStepMs));
    }
    r.memory_mib.add(step, j.number(RecordLine::kMemory) / (1024.0 * 1024.0));
  }
  return r;
}

LineChart chart(const std::string& title, const std::string& y_label, const Records& r, std::vector<ChartSeries> series,
                bool log_y = false) {
  LineChart ch;
  ch.title = title;
  ch.x_label = "step";
  ch.y_label = y_label;
  ch.series = std::move(series);
  ch.markers = r.captures;
  ch.log_y = log_y;
  return ch;
}

// "1st", "2nd", "3rd", "4th", ..., "11th", ..., "21st".
std::string ordinal(size_t n) {
  const size_t tens = n % 100, ones = n % 10;
  const char* suffix = tens >= 11 && tens <= 13 ? "th" : ones == 1 ? "st" : ones == 2 ? "nd" : ones == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

std::string eval_table(const EvalRows& evals) {
  if (evals.count() == 0) return "<p>No evaluation (validation.eval_interval is null).</p>\n";
  std::string out;
  if (evals.stride() > 1) {
    const size_t s = evals.stride();
    out += strprintf(
        "<p>%zu evaluations; listed: the %s, %s, %s, ... (one in %zu) and the last. metrics.jsonl "
        "holds them all.</p>\n",
        evals.count(), ordinal(1).c_str(), ordinal(s + 1).c_str(), ordinal(2 * s + 1).c_str(), s);
  }
  const std::vector<EvalRow> rows = evals.listed();
  const bool sets = std::any_of(rows.begin(), rows.end(), [](const EvalRow& e) { return !e.set.empty(); });
  out += std::string("<table class=\"num\"><tr><th>step</th>") + (sets ? "<th>set</th>" : "") +
         "<th>val loss</th><th>val ppl</th><th>batches</th><th>ms</th></tr>";
  for (const EvalRow& e : rows) {
    out +=
        strprintf("<tr><td>%.0f</td>%s<td>%.4f</td><td>%.3f</td><td>%.0f</td><td>%.1f</td></tr>", e.step,
                  sets ? ("<td>" + html_escape(e.set) + "</td>").c_str() : "", e.val_loss, e.val_ppl, e.batches, e.ms);
  }
  return out + "</table>\n";
}

}  // namespace

void write_run_report(const std::string& metrics_path, const std::string& html_path, const RunReportInfo& info) {
  const Records r = read_metrics(metrics_path);
  std::string body = "<h1>" + html_escape(info.title) + "</h1>\n<p class=\"sub\">" + html_escape(info.status) +
                     "</p>\n";
  std::vector<std::pair<std::string, std::string>> facts = info.facts;
  if (r.steps > 0) {
    facts.emplace_back("steps in metrics.jsonl", strprintf("%.0f to %.0f", r.first_step, r.last_step));
    facts.emplace_back("last loss", strprintf("%.4f", r.last_loss));
  }
  for (const Records::ValSeries& s : r.val_losses) {
    facts.emplace_back(s.set.empty() ? "last val loss" : "last val loss, set " + s.set,
                       strprintf("%.4f (ppl %.3f) at step %.0f", s.last.val_loss, s.last.val_ppl, s.last.step));
  }
  if (r.test) {
    facts.emplace_back("test loss", strprintf("%.4f (ppl %.3f) at step %.0f, %.0f batches (dataset.split's test share)",
                                              r.test->val_loss, r.test->val_ppl, r.test->step, r.test->batches));
  }
  body += html_table(facts);

  body += "<h2>Loss</h2>\n<div class=\"grid2\">";
  std::vector<ChartSeries> losses = {r.loss.series("train loss")};
  for (const Records::ValSeries& s : r.val_losses) {
    losses.push_back(s.loss.series(s.set.empty() ? "validation loss" : "validation loss, set " + s.set));
    losses.back().markers = true;
  }
  body += render_line_chart(chart("loss", "loss (nats)", r, std::move(losses)), kLossChartWidth, 320);
  body += "</div>\n<h2>Optimizer</h2>\n<div class=\"grid2\">";
  body += render_line_chart(chart("learning rate", "lr", r, {r.lr.series("lr")}), kChartWidth);
  body += render_line_chart(chart("gradient norm (before clipping)", "norm", r, {r.grad_norm.series("grad norm")},
                                  /*log_y=*/true),
                            kChartWidth);
  body += "</div>\n<h2>Throughput and memory</h2>\n<div class=\"grid2\">";
  body += render_line_chart(chart("throughput", "tokens/s", r, {r.tokens_per_s.series("tokens/s")}), kChartWidth);
  body += render_line_chart(chart("step time", "ms", r, {r.step_ms.series("step ms")}), kChartWidth);
  body += render_line_chart(chart(info.gpu ? "device memory in use" : "process resident memory (CPU backend)", "MiB", r,
                                  {r.memory_mib.series("MiB")}),
                            kChartWidth);
  body += "</div>\n<h2>Evaluations</h2>\n" + eval_table(r.evals);
  if (!info.plan.empty()) {
    body += "<h2>Plan</h2>\n<pre>" + html_escape(join(info.plan, "\n")) + "</pre>\n";
  }
  if (!info.config_yaml.empty()) {
    body += "<h2>Configuration</h2>\n<details><summary>config.yaml</summary><pre>" + html_escape(info.config_yaml) +
            "</pre></details>\n";
  }
  checkpoint::write_file_atomically(html_path, html_page(info.title, body));
}

}  // namespace sg::train
