// kernels_cpu.c: a module for the cpu backend (GIVEN): hal_cpu_kernel functions, one call per
// thread. params[i] points at argument i: a device pointer (void*) or a value.
#include "hal_backend.h"

#define TID(t) ((size_t)(t)->block_idx.x * (t)->block_dim.x + (t)->thread_idx.x)
#define STRIDE(t) ((size_t)(t)->block_dim.x * (t)->grid_dim.x)
#define KERNEL __attribute__((visibility("default"))) void

// c[i] = a[i] + b[i] for i < n (a grid-stride loop, as phase 02's vector_add)
KERNEL vector_add(const hal_cpu_thread* t, void** p) {
    const float* a = *(const float**)p[0];
    const float* b = *(const float**)p[1];
    float* c = *(float**)p[2];
    int n = *(const int*)p[3];
    for (size_t i = TID(t); i < (size_t)n; i += STRIDE(t)) c[i] = a[i] + b[i];
}

// y[i] = alpha * x[i] + y[i]
KERNEL saxpy(const hal_cpu_thread* t, void** p) {
    float alpha = *(const float*)p[0];
    const float* x = *(const float**)p[1];
    float* y = *(float**)p[2];
    int n = *(const int*)p[3];
    for (size_t i = TID(t); i < (size_t)n; i += STRIDE(t)) y[i] = alpha * x[i] + y[i];
}

// out[i] = i * scale + offset over a 3-D grid of 3-D blocks (every index and dimension used):
// i is the thread's linear index in the whole grid, x fastest.
KERNEL iota3d(const hal_cpu_thread* t, void** p) {
    unsigned* out = *(unsigned**)p[0];
    unsigned scale = *(const unsigned*)p[1];
    unsigned long long offset = *(const unsigned long long*)p[2];
    size_t bx = t->block_idx.x + (size_t)t->grid_dim.x * (t->block_idx.y + (size_t)t->grid_dim.y * t->block_idx.z);
    size_t nt = (size_t)t->block_dim.x * t->block_dim.y * t->block_dim.z;
    size_t tx = t->thread_idx.x + (size_t)t->block_dim.x * (t->thread_idx.y + (size_t)t->block_dim.y * t->thread_idx.z);
    size_t i = bx * nt + tx;
    out[i] = (unsigned)(i * scale + offset);
}

// x[i] += 1 for i < n: run on one stream many times, the count says every launch ran once.
KERNEL inc(const hal_cpu_thread* t, void** p) {
    int* x = *(int**)p[0];
    int n = *(const int*)p[1];
    for (size_t i = TID(t); i < (size_t)n; i += STRIDE(t)) x[i] += 1;
}

// x[i] = x[i] * m + a (order matters: (x*2+1)*3+0 != (x*3+0)*2+1)
KERNEL affine(const hal_cpu_thread* t, void** p) {
    int* x = *(int**)p[0];
    int n = *(const int*)p[1];
    int m = *(const int*)p[2];
    short a = *(const short*)p[3];
    unsigned char flag = *(const unsigned char*)p[4];
    for (size_t i = TID(t); i < (size_t)n; i += STRIDE(t)) x[i] = x[i] * m + a + flag;
}

// No parameters at all: launched with nargs 0 and args NULL.
KERNEL noop(const hal_cpu_thread* t, void** p) {
    (void)t, (void)p;
}
