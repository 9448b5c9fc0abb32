/* k_reduce.c — placeholder while the kernels are being written (returns no kernel). */
#include "kernels.h"

gs_kernel_fn gs_kernel_reduce(gs_opcode op) {
    (void)op;
    return NULL;
}
