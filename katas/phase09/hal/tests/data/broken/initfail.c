// A backend whose init fails, as a vendor library does with no device present (GIVEN).
#include "hal_backend.h"

static int no_device(void) { return HAL_ERROR_INVALID_DEVICE; }
static int count(void) { return 1; }

static const hal_backend_ops kOps = {
    .struct_size = sizeof(hal_backend_ops),
    .abi_major = HAL_ABI_MAJOR,
    .abi_minor = HAL_ABI_MINOR,
    .name = "nodevice",
    .priority = 500,
    .init = no_device,
    .device_count = count,
};

HAL_BACKEND_EXPORT const hal_backend_ops* hal_backend_entry(uint32_t major, uint32_t minor) {
    (void)major, (void)minor;
    return &kOps;
}
