// DLRM as a workload of the training engine (lib/engine/workload.h): the table of functions (each
// DLRM's own, of the member's type), its train-step options and its MLLOG keys.
#include "engine/workload.h"
#include "workloads/dlrm/dlrm.h"

// ---- MLLOG ----

// The optimizer and schedule keys of closed_dlrm (HugeCTR's names, as NVIDIA's v1.x logs): the
// engine logs them from the parsed "optimizer" section (engine/optimizer.h).
static const tk_opt_mllog_key opt_mllog_names[] = {
    {"opt_base_learning_rate", TK_OPTV_BASE_LR, 'r', NULL},
    {"sgd_opt_base_learning_rate", TK_OPTV_BASE_LR, 'r', NULL},
    {"opt_learning_rate_warmup_steps", TK_OPTV_WARMUP_STEPS, 'i', NULL},
    {"opt_learning_rate_warmup_factor", TK_OPTV_ZERO, 'r', NULL},
    {"lr_decay_start_steps", TK_OPTV_DECAY_START, 'i', NULL},
    {"sgd_opt_learning_rate_decay_steps", TK_OPTV_DECAY_STEPS, 'i', NULL},
    {"sgd_opt_learning_rate_decay_poly_power", TK_OPTV_POLY_POWER, 'r', NULL},
    {NULL, 0, 0, NULL}};

// The tensors the MLPerf rules name (closed_dlrm.yaml), in the reference's order.
static int wl_mllog_weights(void *model, tk_mllog *L, tk_err *e) {
    const tk_dlrm *m = model;
    TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", "embeddings"), e));
    for (int l = 0; l < m->nlayers; l++) {
        char name[48];
        int top = l >= m->cfg.nbot;
        snprintf(name, sizeof name, "%s_mlp_dense%d", top ? "top" : "bottom", (top ? l - m->cfg.nbot : l) + 1);
        TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", name), e));
    }
    return 0;
}

static const tk_wl_option options[] = {
    {.name = "hybrid-embedding", .key = "parallel.hybrid_embedding", .value = "true",
     .help = "(the default) train the tables' most used rows as a replica: several ranks hold it on every "
             "rank (all-reduced) and exchange only the rest; one rank runs the same step (implies --force-exchange)"},
    {.name = "no-hybrid-embedding", .key = "parallel.hybrid_embedding", .value = "false",
     .help = "the plain step: every row through the sparse update (one rank) or the all-to-all exchange "
             "(several ranks); --dump-step needs it"},
    {.name = "hybrid-max-rows", .has_arg = 1, .key = "parallel.hybrid_max_rows", .lo = 0, .hi = 1 << 30, .arg = "N",
     .help = "... at most N replicated rows (default 1048576)"},
    {.name = "hybrid-stat-batches", .has_arg = 1, .key = "parallel.hybrid_stat_batches", .lo = 1, .hi = 100000,
     .arg = "N", .help = "... chosen from the first N training batches (default 20)"},
    {.name = "hybrid-capacity", .has_arg = 1, .key = "parallel.hybrid_capacity", .lo = 0, .hi = INT32_MAX,
     .word = "auto", .arg = "auto|N",
     .help = "... vectors a rank pair of the fixed-size exchange (CUDA graphs; a batch that does not fit goes "
             "eagerly, exact); 0: none"},
    {.name = "force-exchange", .key = "parallel.force_exchange", .value = "true",
     .help = "one rank: run the several-ranks step anyway (the exchange is a copy, collectives over a world of "
             "1): with --no-hybrid-embedding that code's check on one GPU; slower"},
    {0}};

const tk_workload tk_workload_dlrm = {
    .version = TK_WORKLOAD_V7, .name = "dlrm", .metric = "auc", .precisions = tk_dlrm_precisions,
    .summary = "DLRM (MLPerf Training v1.x recommendation, Criteo Terabyte), target AUC",
    .options = options, .sections = tk_dlrm_sections,
    .config = tk_dlrm_config_parse, .config_free = tk_dlrm_config_free, .wants_comm = tk_dlrm_wants_comm,
    .create = tk_dlrm_create, .destroy = tk_dlrm_destroy, .init_weights = tk_dlrm_init_weights,
    .weights_loaded = tk_dlrm_weights_loaded,
    .reader_open = tk_dlrm_data_open, .reader_close = tk_dlrm_data_close, .reader_count = tk_dlrm_data_count,
    .read_batch = tk_dlrm_data_batch,
    .batch = tk_dlrm_batch, .staged = tk_dlrm_hybrid_stage,
    .use = tk_dlrm_hybrid_use, .prepare = tk_dlrm_prepare,
    .step = tk_dlrm_fwd_bwd, .own_grad_reduce = 1, .after_update = tk_dlrm_after_update,
    .graph_key = tk_dlrm_graph_key, .graph_per_slot = tk_dlrm_graph_per_slot, .step_queued = tk_dlrm_step_queued,
    .evalset_load = tk_dlrm_evalset_load, .evalset_count = tk_evalset_count,
    .evalset_free = tk_evalset_free, .evaluate = tk_dlrm_evaluate,
    .opt_mllog = opt_mllog_names, .mllog_weights = wl_mllog_weights,
    .profile_marks = TK_DLRM_PROF_MAX, .result_extra = tk_dlrm_result_extra,
    .dump_describe = tk_dlrm_dump_describe,
    .epoch_fraction = 1, // (HugeCTR's logs: every 0.05 epoch, epoch_num 1.05, 1.1, ...)
    .stage_depth = tk_dlrm_hybrid_depth,
};
