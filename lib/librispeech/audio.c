// LibriSpeech audio (librispeech.h): FLAC through libFLAC (the reference converts with sox, which
// decodes with libFLAC too), and the 16-bit PCM WAV files of the reference's converted tree.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/afile.h"
#include "librispeech/librispeech.h"

void ls_audio_free(ls_audio *a) {
    free(a->pcm);
    a->pcm = NULL;
    a->n = 0;
}

static int check_format(const char *name, unsigned rate, unsigned channels, unsigned bits, tk_err *e) {
    if (rate == LS_SAMPLE_RATE && channels == 1 && bits == 16) return 0;
    tk_err_set(e, TK_EDATA, "%u Hz, %u channel%s, %u bits: LibriSpeech audio is 16000 Hz mono 16-bit", rate, channels,
               channels == 1 ? "" : "s", bits);
    return tk_err_where(e, "%s", name);
}

#ifndef TK_HAVE_FLAC

int ls_flac_available(void) { return 0; }
int ls_flac_read(const char *path, ls_audio *a, tk_err *e) {
    memset(a, 0, sizeof *a);
    (void)check_format;
    return tk_err_set(e, TK_EUSAGE, "%s: this trainkit was built without libFLAC (install the Debian package "
                      "libflac-dev, rebuild; contrib/setup-deps.sh installs it)", path);
}

#else

#include <FLAC/stream_decoder.h>

int ls_flac_available(void) { return 1; }

typedef struct {
    ls_audio *a;
    size_t cap;
    uint64_t total;                   // STREAMINFO's sample count (0: unknown)
    unsigned rate, channels, bits;
    int bad_format, oom, error;
    FLAC__StreamDecoderErrorStatus status;
} flac_ctx;

static FLAC__StreamDecoderWriteStatus on_write(const FLAC__StreamDecoder *d, const FLAC__Frame *fr,
                                               const FLAC__int32 *const buf[], void *cd) {
    (void)d;
    flac_ctx *c = cd;
    if (fr->header.channels != 1 || fr->header.bits_per_sample != 16 || fr->header.sample_rate != LS_SAMPLE_RATE) {
        c->rate = fr->header.sample_rate;
        c->channels = fr->header.channels;
        c->bits = fr->header.bits_per_sample;
        c->bad_format = 1;
        return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT;
    }
    ls_audio *a = c->a;
    size_t need = a->n + fr->header.blocksize;
    if (need > c->cap) {
        size_t cap = c->cap ? c->cap : 65536;
        while (cap < need) cap *= 2;
        int16_t *p = realloc(a->pcm, cap * sizeof *p);
        if (!p) {
            c->oom = 1;
            return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT;
        }
        a->pcm = p;
        c->cap = cap;
    }
    for (unsigned i = 0; i < fr->header.blocksize; i++) a->pcm[a->n++] = (int16_t)buf[0][i];
    return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE;
}

static void on_meta(const FLAC__StreamDecoder *d, const FLAC__StreamMetadata *m, void *cd) {
    (void)d;
    flac_ctx *c = cd;
    if (m->type != FLAC__METADATA_TYPE_STREAMINFO) return;
    c->total = m->data.stream_info.total_samples;
    c->rate = m->data.stream_info.sample_rate;
    c->channels = m->data.stream_info.channels;
    c->bits = m->data.stream_info.bits_per_sample;
    if (c->rate != LS_SAMPLE_RATE || c->channels != 1 || c->bits != 16) c->bad_format = 1;
}

static void on_error(const FLAC__StreamDecoder *d, FLAC__StreamDecoderErrorStatus s, void *cd) {
    (void)d;
    flac_ctx *c = cd;
    if (!c->error) c->status = s;
    c->error = 1;
}

int ls_flac_read(const char *path, ls_audio *a, tk_err *e) {
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) return tk_err_errno(e, errno, "%s: cannot open", path);
    FLAC__StreamDecoder *d = FLAC__stream_decoder_new();
    if (!d) {
        fclose(f);
        return tk_err_errno(e, ENOMEM, "%s: libFLAC decoder", path);
    }
    FLAC__stream_decoder_set_md5_checking(d, true);
    flac_ctx c = {.a = a};
    int rc = 0;
    // libFLAC closes f when the decoder finishes (FLAC__stream_decoder_init_FILE owns it)
    FLAC__StreamDecoderInitStatus is = FLAC__stream_decoder_init_FILE(d, f, on_write, on_meta, on_error, &c);
    if (is != FLAC__STREAM_DECODER_INIT_STATUS_OK) {
        fclose(f);
        FLAC__stream_decoder_delete(d);
        return tk_err_set(e, TK_EIO, "%s: libFLAC cannot start decoding (%s)", path, FLAC__StreamDecoderInitStatusString[is]);
    }
    int ok = FLAC__stream_decoder_process_until_end_of_stream(d);
    FLAC__StreamDecoderState st = FLAC__stream_decoder_get_state(d);
    int md5_ok = FLAC__stream_decoder_finish(d); // false: the decoded samples do not match the MD5
    FLAC__stream_decoder_delete(d);
    if (c.bad_format) rc = check_format(path, c.rate, c.channels, c.bits, e);
    else if (c.oom) rc = tk_err_errno(e, ENOMEM, "%s", path);
    else if (c.error && c.status == FLAC__STREAM_DECODER_ERROR_STATUS_FRAME_CRC_MISMATCH) // (libFLAC drops the frame)
        rc = tk_err_set(e, TK_EDATA, "%s: damaged FLAC: a frame's CRC does not match its bytes (libFLAC: %s)", path,
                        FLAC__StreamDecoderErrorStatusString[c.status]);
    else if (c.total && a->n < c.total) // a cut file ends in a partial frame: libFLAC loses sync there
        rc = tk_err_set(e, TK_EDATA, "%s: truncated FLAC: %zu of the %llu samples its header announces%s%s%s", path,
                        a->n, (unsigned long long)c.total, c.error ? " (libFLAC: " : "",
                        c.error ? FLAC__StreamDecoderErrorStatusString[c.status] : "", c.error ? ")" : "");
    else if (c.error || !ok || st == FLAC__STREAM_DECODER_ABORTED)
        rc = tk_err_set(e, TK_EDATA, "%s: not a valid FLAC stream (libFLAC: %s)", path,
                        c.error ? FLAC__StreamDecoderErrorStatusString[c.status] : FLAC__StreamDecoderStateString[st]);
    else if (!c.rate)
        rc = tk_err_set(e, TK_EDATA, "%s: not a FLAC file (no STREAMINFO)", path);
    else if (c.total && a->n != c.total)
        rc = tk_err_set(e, TK_EDATA, "%s: %zu samples, %llu more than its header announces", path, a->n,
                        (unsigned long long)(a->n - c.total));
    else if (!md5_ok)
        rc = tk_err_set(e, TK_EDATA, "%s: the decoded samples do not match the file's MD5 signature", path);
    if (rc) ls_audio_free(a);
    return rc;
}

