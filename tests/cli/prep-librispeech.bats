#!/usr/bin/env bats
# prep librispeech and prep synth librispeech (cmd/prep/librispeech.c, synth_librispeech.c,
# lib/librispeech): a small tree made by `prep synth librispeech`, and independently one written
# by Python (soundfile's FLAC encoder, random PCM); the records against soundfile's decoding
# sample for sample and Python sentencepiece's ids on the same model; the 16.7 s training filter;
# the reference manifests' fields; the manifests + WAVs read back; each kind of bad input: exit 3,
# the file and line named, nothing written. Skips when the optional tools are missing
# (contrib/setup-deps.sh installs them: espeak-ng, sox, sentencepiece, libflac-dev; Python
# sentencepiece and soundfile).

bats_require_minimum_version 1.5.0

DUMP="$TK_ROOT/contrib/synth/tks_dump.py"

have_flac() { prep librispeech --help >/dev/null && ! prep librispeech -o /dev/null/x /nonexistent 2>&1 | grep -q 'built without libFLAC'; }

need_tools() {
    command -v spm_train >/dev/null && command -v spm_encode >/dev/null ||
        skip "sentencepiece's spm_train/spm_encode are not installed (Debian sentencepiece; contrib/setup-deps.sh)"
    have_flac || skip "prep was built without libFLAC (Debian libflac-dev; contrib/setup-deps.sh, then rebuild)"
    python3 -c 'import sentencepiece, soundfile, numpy' 2>/dev/null ||
        skip "python3 sentencepiece/soundfile/numpy are not installed (contrib/setup-deps.sh)"
}

need_synth() {
    need_tools
    command -v espeak-ng >/dev/null && command -v sox >/dev/null ||
        skip "espeak-ng or sox is not installed (contrib/setup-deps.sh)"
}

# A LibriSpeech-like tree written by Python: subset $1, utterances "ID SECONDS TRANSCRIPT" on stdin
# (ID speaker-chapter-nnnn), random 16-bit PCM at 16 kHz mono unless RATE/CHANNELS say otherwise.
make_tree() {
    python3 -c '
import os, sys, numpy as np, soundfile as sf
root = sys.argv[1]
rate, ch = int(os.environ.get("RATE", 16000)), int(os.environ.get("CHANNELS", 1))
rng = np.random.default_rng(int(os.environ.get("SEED", 5)))
trans = {}
for line in sys.stdin:
    uid, sec, text = line.rstrip("\n").split(" ", 2)
    spk, chap, _ = uid.split("-")
    d = os.path.join(root, spk, chap)
    os.makedirs(d, exist_ok=True)
    n = int(round(float(sec) * rate))
    x = rng.integers(-12000, 12000, size=(n, ch) if ch > 1 else n, dtype=np.int16)
    sf.write(os.path.join(d, uid + ".flac"), x, rate, subtype="PCM_16")
    trans.setdefault(d, []).append(uid + " " + text)
for d, lines in trans.items():
    spk, chap = d.split("/")[-2:]
    open(os.path.join(d, spk + "-" + chap + ".trans.txt"), "w").write("\n".join(lines) + "\n")
' "$1"
}

# every record of $1 against soundfile's decoding of the FLAC under $2 (or the WAV of the
# manifest input) and Python sentencepiece on model $3
check_records() {
    python3 "$DUMP" "$1" >dump.jsonl
    python3 -c '
import json, os, sys, numpy as np, soundfile as sf, sentencepiece as spm
dump, root, model = sys.argv[1:4]
sp = spm.SentencePieceProcessor(model_file=model)
n = 0
for line in open(dump):
    r = json.loads(line)
    uid, text = bytes(r["id"]).decode(), bytes(r["transcript"]).decode()
    spk, chap, _ = uid.split("-")
    path = os.path.join(root, spk, chap, uid + ".flac")
    if not os.path.exists(path):
        path = path[:-5] + ".wav"
    x, rate = sf.read(path, dtype="int16")
    assert rate == 16000 and r["sample_rate"] == 16000, uid
    assert np.array_equal(np.asarray(r["pcm"], dtype=np.int16), x), uid + ": pcm differs from soundfile"
    assert r["tokens"] == sp.encode(text), uid + ": tokens differ from sentencepiece"
    tr = [l.split(" ", 1) for l in open(os.path.join(root, spk, chap, spk + "-" + chap + ".trans.txt"))
          ] if path.endswith(".flac") else None
    if tr:
        assert text == dict(tr)[uid].lower().strip(), uid
    n += 1
print(n)
' dump.jsonl "$2" "$3"
}

