// DLRM (MLPerf Training v1.x recommendation) as a whole: every header of lib/workloads/dlrm/ (the
// table in workload.c, tests that look inside the model). The engine knows it only through
// tk_workload_dlrm (workload.c).
#ifndef TK_WORKLOADS_DLRM_DLRM_H
#define TK_WORKLOADS_DLRM_DLRM_H

#include "workloads/dlrm/ckpt.h"
#include "workloads/dlrm/config.h"
#include "workloads/dlrm/data.h"
#include "workloads/dlrm/eval.h"
#include "workloads/dlrm/hybrid.h"
#include "workloads/dlrm/model.h"
#include "workloads/dlrm/profile.h"
#include "workloads/dlrm/step.h"
#include "workloads/dlrm/types.h"

#endif
