// RNN-T's input pipeline (MLPerf Training rnn_speech_recognition/pytorch; issue 31 items 3 and 5):
// prep librispeech's .tks records (lib/librispeech: id u8 ragged, pcm i16 ragged, sample_rate i32,
// transcript u8 ragged, tokens i32 ragged) into training and evaluation batches, and the batch's
// features on the device (kernels/melfeat.h's ops through their dispatcher).
//
// Which reference behaviour is followed:
//  - the training set (common/data/dali/data_loader.py _parse_json): utterances with
//    original_duration <= max_duration (16.7 s, configs/baseline_v3-1023sp.yaml) are kept, in
//    the records' order; duration = samples / 16000 here (the manifest's original_duration is
//    sox's num_samples / sample_rate of the same audio). The evaluation set keeps every
//    utterance (input_val has no max_duration), in the records' order.
//  - the order (train.py --num_buckets, common/data/dali/sampler.py BucketingSampler): lib/speech/
//    sampler.h over the kept utterances' durations, keyed by (seed, epoch); global batch i of an
//    epoch is its entries [i gbs, (i + 1) gbs), rank r of world takes b = gbs / world of them from
//    i gbs + r b (the reference's DALI FileReader shards the sampler's list file per rank; the
//    split of one global batch is ours, so every rank's step holds one bucket's lengths).
//  - audio: the i16 samples as DALI's AudioDecoder(dtype FLOAT) gives them, s / 32768.
//  - per-utterance speed factor r (train only): uniform in [speed_min, speed_max), drawn from
//    (seed, epoch, utterance) (kernels/melfeat.h tk_speed_rate): the reference's
//    ops.Uniform(range=[0.85, 1.15]) feeding AudioDecoder(sample_rate = r 16000).
//  - transcripts: the records' token ids (common/data/text.py Tokenizer.tokenize at prep time),
//    padded with 0 to the batch's token width (DaliRnntIterator._gen_transcripts: pad_sequence,
//    padding value 0) with their lengths.
//  - features (common/data/dali/pipeline.py define_graph, then train.py's train_feat_proc /
//    val_feat_proc): train = speed perturbation, dither, pre-emphasis, STFT, mel, log,
//    per-feature normalization (DaliPipeline), then SpecAugment, frame splicing 3 x 3 and
//    FillPadding (features.py); eval = the same without speed perturbation and SpecAugment. The
//    reference's validation pipeline does dither (DaliPipeline adds the noise whenever
//    dither_coeff != 0, train or not, and input_val's filterbank_features has dither 1e-5):
//    eval_dither (default on) follows it, drawn from (seed, epoch 0, utterance) so an evaluation is
//    repeatable. Not done: trim_silence (DALI NonsilentRegion at -60 dB after decoding), which
//    belongs to the data preparation (kernels/melfeat.h) and prep librispeech does not do yet.
//
// The batch (host fields, as the reader writes them; B utterances, Lmax = rnnt_batch_dims's
// samples an utterance, K its tokens):
//   pcm     f32 (B Lmax): the utterances' audio packed back to back (utterance b from
//           sum_{c<b} len[c]), zeros after the last: the melfeat ops read packed audio with
//           offsets, so no re-packing on the device (the reference's padded (B, L) tensor holds
//           the same samples)
//   len     i32 (B): samples of each utterance (before speed perturbation)
//   utt     i32 (B): its index in the dataset (after the filter): the random streams' utterance id
//   rate    f32 (B): its speed factor (1 in eval batches and with speed perturbation off), the
//           fp32 value DALI's ops.Uniform would hand over; the features use exactly it
//   tokens  i32 (B, K): token ids, 0 past ntok
//   ntok    i32 (B)
//   epoch   i32 (1): the epoch the batch belongs to (the dither's and SpecAugment's key)
// The bytes of a batch depend only on (seed, epoch, step, rank, world): any thread or reader
// makes the same ones.
//
// Memory: rnnt_dataset_load holds every kept utterance's i16 samples in host memory (the bucketed
// order reaches any utterance from any rank, and the .tks frames, zstd-compressed up to 64 MiB,
// are too large to decompress per utterance): dev-clean is 0.6 GB, train-960 about 110 GB a
// process. Share one dataset among a process's readers (as ssd's workload does); several ranks on
// one host would want a shared cache (an uncompressed PCM file mapped by every rank) instead.
#ifndef TK_WORKLOADS_RNNT_DATA_H
#define TK_WORKLOADS_RNNT_DATA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "gpu/gpu.h"
#include "melfeat.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RNNT_SAMPLE_RATE 16000
#define RNNT_PCM_SCALE 32768.0f   // i16 to [-1, 1)

