// A backend without the entry symbol: it exports hal_backend_entry_v2 instead (GIVEN).
#include "hal_backend.h"

HAL_BACKEND_EXPORT const hal_backend_ops* hal_backend_entry_v2(uint32_t major, uint32_t minor) {
    (void)major, (void)minor;
    return NULL;
}
