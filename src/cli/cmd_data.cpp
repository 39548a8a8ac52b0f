// stepgraph data synth --out PREFIX [--tokens N] [--seed S] [--force] [--json]
// stepgraph data inspect PREFIX [--json] [--vocab-size V]
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/strings.h"
#include "data/blended_dataset.h"
#include "data/indexed_dataset.h"
#include "data/synth_corpus.h"

namespace sg::cli {
namespace {

struct SynthArgs {
  std::string out;
  uint64_t tokens = data::SynthOptions{}.num_tokens;
  uint64_t seed = data::SynthOptions{}.seed;
  bool force = false;
  bool json = false;
};

struct InspectArgs {
  std::string prefix;
  int64_t vocab_size = 0;
  int64_t documents = 3;
  int64_t tokens_per_document = 16;
  bool json = false;
};

int run_synth(const SynthArgs& args) {
  data::SynthOptions options;
  options.num_tokens = args.tokens;
  options.seed = args.seed;
  options.replace_existing = args.force;
  const auto summary = data::write_synth_corpus(args.out, options);
  if (args.json) {
    nlohmann::json j = summary.to_json();
    j["prefix"] = args.out;
    j["seed"] = args.seed;
    std::printf("%s\n",
                j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());  // paths need not be UTF-8
  } else {
    std::printf("wrote %s.bin and %s.idx (seed %llu)\n%s", args.out.c_str(), args.out.c_str(),
                static_cast<unsigned long long>(args.seed), summary.to_text().c_str());
  }
  return 0;
}

int run_inspect(const InspectArgs& args) {
  data::check_dataset_exists(args.prefix);  // what train says of a missing dataset or a PREFIX.bin given
  const auto ds = data::IndexedDataset::open(args.prefix, args.vocab_size);
  nlohmann::json docs = nlohmann::json::array();
  const uint64_t shown = std::min<uint64_t>(
      ds.num_documents(), static_cast<uint64_t>(std::max<int64_t>(args.documents, 0)));
  for (uint64_t d = 0; d < shown; ++d) {
    std::vector<int32_t> tokens;
    for (int64_t s = ds.document_index(d); s < ds.document_index(d + 1); ++s) {
      const auto seq = ds.sequence(static_cast<uint64_t>(s));
      tokens.insert(tokens.end(), seq.begin(), seq.end());
    }
    const size_t length = tokens.size();
    tokens.resize(std::min<size_t>(
        length, static_cast<size_t>(std::max<int64_t>(args.tokens_per_document, 0))));
    docs.push_back({{"document", d}, {"length", length}, {"first_tokens", tokens}});
  }
  if (args.json) {
    const nlohmann::json j{
        {"prefix", args.prefix},           {"dtype", data::token_dtype_name(ds.dtype())},
        {"sequences", ds.num_sequences()}, {"documents", ds.num_documents()},
        {"tokens", ds.num_tokens()},       {"min_token", ds.min_token()},
        {"max_token", ds.max_token()},     {"first_documents", docs}};
    std::printf("%s\n",
                j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());  // paths need not be UTF-8
    return 0;
  }
  std::printf("%s (.bin/.idx)\n", args.prefix.c_str());
  std::printf("  dtype:      %s\n", data::token_dtype_name(ds.dtype()));
  std::printf("  sequences:  %llu\n", static_cast<unsigned long long>(ds.num_sequences()));
  std::printf("  documents:  %llu\n", static_cast<unsigned long long>(ds.num_documents()));
  std::printf("  tokens:     %llu\n", static_cast<unsigned long long>(ds.num_tokens()));
  if (ds.num_tokens() == 0) {
    std::printf("  token ids:  none (the dataset is empty: nothing would train on it)\n");
  } else {
    std::printf("  token ids:  min %lld, max %lld\n", static_cast<long long>(ds.min_token()),
                static_cast<long long>(ds.max_token()));
  }
  for (const auto& doc : docs) {
    std::vector<std::string> parts;
    for (const auto& t : doc["first_tokens"]) parts.push_back(std::to_string(t.get<int32_t>()));
    const size_t length = doc["length"].get<size_t>();
    std::printf("  document %llu (%zu tokens): %s%s\n",
                static_cast<unsigned long long>(doc["document"].get<uint64_t>()), length,
                join(parts, " ").c_str(), parts.size() < length ? " ..." : "");
  }
  return 0;
}

const CommandRegistration kRegistration{
    "data", 40, [](CLI::App& app, int& exit_code) {
      CLI::App* cmd =
          app.add_subcommand("data", "Write or inspect Megatron indexed datasets (.bin/.idx).");
      cmd->require_subcommand(1);

      auto synth = std::make_shared<SynthArgs>();
      CLI::App* s = cmd->add_subcommand("synth",
                                        "Write the learnable synthetic corpus (counting, repeated "
                                        "motifs, addition over a 256-token vocabulary) "
                                        "as PREFIX.bin/PREFIX.idx; prints its unigram entropy, the "
                                        "loss a trained model must beat.");
      s->add_option("--out", synth->out, "output prefix (writes PREFIX.bin and PREFIX.idx)")
          ->required();
      s->add_option("--tokens", synth->tokens, "at least this many tokens (whole documents)")
          ->check(positive_number())
          ->capture_default_str();
      s->add_option("--seed", synth->seed, "generator seed")->check(seed_number())->capture_default_str();
      s->add_flag("--force", synth->force,
                  "replace PREFIX.bin/PREFIX.idx when they exist (without it, an existing dataset is an error)");
      s->add_flag("--json", synth->json, "print the summary as JSON");
      s->callback([synth, &exit_code] { exit_code = run_synth(*synth); });

      auto inspect = std::make_shared<InspectArgs>();
      CLI::App* i = cmd->add_subcommand("inspect",
                                        "Validate an indexed dataset and print its counts, token "
                                        "dtype, id range and first documents.");
      i->add_option("prefix", inspect->prefix, "dataset prefix (PREFIX.bin and PREFIX.idx)")
          ->required();
      i->add_option("--vocab-size", inspect->vocab_size, "also check every token id is below this")
          ->check(non_negative_number());
      i->add_option("--documents", inspect->documents, "how many documents to show")
          ->check(non_negative_number())
          ->capture_default_str();
      i->add_option("--tokens-per-document", inspect->tokens_per_document, "tokens shown per document")
          ->check(non_negative_number())
          ->capture_default_str();
      i->add_flag("--json", inspect->json, "print JSON");
      i->callback([inspect, &exit_code] { exit_code = run_inspect(*inspect); });
    }};

}  // namespace
}  // namespace sg::cli
