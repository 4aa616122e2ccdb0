// MLPerf RNN-T's MLLOG keys (mllog.h). The names are the rules' (mlcommons/logging
// training_1.0.0 and training_1.1.0 closed_rnnt.yaml, as share/compliance carries them); the
// values as NVIDIA's v1.1 logs give them (training_results_v1.1/NVIDIA/results/*/rnnt) and the
// reference's train.py logs them (rnn_speech_recognition/pytorch: its ema_factor, min_lr and
// optimizer_* names differ from the rules', whose names NVIDIA's logs use and these are).
#include "workloads/rnnt/mllog.h"

#include "engine/cfg.h"

// 12 keys from the "optimizer" section. opt_lamb_learning_rate_decay_poly_power is the rules'
// name for the exponential decay's factor per epoch (gamma: NVIDIA logs 0.939 there).
const tk_opt_mllog_key rnnt_opt_mllog[] = {
    {"opt_name", TK_OPTV_NAME, 0, NULL},                                    // must be "lamb"
    {"opt_base_learning_rate", TK_OPTV_BASE_LR, 'r', NULL},
    {"opt_lamb_epsilon", TK_OPTV_EPS, 'r', NULL},                           // must be 1e-9
    {"opt_lamb_learning_rate_decay_poly_power", TK_OPTV_GAMMA, 'r', NULL},
    {"opt_lamb_learning_rate_hold_epochs", TK_OPTV_HOLD_EPOCHS, 'i', NULL},
    {"opt_learning_rate_warmup_epochs", TK_OPTV_WARMUP_EPOCHS, 'g', NULL},  // 1.0.0: must be 6
    {"opt_weight_decay", TK_OPTV_WEIGHT_DECAY, 'r', NULL},                  // must be 1e-3
    {"opt_lamb_beta_1", TK_OPTV_BETA1, 'r', NULL},
    {"opt_lamb_beta_2", TK_OPTV_BETA2, 'r', NULL},
    {"opt_gradient_clip_norm", TK_OPTV_MAX_GRAD_NORM, 'g', NULL},           // must be 1 or inf
    {"opt_lamb_learning_rate_min", TK_OPTV_END_LR, 'r', NULL},              // must be 1e-5
    {"model_eval_ema_factor", TK_OPTV_EMA, 'r', NULL},
    {NULL, 0, 0, NULL}};

// The rules' other 18 keys (with the 12 above and weights_initialization: 31).
const rnnt_mllog_src rnnt_mllog_sources[] = {
    {"global_batch_size", "engine"},
    {"gradient_accumulation_steps", "engine"}, // (NVIDIA logs it; not in the rules)
    {"train_samples", "engine"},
    {"eval_samples", "engine"},                // must be 2703 (dev-clean)
    {"eval_accuracy", "engine"},               // the WER, with epoch_num; <= 0.058 to succeed
    {"opt_learning_rate_alt_decay_func", "const: true"},
    {"opt_learning_rate_alt_warmup_func", "const: true"},
    {"model_weights_initialization_scale", "model.weights_init_scale"},
    {"eval_max_prediction_symbols", "eval.max_symbols"}, // must be 300
    {"data_train_max_duration", "data.max_duration"},
    {"data_train_num_buckets", "data.buckets"},           // an integer
    {"data_speed_perturbaton_min", "data.speed_min"},     // must be 0.85
    {"data_speed_perturbaton_max", "data.speed_max"},     // must be 1.15
    {"data_spec_augment_freq_n", "data.freq_masks"},      // must be 2
    {"data_spec_augment_freq_min", "const: 0"},
    {"data_spec_augment_freq_max", "data.max_freq"},      // must be 20
    {"data_spec_augment_time_n", "data.time_masks"},      // must be 10
    {"data_spec_augment_time_min", "const: 0"},
    {"data_spec_augment_time_max", "data.max_time"},      // must be 0.03
    {NULL, NULL}};

const char *const rnnt_mllog_tensors[] = {"pre_rnn",  "post_rnn",  "pred_embed", "dec_rnn",
                                          "joint_pred", "joint_enc", "joint_net", NULL};

int rnnt_eval_cfg_parse(json_t *root, const char *path, rnnt_eval_cfg *c, tk_err *e) {
    static const char *const eval_keys[] = {"max_symbols", "max_duration", NULL};
    c->max_symbols = 300; // the reference's RNNTGreedyDecoder max_symbol_per_sample
    TRY(tk_cfg_keys(root, path, "eval", eval_keys, e));
    int64_t v = c->max_symbols;
    TRY(tk_cfg_int_opt(root, path, "eval.max_symbols", 1, 100000, &v, e));
    c->max_symbols = (int)v;
    c->max_duration = 35.0;
    return tk_cfg_num_opt(root, path, "eval.max_duration", 0.1, 100000, &c->max_duration, e);
}
