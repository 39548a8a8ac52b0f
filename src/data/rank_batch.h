#pragma once
// A data-parallel rank's share of the global batch: the same sample stream on every rank (same data,
// seed and position), cut into global batches; rank r trains on the contiguous rows
// [r G / dp, (r+1) G / dp) of each (G = global batch size in sequences), so its microbatch j is the
// global batch's microbatch r M + j (M = microbatches per rank). The union of the ranks' rows is exactly
// the world-size-1 batch, and every rank's loader ends each batch at the same position, so a checkpoint
// taken at one world size resumes at any other.
#include <cstdint>

#include "data/batch.h"

namespace sg::data {

struct RankRows {
  int64_t first = 0;  // first row (sequence) of the global batch
  int64_t count = 0;  // rows of this rank
};

// Throws sg::Error unless global_sequences divides evenly among data_parallel_size ranks.
RankRows rank_rows(int64_t global_sequences, int64_t data_parallel_size, int64_t rank);

// The same for a batch of `sequences` the ranks may not share evenly (full validation's last batch): contiguous, the
// first ranks taking one fewer when it does not divide (none when there are fewer sequences than ranks).
RankRows uneven_rank_rows(int64_t sequences, int64_t data_parallel_size, int64_t rank);

// Fills `out` (out.num_sequences = rows.count) with rows [rows.first, rows.first + rows.count) of the
// next global batch of `global_sequences` samples, skipping the other ranks' rows without reading them.
// Returns the loader position after the whole global batch (the same on every rank).
DataPosition fill_rank_batch(DataLoader& loader, const HostBatchView& out, int64_t global_sequences,
                             const RankRows& rows, const BatchOptions& options = {});

}  // namespace sg::data