// The "data" section (man/man5/trainkit-config.5, rnnt); seed and batch are the run's (the
// caller sets them, the parser leaves them).
typedef struct rnnt_data_cfg {
    uint64_t seed;
    int64_t batch;               // the global batch (training readers)
    double max_duration;         // seconds, 16.7: training utterances kept at or below it
    int buckets;                 // 6: the sampler's buckets (1: a plain shuffle of the kept set)
    int speed;                   // speed perturbation on (1)
    double speed_min, speed_max; // 0.85, 1.15
    double dither;               // 1e-5 (0: none)
    int eval_dither;             // evaluation features dithered as the reference's (1)
    int specaug;                 // SpecAugment on (1)
    int freq_masks, max_freq;    // 2, 20
    int time_masks;              // 10
    double max_time;             // 0.03 (a fraction of the frames; >= 1: frames)
    int features;                // TK_MELWIN_DALI (default): DALI's Hann window and Normalize (ddof 0, eps
                                 // 0), the training pipeline's; TK_MELWIN_TORCH: features.py
                                 // FilterbankFeatures' (symmetric Hann, ddof 1, eps 1e-5)
    int n_mels;                  // 80
    int stack, sub;              // 3, 3: frame stacking and subsampling (240 features)
    int max_tokens;              // K, 0: the data's longest transcript
} rnnt_data_cfg;

void rnnt_data_cfg_default(rnnt_data_cfg *c);
// Parses the config's "data" object (NULL: all defaults) into c (defaults first; seed and batch
// kept). Unknown keys and values out of range are TK_EDATA "FILE: $.data.KEY: ...".
int rnnt_data_cfg_parse(json_t *data, const char *path, rnnt_data_cfg *c, tk_err *e);
// The melfeat ops' parameters of c (train 1 or eval 0) for an epoch.
void rnnt_melfeat_cfg(const rnnt_data_cfg *c, int train, uint32_t epoch, tk_melfeat_cfg *m);
void rnnt_specaug_cfg(const rnnt_data_cfg *c, uint32_t epoch, tk_specaug_cfg *s);

// ---- the records ----
typedef struct rnnt_dataset rnnt_dataset;
typedef struct {
    const char *id;              // "speaker-chapter-utterance", id_len bytes (not terminated)
    size_t id_len;
    const int16_t *pcm;
    int64_t n;                   // samples
    const int32_t *tokens;
    int ntok;
    const char *text;            // the transcript, text_len bytes (not terminated)
    size_t text_len;
} rnnt_record;

// Reads the records of paths (files or folders, engine/data.h) into memory, keeping those of at
// most max_duration seconds (<= 0 or infinite: all). Every record checked: the fields' names and
// types (TK_EDATA naming the file, hint prep librispeech), sample_rate 16000, at least one sample
// and one token, tokens >= 0 (TK_EDATA naming the file and record). No utterance kept is TK_EDATA.
int rnnt_dataset_load(char *const *paths, int npaths, double max_duration, rnnt_dataset **d, tk_err *e);
void rnnt_dataset_free(rnnt_dataset *d);
int64_t rnnt_dataset_count(const rnnt_dataset *d);
int64_t rnnt_dataset_dropped(const rnnt_dataset *d);     // over max_duration
int64_t rnnt_dataset_max_samples(const rnnt_dataset *d); // the longest kept utterance
int rnnt_dataset_max_tokens(const rnnt_dataset *d);
const double *rnnt_dataset_durations(const rnnt_dataset *d); // seconds, count entries
void rnnt_dataset_record(const rnnt_dataset *d, int64_t i, rnnt_record *r);

