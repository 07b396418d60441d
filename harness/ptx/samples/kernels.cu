// Small kernels whose PTX (nvcc -ptx -arch=sm_75 -O3) is checked in beside this file, so the
// interpreter's tests run without nvcc. Regenerate with:
//   nvcc -ptx -arch=sm_75 -O3 kernels.cu -o kernels_sm75.ptx
extern "C" __global__ void saxpy(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * b[i] + 3.0f;
}

extern "C" __global__ void intops(const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int x = a[i], y = b[i];
    out[i] = ((x ^ y) << 3) + (x >> 2) - (y & 7) + x / 7 + (y % 5) + min(x, y) * abs(y);
  }
}

extern "C" __global__ void select_math(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float x = a[i];
    out[i] = x > b[i] ? sqrtf(fabsf(x)) : expf(b[i] * 0.1f);
  }
}

extern "C" __global__ void conversions(const float* a, int* oi, unsigned* ou, float* of,
                                       double* od, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float x = a[i];
    oi[i] = (int)x;
    ou[i] = (unsigned)(x * x);
    of[i] = (float)(int)(x * 10.0f) + (float)(long long)i;
    od[i] = (double)x * 1.5;
  }
}

// Lane-varying trip counts: threads leave the loop at different iterations.
extern "C" __global__ void ragged_loop(const float* a, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < i % 7; k++) acc += a[i] * (float)k;
  out[i] = acc;
}

// A 2-D grid of 2-D blocks over a row-major matrix.
extern "C" __global__ void matrix_add(const float* a, const float* b, float* c, int rows,
                                      int cols) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < rows && col < cols) c[row * cols + col] = a[row * cols + col] - 2.0f * b[row * cols + col];
}

// 64-bit integers, unsigned compares and division.
extern "C" __global__ void wide_ints(const unsigned long long* a, unsigned long long* out,
                                     unsigned* small, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned long long x = a[i];
    out[i] = (x >> 7) * 3 + (x < 1000 ? x / 3 : x % 1000);
    small[i] = (unsigned)x > 100u ? (unsigned)(x ^ 0xffu) : 1u;
  }
}
