// A missing __syncthreads(): each thread reads the element another thread wrote to shared memory,
// with no barrier between the write and the read (a race racecheck reports as RAW hazards).
__global__ void reverse(float* d, int n) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = d[t];
    // __syncthreads() belongs here
    d[t] = s[n - t - 1];
}