setup_file() {
    cd "$BATS_FILE_TMPDIR"
    command -v espeak-ng >/dev/null && command -v sox >/dev/null && command -v spm_train >/dev/null || return 0
    prep synth librispeech -o syn --speakers 2 --dev-speakers 1 --chapters 1 --utterances 3 --seed 3 >synth.out || return 0
    prep librispeech -o out --vocab-size 60 --wav syn/LibriSpeech/train-clean-100 syn/LibriSpeech/dev-clean/ >prep.out || true
}

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    F="$BATS_FILE_TMPDIR"
}

nothing_written() { [ -z "$(ls -A "$TMP/out" 2>/dev/null)" ] || { ls -la "$TMP/out"; return 1; }; }

@test "prep synth librispeech: LibriSpeech's layout, 16 kHz mono FLAC, normalized transcripts, a manifest" {
    need_synth
    run cat "$F/synth.out"
    [[ "$output" == '{"type":"synth","dataset":"librispeech","dir":"syn","train_utterances":6,"dev_utterances":3,"hours":'* ]]
    cd "$F/syn/LibriSpeech"
    [ "$(ls)" = "$(printf 'dev-clean\ntrain-clean-100')" ]
    [ "$(find train-clean-100 -name '*.flac' | wc -l)" -eq 6 ]
    [ "$(find dev-clean -name '*.flac' | wc -l)" -eq 3 ]
    [ "$(find . -name '*.trans.txt' | wc -l)" -eq 3 ]
    for t in $(find . -name '*.trans.txt'); do
        d=$(dirname "$t")
        [ "$(basename "$t")" = "$(basename "$(dirname "$d")")-$(basename "$d").trans.txt" ]
        # upper case, apostrophes, no other punctuation; ids SPEAKER-CHAPTER-NNNN with their files
        ! grep -vE '^[0-9]+-[0-9]+-[0-9]{4} [A-Z]+([A-Z'"'"' ]*[A-Z])?$' "$t"
        while read -r id _; do [ -f "$d/$id.flac" ]; done <"$t"
    done
    python3 -c 'import soundfile' 2>/dev/null || return 0
    python3 -c '
import glob, soundfile as sf
for f in glob.glob("**/*.flac", recursive=True):
    i = sf.info(f)
    assert (i.samplerate, i.channels, i.format, i.subtype) == (16000, 1, "FLAC", "PCM_16"), (f, i)
    assert 1.0 < i.duration < 16.7, (f, i.duration)
'
    # dev-clean: held-out voices and sentences
    cd "$F/syn"
    [ "$(jq -r '.speakers["dev-clean"][].voice' manifest.json | sort -u | grep -cxFf <(jq -r '.speakers["train-clean-100"][].voice' manifest.json))" -eq 0 ]
    [ -z "$(comm -12 <(cut -d' ' -f2- LibriSpeech/train-clean-100/*/*/*.trans.txt | sort -u) <(cut -d' ' -f2- LibriSpeech/dev-clean/*/*/*.trans.txt | sort -u))" ]
    [ "$(jq -c '[.generator, .seed, .utterances["train-clean-100"], .utterances["dev-clean"], .wer_target]' manifest.json)" = \
      '["trainkit prep synth librispeech",3,6,3,null]' ]
    [[ "$(jq -r .wer_target_note manifest.json)" == "calibrated by the rnnt workload's run (issue 31)"* ]]
}

