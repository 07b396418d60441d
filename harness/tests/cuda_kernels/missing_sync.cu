// A missing __syncthreads(): each thread updates its own shared element, then reads its
// neighbour's with no barrier between the neighbour's write and the read (racecheck reports RAW
// hazards). The first barrier makes the race's outcomes well defined: d[t] is s[t + 1] before
// or after its update, d[t + 1] or d[t + 1] + 1, depending on which thread ran first.
__global__ void shift(float* d, int n) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = d[t];
    __syncthreads();
    s[t] = s[t] + 1.0f;
    // __syncthreads() belongs here
    d[t] = s[(t + 1) % n];
}
