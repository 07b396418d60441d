// YOUR FILE. out (cols x rows) = in (rows x cols) transposed, row-major floats.
//
// Launch (all three): block (32, 8), grid (ceil(cols / 32), ceil(rows / 32)): each block
// moves one 32 x 32 tile, each thread 4 of its elements (rows y, y + 8, y + 16, y + 24).
// Sizes need not be multiples of 32. Until you write a kernel it leaves `out` untouched,
// which the tests report as "not written yet".
#define TILE 32
#define ROWS 8

// Task "naive": read in[y][x], write out[x][y], straight from and to global memory.
__global__ void transpose_naive(const float* in, float* out, int rows, int cols) {
  // TODO
}

// Task "tiled": read the tile with coalesced row reads into shared memory, __syncthreads(),
// then write the transposed tile with coalesced row writes of `out`.
__global__ void transpose_tiled(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE];
  // TODO
}

// Task "padded": transpose_tiled with a tile that has no shared-memory bank conflicts.
__global__ void transpose_padded(const float* in, float* out, int rows, int cols) {
  // TODO: declare the tile so that a column of it spreads over all 32 banks
}
