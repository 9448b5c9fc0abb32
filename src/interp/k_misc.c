/* k_misc.c — placeholder while the kernels are being written (returns no kernel). */
#include "kernels.h"

gs_kernel_fn gs_kernel_misc(gs_opcode op) {
    (void)op;
    return NULL;
}