@test "prep synth librispeech: the same seed writes the same transcripts; another seed others" {
    need_synth
    prep synth librispeech -o a --speakers 2 --dev-speakers 1 --chapters 1 --utterances 3 --seed 3 >/dev/null
    prep synth librispeech -o b --speakers 2 --dev-speakers 1 --chapters 1 --utterances 3 --seed 4 >/dev/null
    [ "$(cat a/LibriSpeech/*/*/*/*.trans.txt)" = "$(cd "$F/syn" && cat LibriSpeech/*/*/*/*.trans.txt)" ]
    [ "$(cat a/LibriSpeech/*/*/*/*.trans.txt)" != "$(cat b/LibriSpeech/*/*/*/*.trans.txt)" ]
    # an existing tree is never overwritten
    run prep synth librispeech -o a --speakers 1 --dev-speakers 1 --chapters 1 --utterances 1
    [ "$status" -eq 2 ]
    [[ "$output" == *"a/LibriSpeech already exists"* ]]
}

@test "prep librispeech: synthetic tree: records equal soundfile's and the flac tool's PCM and Python sentencepiece's ids" {
    need_synth
    run cat "$F/prep.out"
    [ "${#lines[@]}" -eq 3 ]
    [[ "${lines[0]}" == '{"type":"subset","subset":"train-clean-100","split":"train","output":"out/train-clean-100.tks","utterances":6,"records":6,"dropped_over_16.7s":0,"hours":'* ]]
    [[ "${lines[1]}" == '{"type":"subset","subset":"dev-clean","split":"eval","output":"out/dev-clean.tks","utterances":3,"records":3,"dropped_over_16.7s":0,"hours":'* ]]
    [[ "${lines[2]}" == '{"type":"prep","dataset":"librispeech","subsets":2,"utterances":9,"records":9,"dropped_over_16.7s":0,"spm_model":"out/librispeech60.model","spm_trained":true,"tokens":'* ]]
    cd "$F"
    [ "$(check_records out/train-clean-100.tks syn/LibriSpeech/train-clean-100 out/librispeech60.model)" = 6 ]
    [ "$(check_records out/dev-clean.tks syn/LibriSpeech/dev-clean out/librispeech60.model)" = 3 ]
    # and against the flac tool's own decoding (raw 16-bit little-endian), file by file
    command -v flac >/dev/null || skip "the flac tool is not installed (Debian flac; contrib/setup-deps.sh)"
    python3 "$DUMP" out/train-clean-100.tks >dump.jsonl
    n=0
    while read -r uid; do
        IFS=- read -r spk chap _ <<<"$uid"
        flac -d -s -f --force-raw-format --endian=little --sign=signed -o "$uid.raw" "syn/LibriSpeech/train-clean-100/$spk/$chap/$uid.flac"
        jq -r --arg u "$uid" 'select((.id | implode) == $u) | .pcm[]' dump.jsonl |
            python3 -c 'import sys, numpy as np; a = np.array([int(l) for l in sys.stdin], "<i2"); sys.exit(a.tobytes() != open(sys.argv[1], "rb").read())' "$uid.raw"
        n=$((n + 1))
    done < <(jq -r '.id | implode' dump.jsonl)
    [ "$n" -eq 6 ]
    python3 "$DUMP" out/dev-clean.tks --schema | jq -e '.meta.subset == "dev-clean" and .meta.max_duration == null and .meta.vocab_size == 60'
}

@test "prep librispeech: the model is trained by spm_train with the reference's flags, on the training transcripts" {
    need_synth
    # a stand-in spm_train first on PATH logs its arguments and its input, then runs the real one
    mkdir bin
    printf '#!/bin/sh\necho "$@" >%s/args\nfor a; do case "$a" in --input=*) cp "${a#--input=}" %s/input ;; esac; done\nexec %s "$@"\n' \
        "$TMP" "$TMP" "$(command -v spm_train)" >bin/spm_train
    chmod +x bin/spm_train
    PATH="$TMP/bin:$PATH" prep librispeech -o out --vocab-size 60 "$F/syn/LibriSpeech/train-clean-100" "$F/syn/LibriSpeech/dev-clean" >/dev/null
    [ "$(cat args)" = "--input=txt.txt --model_prefix=librispeech60 --vocab_size=60 --character_coverage=1.0 --bos_id=-1 --eos_id=-1 --model_type=unigram" ]
    # scripts/create_sentencepieces.sh: jq '.[]["transcript"]' over the training manifests
    diff input <(jq -r '.[]["transcript"]' "$F/out/librispeech-train-clean-100-wav.json")
    # the same input trains the same model; nothing is left of the temporaries
    cmp out/librispeech60.model "$F/out/librispeech60.model"
    [ "$(ls -A out | tr '\n' ' ')" = "dev-clean.tks librispeech-dev-clean-wav.json librispeech-train-clean-100-wav.json librispeech60.model librispeech60.vocab train-clean-100.tks " ]
    [ "$(wc -l <out/librispeech60.vocab)" -eq 60 ]
}

