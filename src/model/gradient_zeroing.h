#pragma once
// Which parts of the fp32 gradient buffer the training step zeroes at its start (issue 13).
//
// Gradients are added to over the microbatches, but most of the buffer need not be zeroed first: the
// FIRST WRITER of a big gradient block (a cuBLASLt wgrad GEMM, the MoE experts' grouped wgrad, the LM
// head's dW) overwrites it in the step's first microbatch (beta 0: the old contents are not read, NaN
// included) and every later write adds. A first writer is the one launch of its microbatch that writes the whole block, and nothing
// writes the block before it in the step. Everything else is zeroed at the step's start, in as few
// memsets as there are merged ranges: the norm weights, biases, the embedding table (its backward
// writes only the rows of the batch's tokens), Mamba's small parameters, the MoE router,
// the alignment gaps between blocks and the data-parallel padding.
//
// First writers of a step, in backward order:
//   the LM head's dW (LmHeadBuffers::overwrite_dweight): the first gradient write of every microbatch,
//     so also the first of a tied embedding, whose embedding backward then adds to it;
//   each layer's Layer::first_written_grads() (LayerIO::first_microbatch).
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/flat_range.h"
#include "model/layer.h"
#include "model/stack.h"

namespace sg::model {

// The blocks overwritten in the first microbatch: the LM head's (the embedding when tied) and every
// layer's first_written_grads(). Throws sg::Error naming the block when two writers claim one.
std::vector<ParamRef> first_written_gradients(const ModelLayout& layout,
                                              const std::vector<std::unique_ptr<Layer>>& layers);

// The ranges of [0, padded_size) no block of `first_written` covers, merged, in increasing order: what
// the step zeroes. padded_size >= layout.total() (the data-parallel padding, dist/sharding.h).
std::vector<dist::FlatRange> gradient_zero_ranges(const ModelLayout& layout, const std::vector<ParamRef>& first_written,
                                                  int64_t padded_size);

}  // namespace sg::model
