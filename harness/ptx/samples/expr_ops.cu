// The operations of the expr-to-ptx kata's language (katas/phase03/expr-to-ptx), written as
// CUDA C: harness/tests/test_ptx_expr_ops.py runs nvcc's PTX for them on the interpreter and
// compares it with the kata's own compiler. -fmad=false keeps a*b+c two roundings, as the
// language means it. Regenerate the checked-in PTX with:
//   nvcc -ptx -arch=sm_75 -O3 -fmad=false -diag-suppress=177 expr_ops.cu -o expr_ops_sm75.ptx

extern "C" __global__ void arith(float* out, const float* xs, const float* ys, const int* ks,
                                      const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  float r;
  r = x * y + 2.5f;
  out[i] = r;
}

extern "C" __global__ void divide(float* out, const float* xs, const float* ys, const int* ks,
                                       const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  float r;
  r = (x - y) / (y * y + 1.0f);
  out[i] = r;
}

extern "C" __global__ void roots(float* out, const float* xs, const float* ys, const int* ks,
                                      const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  float r;
  r = sqrtf(fabsf(x)) + rsqrtf(fabsf(y) + 1.0f);
  out[i] = r;
}

extern "C" __global__ void approx(float* out, const float* xs, const float* ys, const int* ks,
                                       const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  float r;
  r = __sinf(x) * __cosf(y) - exp2f(x * 0.1f) + __log2f(fabsf(y) + 0.5f);
  out[i] = r;
}

extern "C" __global__ void minmax(float* out, const float* xs, const float* ys, const int* ks,
                                       const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  float r;
  r = fminf(x, y) - fmaxf(x, -y) + fabsf(x);
  out[i] = r;
}

extern "C" __global__ void compare(float* out, const float* xs, const float* ys, const int* ks,
                                        const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  float r;
  r = x != y ? x : (x < y ? y : 0.5f);
  out[i] = r;
}

extern "C" __global__ void tofloat(float* out, const float* xs, const float* ys, const int* ks,
                                        const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  float r;
  r = (float)k * 0.25f + (float)(j % 7);
  out[i] = r;
}

extern "C" __global__ void intdiv(int* out, const float* xs, const float* ys, const int* ks,
                                       const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  int r;
  r = k / 7 + j % 5 - k / j + k % j;
  out[i] = r;
}

extern "C" __global__ void toint(int* out, const float* xs, const float* ys, const int* ks,
                                      const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  int r;
  r = (int)(x * 100.0f) - min(k, j) * abs(j);
  out[i] = r;
}

extern "C" __global__ void intsel(int* out, const float* xs, const float* ys, const int* ks,
                                       const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  int r;
  r = k >= j ? k - j : -(k * 3);
  out[i] = r;
}

extern "C" __global__ void mixed(int* out, const float* xs, const float* ys, const int* ks,
                                      const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  int r;
  r = max(k, 0) + (x <= y ? 1 : 2) * (k == j ? 3 : 4);
  out[i] = r;
}

extern "C" __global__ void lets(float* out, const float* xs, const float* ys, const int* ks,
                                     const int* js, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i], y = ys[i];
  int k = ks[i], j = js[i];
  float r;
  float s = x * x;
  float t = s - y;
  r = t > 0.0f ? sqrtf(t) : -t;
  out[i] = r;
}