// ---- the batch ----
enum { RNNT_F_PCM, RNNT_F_LEN, RNNT_F_UTT, RNNT_F_RATE, RNNT_F_TOKENS, RNNT_F_NTOK, RNNT_F_EPOCH, RNNT_NFIELDS };
typedef struct {
    float *pcm;
    int32_t *len, *utt;
    float *rate;
    int32_t *tokens, *ntok, *epoch;
} rnnt_batch;
// A field's name ("batch.pcm", ...), dtype and element count for B utterances of at most Lmax
// samples and K tokens.
typedef struct {
    const char *name;
    tk_dtype dtype;
    int64_t count;
} rnnt_field;
void rnnt_batch_fields(int B, int64_t Lmax, int K, rnnt_field f[RNNT_NFIELDS]);
// The batch over field pointers in RNNT_F_* order (the engine's void *const *fields).
rnnt_batch rnnt_batch_from_fields(void *const *fields);
// Lmax and K of a dataset under c: its longest utterance and transcript (K: c->max_tokens when set).
void rnnt_batch_dims(const rnnt_data_cfg *c, const rnnt_dataset *d, int64_t *Lmax, int *K);

// Records rec[0 .. n) into out (utterance k of the batch from rec[k]); train: rates drawn for
// (seed, epoch, record), else 1. Lmax, K: the batch's (rnnt_batch_dims); a longer record is
// TK_EDATA naming it. out's unused pcm and token entries are zeroed.
int rnnt_fill_batch(const rnnt_dataset *d, const rnnt_data_cfg *c, int train, uint32_t epoch, const int64_t *rec,
                    int n, int64_t Lmax, int K, const rnnt_batch *out, tk_err *e);

// ---- training reader ----
typedef struct rnnt_reader rnnt_reader;
// Global batch c->batch over world ranks (must divide it), at least one global batch of records.
int rnnt_reader_open(const rnnt_data_cfg *c, const rnnt_dataset *d, int rank, int world, rnnt_reader **r,
                     tk_err *e);
void rnnt_reader_close(rnnt_reader *r);
int rnnt_reader_per_rank(const rnnt_reader *r);
// Steps an epoch: floor(count / batch) (the sampler keeps that many global batches).
int64_t rnnt_reader_steps_per_epoch(const rnnt_reader *r);
// Batch `step` (0-based over the run; spe steps an epoch) into out.
int rnnt_reader_batch(rnnt_reader *r, int64_t step, int64_t spe, const rnnt_batch *out, tk_err *e);
// The epoch's order of dataset indices (count entries, *used of them in batches), for tests.
int rnnt_epoch_order(const rnnt_data_cfg *c, const rnnt_dataset *d, uint32_t epoch, int64_t *order, int64_t *used,
                     tk_err *e);

// ---- evaluation ----
// Records [first, first + n) in order (no speed perturbation; epoch 0).
int rnnt_eval_batch(const rnnt_dataset *d, const rnnt_data_cfg *c, int64_t first, int n, int64_t Lmax, int K,
                    const rnnt_batch *out, tk_err *e);

