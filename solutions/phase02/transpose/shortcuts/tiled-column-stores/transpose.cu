// out (cols x rows) = in (rows x cols) transposed, row-major floats (reference).
//
// Launch (all three): block (32, 8), grid (ceil(cols / 32), ceil(rows / 32)): each block
// moves one 32 x 32 tile, each thread 4 of its elements (rows y, y + 8, y + 16, y + 24).
#define TILE 32
#define ROWS 8

// Naive: reads are coalesced (a warp reads 32 consecutive floats of a row = 4 sectors), but
// writes go down a column of `out`: 32 addresses `rows` floats apart, 32 sectors for 128
// useful bytes. Coalescing efficiency of the stores: 4 / 32 = 12.5 %.
__global__ void transpose_naive(const float* in, float* out, int rows, int cols) {
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < cols && y + j < rows) out[x * rows + (y + j)] = in[(y + j) * cols + x];
}

// Tiled: read a tile with coalesced row reads into shared memory, then write it out with
// coalesced row writes of `out`, reading the tile by columns. Global traffic is now ideal;
// but a column of a [32][32] float tile is one bank (address / 4 mod 32): a 32-way conflict.
// Shortcut: the tile goes through shared memory, but it is written back in the naive
// pattern (down a column of `out`): 32 sectors per warp store again.
__global__ void transpose_tiled(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  for (int j = 0; j < TILE; j += ROWS)
    if (x < cols && y + j < rows) out[x * rows + (y + j)] = tile[threadIdx.y + j][threadIdx.x];
}

// Padded: one unused column shifts each row of the tile by one bank, so a column of the tile
// touches 32 different banks: conflict-free, for 32 x 4 = 128 bytes more shared memory.
__global__ void transpose_padded(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
