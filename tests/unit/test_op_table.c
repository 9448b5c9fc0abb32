/*
 * test_op_table.c — walks the op table (ops.def) and the attribute table (attrs.def): names are
 * unique and round-trip through the lookups, operand bounds are sane, and every opcode has an
 * interpreter kernel except the few listed here with the reason (the list is the documented
 * gap; adding a kernel means deleting its line).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "gspmd/interp.h"

/* Opcodes the reference interpreter does not run, and why. */
static const struct {
    gs_opcode op;
    const char *why;
} NOT_INTERPRETED[] = {
    {GS_OP_STOCHASTIC_CONVERT, "needs XLA's random bits"},
    {GS_OP_SEND, "host transfer has no host here"},
    {GS_OP_SEND_DONE, "host transfer has no host here"},
    {GS_OP_RECV, "host transfer has no host here"},
    {GS_OP_RECV_DONE, "host transfer has no host here"},
};

static const char *not_interpreted_why(gs_opcode op) {
    for (size_t i = 0; i < sizeof NOT_INTERPRETED / sizeof NOT_INTERPRETED[0]; i++)
        if (NOT_INTERPRETED[i].op == op) return NOT_INTERPRETED[i].why;
    return NULL;
}

static void test_op_names_unique_and_round_trip(void **state) {
    (void)state;
    for (int i = 0; i < GS_N_OPCODES; i++) {
        const gs_op_info *info = gs_op_info_of((gs_opcode)i);
        assert_int_equal(gs_op_from_name(info->name, strlen(info->name)), i);
        assert_true(info->min_operands >= 0);
        assert_true(info->max_operands == -1 || info->max_operands >= info->min_operands);
        assert_true(info->family < GS_N_FAMILIES);
    }
    for (int k = 0; k < GS_N_ATTRS; k++) {
        const char *n = gs_attr_name((gs_attr_key)k);
        assert_int_equal(gs_attr_from_name(n, strlen(n)), k);
    }
    assert_int_equal(gs_attr_from_name("no_such_attribute", 17), GS_ATTR_UNKNOWN);
}

static void test_every_op_has_a_kernel(void **state) {
    (void)state;
    int missing = 0;
    for (int i = 0; i < GS_N_OPCODES; i++) {
        bool has = gs_interp_supports((gs_opcode)i);
        const char *why = not_interpreted_why((gs_opcode)i);
        if (!has && !why) {
            fprintf(stderr, "op %s has no interpreter kernel\n", gs_op_name((gs_opcode)i));
            missing++;
        }
        if (has && why) {
            fprintf(stderr, "op %s now has a kernel: remove it from NOT_INTERPRETED\n",
                    gs_op_name((gs_opcode)i));
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_names_unique_and_round_trip),
        cmocka_unit_test(test_every_op_has_a_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
