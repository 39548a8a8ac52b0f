#include "data/rank_batch.h"

#include "core/error.h"
#include "core/strings.h"

namespace sg::data {

RankRows rank_rows(int64_t global_sequences, int64_t data_parallel_size, int64_t rank) {
  SG_CHECK(data_parallel_size >= 1 && rank >= 0 && rank < data_parallel_size,
           strprintf("rank %lld of data-parallel size %lld", static_cast<long long>(rank),
                     static_cast<long long>(data_parallel_size)));
  SG_CHECK(global_sequences > 0 && global_sequences % data_parallel_size == 0,
           strprintf("a global batch of %lld sequences does not split evenly among %lld data-parallel ranks "
                     "(train.global_batch_size must be a multiple of micro_batch_size x data_parallel_size)",
                     static_cast<long long>(global_sequences), static_cast<long long>(data_parallel_size)));
  const int64_t per_rank = global_sequences / data_parallel_size;
  return {rank * per_rank, per_rank};
}

RankRows uneven_rank_rows(int64_t sequences, int64_t data_parallel_size, int64_t rank) {
  SG_CHECK(data_parallel_size >= 1 && rank >= 0 && rank < data_parallel_size && sequences >= 0,
           strprintf("rank %lld of data-parallel size %lld, %lld sequences", static_cast<long long>(rank),
                     static_cast<long long>(data_parallel_size), static_cast<long long>(sequences)));
  const int64_t first = rank * sequences / data_parallel_size;
  return {first, (rank + 1) * sequences / data_parallel_size - first};
}

DataPosition fill_rank_batch(DataLoader& loader, const HostBatchView& out, int64_t global_sequences,
                             const RankRows& rows, const BatchOptions& options) {
  SG_CHECK(out.num_sequences == rows.count && rows.first >= 0 && rows.first + rows.count <= global_sequences,
           strprintf("fill_rank_batch: rows [%lld, %lld) of a global batch of %lld into a buffer of %lld sequences",
                     static_cast<long long>(rows.first), static_cast<long long>(rows.first + rows.count),
                     static_cast<long long>(global_sequences), static_cast<long long>(out.num_sequences)));
  for (int64_t i = 0; i < rows.first; ++i) loader.skip();
  fill_batch(loader, out, options);
  for (int64_t i = rows.first + rows.count; i < global_sequences; ++i) loader.skip();
  return loader.position();
}

}  // namespace sg::data