@test "prep librispeech: the reference manifests' fields, from soundfile's reading of the FLACs" {
    need_synth
    cd "$F"
    python3 -c '
import json, glob, os, soundfile as sf
for sub in ("train-clean-100", "dev-clean"):
    m = json.load(open("out/librispeech-%s-wav.json" % sub))
    want = []
    for t in sorted(glob.glob("syn/LibriSpeech/%s/*/*/*.trans.txt" % sub)):
        for line in open(t):
            uid, _, text = line.partition(" ")
            spk, ch, _ = uid.split("-")
            x, rate = sf.read(os.path.join(os.path.dirname(t), uid + ".flac"), dtype="int16")
            want.append({"transcript": text.lower().strip(), "files": [{"channels": 1, "sample_rate": 16000.0,
                         "bitdepth": 16, "duration": len(x) / 16000, "num_samples": len(x),
                         "encoding": "Signed Integer PCM", "fname": "%s-wav/%s/%s/%s.wav" % (sub, spk, ch, uid),
                         "speed": 1}], "original_duration": len(x) / 16000, "original_num_samples": len(x)})
    assert m == want, (sub, m, want)
    for e in m:  # the WAVs written with --wav, the reference converted files
        x, rate = sf.read("out/" + e["files"][0]["fname"], dtype="int16")
        assert rate == 16000 and len(x) == e["original_num_samples"]
'
}

@test "prep librispeech --manifests: the reference's manifests and WAVs give the same records" {
    need_synth
    run prep librispeech -o out --manifests --spm "$F/out/librispeech60.model" "$F/out/librispeech-dev-clean-wav.json" "$F/out/librispeech-train-clean-100-wav.json"
    [ "$status" -eq 0 ]
    [[ "${lines[2]}" == *'"utterances":9,"records":9,"dropped_over_16.7s":0,"spm_model":"'"$F"'/out/librispeech60.model","spm_trained":false,'* ]]
    for s in dev-clean train-clean-100; do
        diff <(python3 "$DUMP" out/$s.tks) <(python3 "$DUMP" "$F/out/$s.tks")
    done
    # the manifest's own numbers are checked against the WAV
    jq '.[1].original_num_samples += 1' "$F/out/librispeech-dev-clean-wav.json" >bad-wav.json
    run prep librispeech -o out2 --manifests --root "$F/out" --spm "$F/out/librispeech60.model" bad-wav.json
    [ "$status" -eq 3 ]
    [[ "$output" == "prep: error: bad-wav.json: \$[1].original_num_samples: $F/out/dev-clean-wav/"*".wav holds "*" samples, the manifest says "* ]]
    [ ! -e out2/bad.tks ] && [ -z "$(ls -A out2)" ]
}

# The tree written by Python: two training utterances over 16.7 s (dropped), one of exactly 16.7 s
# (kept: the reference keeps original_duration <= 16.7), the same lengths in dev-clean (all kept).
python_tree() {
    make_tree "$1/train-clean-100" <<'EOF'
19-198-0000 1.5 THE CAT'S HAT
19-198-0001 16.7 A LONG ONE THAT STAYS
19-198-0002 16.75 A LONG ONE THAT GOES
26-495-0000 0.25 HAT
26-495-0003 17 ANOTHER THAT GOES
EOF
    make_tree "$1/dev-clean" <<'EOF'
84-121-0000 2 THE HAT
84-121-0001 17 A LONG CAT
EOF
}

