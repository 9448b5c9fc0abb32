/*
 * gspmd/gspmd.h — the whole public API in one include, for programs embedding gspmd.
 *
 *   text.h       parse HLO text into a module (gs_parse_module), print it back
 *   ir.h         modules, computations, instructions, shapes; the verifier
 *   sharding.h   shardings, meshes and PartitionSpecs (gs_module_apply_shardings)
 *   propagate.h  sharding propagation (gs_propagate)
 *   partition.h  the SPMD partitioner (gs_partition)
 *   compile.h    the whole pipeline in one call (gs_compile): verify, shard, propagate, partition
 *   interp.h     values and the reference interpreter (gs_interp_eval)
 *   runtime.h    runs on N devices (gs_run_partitioned) and verification (gs_verify_outputs)
 *   cost.h       FLOPs, memory, and the step-time model on machine profiles
 *   npy.h        .npy files
 * Link with -lgspmd (pkg-config gspmd), or find_package(gspmd) and gspmd::gspmd.
 */
#ifndef GSPMD_GSPMD_H
#define GSPMD_GSPMD_H

#include "gspmd/version.h"
#include "gspmd/base.h"
#include "gspmd/ir.h"
#include "gspmd/numeric.h"
#include "gspmd/text.h"
#include "gspmd/sharding.h"
#include "gspmd/builder.h"
#include "gspmd/propagate.h"
#include "gspmd/sdy.h"
#include "gspmd/partition.h"
#include "gspmd/compile.h"
#include "gspmd/interp.h"
#include "gspmd/npy.h"
#include "gspmd/runtime.h"
#include "gspmd/cost.h"

#endif /* GSPMD_GSPMD_H */
