// Tile 128x256x64, epilogue subtile 128x16, cluster 2x1: for llama/1b's K = 2048, where production's 128x128 tile
// is 0.94x the two kernels (1.02-1.03x in four device calls, docs/performance.md, tenth session). The small subtile
// leaves shared memory for the wider tile's mainloop stages beside the g/u staging buffers.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<128, 256, 128, 16, 2> registered;
}  // namespace