@test "prep librispeech: a tree written by Python: the 16.7 s training filter, --spm from Python" {
    need_tools
    python_tree ls
    printf "the cat's hat\na long one that stays\na long one that goes\nhat\nanother that goes\n" >txt
    python3 -c "import sentencepiece as spm; spm.SentencePieceTrainer.train(input='txt', model_prefix='m', vocab_size=20, character_coverage=1.0, bos_id=-1, eos_id=-1, model_type='unigram', minloglevel=2)"
    run --separate-stderr prep librispeech -o out --spm m.model ls/train-clean-100 ls/dev-clean
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == *'"subset":"train-clean-100","split":"train","output":"out/train-clean-100.tks","utterances":5,"records":3,"dropped_over_16.7s":2,"hours":0.005125}' ]]
    [[ "${lines[1]}" == *'"subset":"dev-clean","split":"eval","output":"out/dev-clean.tks","utterances":2,"records":2,"dropped_over_16.7s":0,'* ]]
    [[ "${lines[2]}" == *'"records":5,"dropped_over_16.7s":2,"spm_model":"m.model","spm_trained":false,'* ]]
    [ "$(ls out | tr '\n' ' ')" = "dev-clean.tks librispeech-dev-clean-wav.json librispeech-train-clean-100-wav.json train-clean-100.tks " ]
    [ "$(check_records out/train-clean-100.tks ls/train-clean-100 m.model)" = 3 ]
    [ "$(check_records out/dev-clean.tks ls/dev-clean m.model)" = 2 ]
    [ "$(python3 "$DUMP" out/train-clean-100.tks | jq -r '.id | implode' | tr '\n' ' ')" = '19-198-0000 19-198-0001 26-495-0000 ' ]
    # the manifests list every utterance (the reference filters when it reads them)
    [ "$(jq length out/librispeech-train-clean-100-wav.json)" -eq 5 ]
    [ "$(jq -c '[.[].original_num_samples]' out/librispeech-train-clean-100-wav.json)" = '[24000,267200,268000,4000,272000]' ]
}

@test "prep librispeech: no training subset and no --spm is a usage error; a missing tool names its package" {
    need_tools
    make_tree ls/dev-clean <<<'84-121-0000 0.5 HAT'
    run prep librispeech -o out ls/dev-clean
    [ "$status" -eq 2 ]
    [[ "$output" == *"no training utterances to train the sentencepiece model on: give a train-* subset or --spm MODEL"* ]]
    make_tree ls/train-clean-100 <<<'19-198-0000 0.5 HAT'
    run env PATH=/nonexistent "$TK_BIN/prep" librispeech -o out ls/train-clean-100
    [ "$status" -eq 2 ]
    [ "$output" = "prep: error: spm_train is not installed (Debian package sentencepiece) (hint: apt-get install sentencepiece, or run contrib/setup-deps.sh)" ]
    nothing_written
    run env PATH=/nonexistent "$TK_BIN/prep" synth librispeech -o syn
    [ "$status" -eq 2 ]
    [[ "$output" == "prep: error: espeak-ng is not installed (Debian package espeak-ng)"* ]]
    [ ! -e syn/LibriSpeech ]
}

# a good tree to break, and a model for it
good() {
    make_tree ls/train-clean-100 <<'EOF'
19-198-0000 0.5 THE CAT'S HAT
19-198-0001 0.5 A HAT
EOF
    printf "the cat's hat\na hat\n" >txt
    python3 -c "import sentencepiece as spm; spm.SentencePieceTrainer.train(input='txt', model_prefix='m', vocab_size=11, character_coverage=1.0, bos_id=-1, eos_id=-1, model_type='unigram', minloglevel=2)"
    D=ls/train-clean-100/19/198
}

bad_run() { # expected exit, message glob
    run prep librispeech -o out --spm m.model ls/train-clean-100
    [ "$status" -eq "$1" ] || { echo "$output"; return 1; }
    [[ "$output" == $2 ]] || { echo "$output"; return 1; }
    nothing_written
}

@test "prep librispeech: the good tree passes (the bad-input cases below break it one way each)" {
    need_tools
    good
    run prep librispeech -o out --spm m.model ls/train-clean-100
    [ "$status" -eq 0 ]
    [ "$(check_records out/train-clean-100.tks ls/train-clean-100 m.model)" = 2 ]
}

