// A backend built for ABI 2.0, a major this core does not speak (GIVEN). Its table would be
// laid out differently; the core must refuse it without calling anything in it.
#include <stdlib.h>

#include "hal_backend.h"

static int boom(void) { abort(); }

static struct {
    hal_backend_ops ops;
    void* more[8];
} kTable = {
    .ops = {
        .struct_size = sizeof(hal_backend_ops) + 8 * sizeof(void*),
        .abi_major = 2,
        .abi_minor = 0,
        .name = "future",
        .priority = 1000,
        .init = boom,
        .device_count = boom,
    },
};

HAL_BACKEND_EXPORT const hal_backend_ops* hal_backend_entry(uint32_t major, uint32_t minor) {
    (void)major, (void)minor;
    return &kTable.ops;
}
