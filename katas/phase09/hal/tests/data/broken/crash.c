// A backend whose init dereferences NULL (GIVEN): the core must survive it.
#include "hal_backend.h"

static int crash(void) {
    volatile int* p = 0;
    return *p;
}
static int count(void) { return 1; }

static const hal_backend_ops kOps = {
    .struct_size = sizeof(hal_backend_ops),
    .abi_major = HAL_ABI_MAJOR,
    .abi_minor = HAL_ABI_MINOR,
    .name = "crasher",
    .priority = 900,
    .init = crash,
    .device_count = count,
};

HAL_BACKEND_EXPORT const hal_backend_ops* hal_backend_entry(uint32_t major, uint32_t minor) {
    (void)major, (void)minor;
    return &kOps;
}