@test "prep librispeech: a FLAC that is not 16 kHz mono" {
    need_tools
    good
    RATE=44100 make_tree x <<<'19-198-0001 0.5 A HAT'
    mv x/19/198/19-198-0001.flac $D/
    bad_run 3 "prep: error: $D/19-198-0001.flac: 44100 Hz, 1 channel, 16 bits: LibriSpeech audio is 16000 Hz mono 16-bit"
    CHANNELS=2 make_tree x <<<'19-198-0001 0.5 A HAT'
    mv x/19/198/19-198-0001.flac $D/
    bad_run 3 "prep: error: $D/19-198-0001.flac: 16000 Hz, 2 channels, 16 bits: LibriSpeech audio is 16000 Hz mono 16-bit"
}

@test "prep librispeech: a truncated FLAC, and one that is not FLAC at all" {
    need_tools
    good
    head -c 3000 $D/19-198-0001.flac >t && mv t $D/19-198-0001.flac
    bad_run 3 "prep: error: $D/19-198-0001.flac: truncated FLAC: * of the 8000 samples its header announces*"
    echo 'not flac' >$D/19-198-0001.flac
    bad_run 3 "prep: error: $D/19-198-0001.flac: not a valid FLAC stream (libFLAC: *)"
}

@test "prep librispeech: a FLAC whose frame CRC does not match (one bit flipped in its last frame)" {
    need_tools
    good
    python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[-10] ^= 0x10; open(p, "wb").write(b)' \
        $D/19-198-0001.flac
    bad_run 3 "prep: error: $D/19-198-0001.flac: damaged FLAC: a frame's CRC does not match its bytes (libFLAC: FLAC__STREAM_DECODER_ERROR_STATUS_FRAME_CRC_MISMATCH)"
}

@test "prep librispeech: an empty transcript (in trans.txt and in a reference manifest)" {
    need_tools
    good
    printf "19-198-0000 THE CAT'S HAT\n19-198-0001\n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 2: utterance 19-198-0001 has an empty transcript"
    printf "19-198-0000 THE CAT'S HAT\n19-198-0001   \n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 2: utterance 19-198-0001 has an empty transcript"
    printf '[{"transcript": " ", "files": [{"fname": "x.wav", "speed": 1}], "original_duration": 1, "original_num_samples": 16000}]' >m4.json
    run prep librispeech -o out --manifests --spm m.model m4.json
    [ "$status" -eq 3 ]
    [ "$output" = 'prep: error: m4.json: $[0].transcript: an empty transcript' ]
    nothing_written
}

@test "prep librispeech: an utterance listed without its file, a file not listed, no trans.txt" {
    need_tools
    good
    mv $D/19-198-0001.flac $D/19-198-0009.flac
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 2: utterance 19-198-0001 has no audio file 19-198-0001.flac in the chapter's folder"
    printf "19-198-0000 THE CAT'S HAT\n19-198-0001 A HAT\n19-198-0009 A HAT\n" >$D/19-198.trans.txt
    cp $D/19-198-0009.flac $D/19-198-0001.flac
    printf "19-198-0000 THE CAT'S HAT\n19-198-0001 A HAT\n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198-0009.flac: the audio file is not listed in 19-198.trans.txt"
    rm $D/19-198-0009.flac $D/19-198.trans.txt
    bad_run 3 "prep: error: $D: the chapter has no transcript file 19-198.trans.txt"
}

@test "prep librispeech: transcript lines without an id, with a foreign id, repeated, with characters outside the alphabet" {
    need_tools
    good
    printf "19-198-0000 THE CAT'S HAT\n A HAT\n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 2: a line without an utterance id (expected \"SPEAKER-CHAPTER-NNNN TRANSCRIPT\")"
    printf "19-198-0000 THE CAT'S HAT\n\n19-198-0001 A HAT\n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 2: a line without an utterance id*"
    printf "19-198-0000 THE CAT'S HAT\nHAT 19-198-0001\n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 2: 'HAT' is not an utterance id SPEAKER-CHAPTER-NNNN"
    printf "19-198-0000 THE CAT'S HAT\n19-199-0001 A HAT\n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 2: utterance id '19-199-0001' is not of this file's speaker and chapter (19-198-...)"
    printf "19-198-0000 THE CAT'S HAT\n19-198-0000 A HAT\n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 2: utterance 19-198-0000 is listed twice (first on line 1)"
    printf "19-198-0000 THE CAT'S HAT\n19-198-0001 A CAF\xc3\x89 HAT\n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 2, column 18: character 0xC3 is not in the transcripts' alphabet (letters, apostrophe, space)"
    printf "19-198-0000 THE CAT'S HAT.\n19-198-0001 A HAT\n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 1, column 26: character '.' is not in the transcripts' alphabet (letters, apostrophe, space)"
}