#endif

static uint32_t le32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

int ls_wav_parse(const uint8_t *p, size_t n, const char *name, ls_audio *a, tk_err *e) {
    memset(a, 0, sizeof *a);
    if (n < 12 || memcmp(p, "RIFF", 4) || memcmp(p + 8, "WAVE", 4))
        return tk_err_set(e, TK_EDATA, "%s: not a RIFF/WAVE file", name);
    size_t off = 12;
    int have_fmt = 0;
    while (off + 8 <= n) {
        uint32_t len = le32(p + off + 4);
        const uint8_t *body = p + off + 8;
        size_t avail = n - off - 8;
        if (!memcmp(p + off, "fmt ", 4)) {
            if (len < 16 || avail < 16)
                return tk_err_set(e, TK_EDATA, "%s: offset %zu: a \"fmt \" chunk of %u bytes", name, off, len);
            unsigned tag = le16(body), ch = le16(body + 2), bits = le16(body + 14);
            uint32_t rate = le32(body + 4);
            if (tag == 0xFFFE && len >= 40 && avail >= 40) tag = le16(body + 24); // WAVE_FORMAT_EXTENSIBLE
            if (tag != 1) return tk_err_set(e, TK_EDATA, "%s: offset %zu: format tag %u, not PCM", name, off, tag);
            TRY(check_format(name, rate, ch, bits, e));
            have_fmt = 1;
        } else if (!memcmp(p + off, "data", 4)) {
            if (!have_fmt) return tk_err_set(e, TK_EDATA, "%s: offset %zu: \"data\" before \"fmt \"", name, off);
            if (len > avail || len % 2)
                return tk_err_set(e, TK_EDATA, "%s: offset %zu: truncated: the data chunk says %u bytes, %zu follow", name,
                                  off, len, avail);
            a->n = len / 2;
            a->pcm = malloc(a->n ? a->n * 2 : 1);
            if (!a->pcm) return tk_err_errno(e, ENOMEM, "%s", name);
            for (size_t i = 0; i < a->n; i++) a->pcm[i] = (int16_t)le16(body + 2 * i);
            return 0;
        }
        if (len > avail) break;
        off += 8 + (size_t)len + (len & 1);
    }
    return tk_err_set(e, TK_EDATA, "%s: no \"%s\" chunk", name, have_fmt ? "data" : "fmt ");
}

int ls_wav_read(const char *path, ls_audio *a, tk_err *e) {
    memset(a, 0, sizeof *a);
    char *buf;
    size_t n;
    TRY(ls_read_file(path, &buf, &n, e));
    int rc = ls_wav_parse((const uint8_t *)buf, n, path, a, e);
    free(buf);
    return rc;
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int ls_wav_write(const char *path, const int16_t *pcm, size_t n, tk_err *e) {
    if (n > (0xFFFFFFFFu - 36) / 2) return tk_err_set(e, TK_EDATA, "%s: too long for a WAV file", path);
    uint8_t h[44];
    memcpy(h, "RIFF", 4);
    put32(h + 4, (uint32_t)(36 + 2 * n));
    memcpy(h + 8, "WAVEfmt ", 8);
    put32(h + 16, 16);
    put32(h + 20, 1 | 1u << 16);                         // PCM, 1 channel
    put32(h + 24, LS_SAMPLE_RATE);
    put32(h + 28, LS_SAMPLE_RATE * 2);
    put32(h + 32, 2 | 16u << 16);                        // block align 2, 16 bits
    memcpy(h + 36, "data", 4);
    put32(h + 40, (uint32_t)(2 * n));
    tk_afile af;
    TRY(tk_afile_open(&af, path, e));
    int rc = tk_write_all(af.fp, h, sizeof h, path, e);
    uint8_t blk[8192];
    for (size_t i = 0; i < n && !rc;) {
        size_t k = 0;
        for (; k < sizeof blk / 2 && i < n; k++, i++) {
            blk[2 * k] = (uint8_t)pcm[i];
            blk[2 * k + 1] = (uint8_t)((uint16_t)pcm[i] >> 8);
        }
        rc = tk_write_all(af.fp, blk, 2 * k, path, e);
    }
    if (!rc) rc = tk_afile_commit(&af, e);
    else tk_afile_abort(&af);
    return rc;
}