// ---- features on the device ----
// The buffers of the feature computation for batches of at most B utterances of at most Lmax
// samples, in the backend's memory (allocated here, at start-up).
typedef struct rnnt_feat rnnt_feat;
int rnnt_feat_create(tk_ctx *ctx, const rnnt_data_cfg *c, int B, int64_t Lmax, rnnt_feat **f, tk_err *e);
void rnnt_feat_destroy(rnnt_feat *f);
// Output frames at most (the y buffer's T for rnnt_features): ceil(frames(Lmax r_max) / sub).
int64_t rnnt_feat_max_out(const rnnt_feat *f);
// The features of a batch: hb is the batch on the host (len, utt, rate, epoch read), pcm its
// audio in the backend's memory (hb's pcm layout); y (B, *T, stack n_mels) f32 in the backend's
// memory, written for T = ceil(Fmax / sub) frames (Fmax the batch's largest frame count), frames
// past an utterance's own zero; ylen (B) host: ceil(F_b / sub); ylen_dev (may be NULL) the same
// i32 in the backend's memory. train: speed perturbation (hb->rate), dither, SpecAugment; eval:
// dither when eval_dither. It builds the batch's plan (below) on the host and copies it to the
// device (synchronous; the evaluation's features), then runs rnnt_features_plan at the batch's
// own extents. SpecAugment's time masks start anywhere in the call's Fmax frames, as the
// reference's in its per-GPU DALI batch's padded length: call it on a rank's share (the masks
// then depend on which utterances share the call; the dither and the speed factors do not).
int rnnt_features(rnnt_feat *f, int train, int B, const rnnt_batch *hb, const float *pcm, float *y, int32_t *ylen,
                  int32_t *ylen_dev, int64_t *T, tk_err *e);

// ---- the features' plan (the training step in a CUDA graph) ----
// What the features compute on the host from a batch, in one buffer of rnnt_feat_plan_bytes(B)
// bytes (a loader thread builds it beside the batch; the engine copies it to the device with the
// batch's fields), so that rnnt_features_plan reads only the backend's memory and its launches
// depend only on the extents it is given: the captured step of workload.c.
typedef struct rnnt_feat_plan {
    int64_t *in_off, *out_off;   // (B + 1) the audio's sample offsets, before and after resampling
    double *rate;                // (B) speed factors (1 without speed perturbation)
    int32_t *F;                  // (B) STFT frames
    uint32_t *utt;               // (B) the utterances' ids (the random streams')
    int32_t *ylen;               // (B) output frames, ceil(F_b / sub)
    int32_t *Fmax;               // (1) the largest F: the time masks' extent (the reference's Tmax)
    uint32_t *epoch;             // (1) the dither's and the masks' epoch
    int32_t *T;                  // (1) the batch's output frames, ceil(Fmax / sub)
} rnnt_feat_plan;
size_t rnnt_feat_plan_bytes(int B);
// The arrays in a plan buffer of B utterances (host or the backend's memory; 8-byte aligned).
rnnt_feat_plan rnnt_feat_plan_at(void *base, int B);
// Fills the plan (host memory) of hb's B utterances of at most Lmax samples each (the rnnt_feat's
// Lmax); TK_EINTERNAL for a length outside it.
int rnnt_feat_plan_fill(const rnnt_data_cfg *c, int train, int B, const rnnt_batch *hb, int64_t Lmax, void *plan,
                        tk_err *e);
// STFT frames a feature batch of utterances of at most Lmax samples has at most (after the
// fastest speed factor): rnnt_feat_create's bound.
int64_t rnnt_feat_frames_cap(const rnnt_data_cfg *c, int64_t Lmax);
// The features of a planned batch: plan in the backend's memory, pcm the audio; x padded to Fp
// STFT frames (the plan's Fmax <= Fp <= rnnt_feat_frames_cap), y (B, Tout, stack n_mels) with
// Tout >= ceil(Fp / sub). The values are those of rnnt_features at the batch's own extents (the
// time masks over the plan's Fmax, not Fp; frames past an utterance's own zero). Capturable.
int rnnt_features_plan(rnnt_feat *f, int train, int B, const void *plan, const float *pcm, int Fp, int Tout, float *y,
                       tk_err *e);

#ifdef __cplusplus
}
#endif
#endif