@test "prep librispeech: a piece the model does not know (<unk>) is bad input, as the reference's assert" {
    need_tools
    good
    printf "19-198-0000 THE CAT'S HAT\n19-198-0001 A ZOO\n" >$D/19-198.trans.txt
    bad_run 3 "prep: error: $D/19-198.trans.txt: line 2: utterance 19-198-0001: the sentencepiece model has no piece for part of its transcript (<unk>, id 0)"
}

@test "prep librispeech: --spm names a file that is not a sentencepiece model" {
    need_tools
    good
    echo junk >m.model
    bad_run 3 "prep: error: m.model: spm_encode exited with status *hint: is it a sentencepiece .model file?*"
}

@test "prep librispeech --manifests: bad manifests name the file and the JSON path" {
    need_tools
    good
    printf '[{"transcript": "a hat", "files": [], "original_duration": 1, "original_num_samples": 16000}]' >m1.json
    run prep librispeech -o out --manifests --spm m.model m1.json
    [ "$status" -eq 3 ]
    [ "$output" = 'prep: error: m1.json: $[0].files: "files" must be a non-empty array' ]
    printf '[{"transcript": "a hat!", "files": [{"fname": "x.wav", "speed": 1}], "original_duration": 1, "original_num_samples": 16000}]' >m2.json
    run prep librispeech -o out --manifests --spm m.model m2.json
    [ "$status" -eq 3 ]
    [[ "$output" == 'prep: error: m2.json: $[0].transcript, offset 5: character '"'!'"' 0x21 is not in'* ]]
    printf '[{"transcript": "a hat", "files": [{"fname": "x.wav", "speed": 1}], "original_duration": 1}' >m3.json
    run prep librispeech -o out --manifests --spm m.model m3.json
    [ "$status" -eq 3 ]
    [[ "$output" == "prep: error: m3.json: line 1, column "*": not valid JSON: "* ]]
    nothing_written
}

@test "prep librispeech: usage errors" {
    run prep librispeech ls
    [ "$status" -eq 2 ]
    [[ "$output" == *"librispeech: give -o OUTDIR"* ]]
    run prep librispeech -o out --spm m.model --vocab-size 10 ls
    [ "$status" -eq 2 ]
    run prep librispeech -o out --manifests --wav x.json
    [ "$status" -eq 2 ]
    mkdir -p ls/dev-clean out/dev-clean-wav
    run prep librispeech -o out --wav --spm m.model ls/dev-clean
    [ "$status" -eq 2 ]
    [ "$output" = "prep: error: out/dev-clean-wav already exists: remove it, or leave out --wav" ]
    run prep synth librispeech -o x --speakers 0
    [ "$status" -eq 2 ]
    run prep librispeech --help
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "Usage: prep librispeech -o OUTDIR"* ]]
}

@test "prep(1): the LibriSpeech examples run (between the librispeech-examples markers)" {
    need_synth
    sed -n '/librispeech-examples-begin/,/librispeech-examples-end/p' "$TK_ROOT/man/man1/prep.1" |
        grep -v '^\.' | sed 's/\\-/-/g' >examples.sh
    [ "$(wc -l <examples.sh)" -eq 3 ]
    run bash -eo pipefail examples.sh
    [ "$status" -eq 0 ]
    [[ "${lines[-1]}" == '{"type":"prep","dataset":"librispeech","subsets":2,"utterances":9,"records":9,"dropped_over_16.7s":0,"spm_model":"out/librispeech60.model","spm_trained":false,'* ]]
    for s in dev-clean train-clean-100; do
        diff <(python3 "$DUMP" out/$s.tks) <(python3 "$DUMP" out2/$s.tks)
    done
}
