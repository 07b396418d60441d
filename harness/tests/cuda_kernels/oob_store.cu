// An out-of-bounds store: no `if (i < n)`, so the last block's threads past n write beyond c.
__global__ void fill(float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    c[i] = 2.0f * i;
}
