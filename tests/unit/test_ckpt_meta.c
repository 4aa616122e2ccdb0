// The checkpoint metadata's one parser (lib/engine/ckpt.h tk_ckpt_meta_parse): the metadata a
// run writes parses back; keys that are absent stay absent; each malformed value is TK_EDATA
// naming the file and the key.
#include <stdint.h>

#include "engine/ckpt.h"
#include "tk_test.h"

// The metadata as train-step writes it (man/man5/trainkit-checkpoint.5), keys in file order.
static json_t *good(void) {
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "format", "trainkit-checkpoint-1", "workload", "dlrm",
                     "step", "73", "samples_seen", "18688", "epoch", "0", "config_hash", "0123456789abcdef", "rng",
                     "philox4x32-10:12345", "config", "{\"model\":{}}");
}

TK_TEST(parses_what_a_run_writes) {
    json_t *meta = good();
    tk_ckpt_meta m;
    tk_err e;
    tk_err_clear(&e);
    CHECK_EQ_INT(tk_ckpt_meta_parse(meta, "a.safetensors", &m, &e), 0);
    CHECK_STR(m.format, "trainkit-checkpoint-1");
    CHECK_STR(m.workload, "dlrm");
    CHECK_EQ_INT(m.step, 73);
    CHECK_EQ_INT(m.samples_seen, 18688);
    CHECK_EQ_INT(m.epoch, 0);
    CHECK_STR(m.config_hash, "0123456789abcdef");
    CHECK_STR(m.rng, "philox4x32-10:12345");
    CHECK(m.seed == 12345);
    CHECK_STR(m.config, "{\"model\":{}}");
    json_decref(meta);
}

TK_TEST(the_writer_and_the_parser_agree) {
    tk_ckpt_meta w = {.workload = "bert", .step = 9223372036854775807LL, .samples_seen = 4096, .epoch = 3,
                      .config_hash = "ffffffffffffffff", .seed = 18446744073709551615ULL, .config = "{}",
                      .world_size = 8};
    json_t *meta = tk_ckpt_meta_json(&w);
    tk_ckpt_meta m;
    tk_err e;
    CHECK(meta != NULL);
    CHECK_STR(json_string_value(json_object_get(meta, "step")), "9223372036854775807");
    CHECK_STR(json_string_value(json_object_get(meta, "rng")), "philox4x32-10:18446744073709551615");
    CHECK_EQ_INT(tk_ckpt_meta_parse(meta, "b.safetensors", &m, &e), 0);
    CHECK_STR(m.format, "trainkit-checkpoint-1");
    CHECK(m.step == 9223372036854775807LL);
    CHECK_EQ_INT(m.samples_seen, 4096);
    CHECK_EQ_INT(m.epoch, 3);
    CHECK_STR(json_string_value(json_object_get(meta, "world_size")), "8");
    CHECK_EQ_INT(m.world_size, 8);
    CHECK(m.seed == 18446744073709551615ULL);
    json_decref(meta);
    w.world_size = 0; // (unknown: not written)
    meta = tk_ckpt_meta_json(&w);
    CHECK(meta != NULL && json_object_get(meta, "world_size") == NULL);
    json_decref(meta);
}

TK_TEST(absent_keys_stay_absent) {
    json_t *meta = json_object(); // a foreign file's metadata
    tk_ckpt_meta m;
    tk_err e;
    CHECK_EQ_INT(tk_ckpt_meta_parse(meta, "c.safetensors", &m, &e), 0);
    CHECK(!m.format && !m.workload && !m.config_hash && !m.rng && !m.config);
    CHECK_EQ_INT(m.step, -1);
    CHECK_EQ_INT(m.samples_seen, -1);
    CHECK_EQ_INT(m.epoch, -1);
    CHECK_EQ_INT(m.world_size, -1);
    json_object_set_new(meta, "format", json_string("pt")); // what torch's save_file writes
    CHECK_EQ_INT(tk_ckpt_meta_parse(meta, "c.safetensors", &m, &e), 0);
    CHECK_STR(m.format, "pt");
    json_decref(meta);
}

// Sets key to value in the good metadata: the parse must fail with TK_EDATA naming the file and key.
static int refused(const char *key, const char *value) {
    json_t *meta = good();
    json_object_set_new(meta, key, json_string(value));
    tk_ckpt_meta m;
    tk_err e;
    tk_err_clear(&e);
    int rc = tk_ckpt_meta_parse(meta, "bad.safetensors", &m, &e);
    char want[64];
    snprintf(want, sizeof want, "'%s'", key);
    int ok = rc == TK_EDATA && strcmp(e.where, "bad.safetensors") == 0 && strstr(e.what, want) != NULL;
    if (!ok) printf("#   %s=\"%s\": rc %d, where '%s', what '%s'\n", key, value, rc, e.where, e.what);
    json_decref(meta);
    return ok;
}

TK_TEST(malformed_counts_are_refused) {
    static const char *const keys[] = {"step", "samples_seen", "epoch", "world_size"};
    // atoll would have read these as 5, 0, -1, 5, 5, 0 and a wrapped number
    static const char *const bad[] = {"5x", "abc", "-1", "+5", " 5", "", "9223372036854775808", "0x10", "5 "};
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(refused(keys[k], bad[i]));
}

TK_TEST(malformed_hash_and_rng_are_refused) {
    CHECK(refused("config_hash", "0123456789abcde"));    // 15 digits
    CHECK(refused("config_hash", "0123456789abcdef0"));  // 17
    CHECK(refused("config_hash", "0123456789ABCDEF"));   // not what the writer writes
    CHECK(refused("config_hash", "0123456789abcdeg"));
    CHECK(refused("rng", "philox4x32-10:"));
    CHECK(refused("rng", "philox4x32-10:12a"));
    CHECK(refused("rng", "philox4x32-10:-1"));
    CHECK(refused("rng", "philox4x32-10:18446744073709551616")); // 2^64
    CHECK(refused("rng", "mt19937:5"));
    CHECK(refused("rng", "philox"));
}

TK_TEST(the_message_names_the_value) {
    json_t *meta = good();
    json_object_set_new(meta, "step", json_string("12abc"));
    tk_ckpt_meta m;
    tk_err e;
    CHECK_EQ_INT(tk_ckpt_meta_parse(meta, "d.safetensors", &m, &e), TK_EDATA);
    CHECK_STR(e.what, "checkpoint metadata 'step': expected a decimal count, got '12abc'");
    json_decref(meta);
}
