// The parts of prep(1) (cmd/prep.c is the program; each dataset's commands parse their own options).
#ifndef TK_CMD_PREP_H
#define TK_CMD_PREP_H

extern const char *prog; // "prep"

// BERT: which of bert, bert-hdf5, bert-tokenize, synth bert argv names (-1: none); its main.
int prep_bert_cmd_of(int argc, char **argv);
int prep_bert_main(int argc, char **argv);
// ImageNet: argv from "imagenet" (synth 0) or "imagenet" after "synth" (synth 1).
int prep_imagenet_main(int argc, char **argv, int synth);
// KiTS19: prep kits19 (argv from "kits19"); prep synth kits19 (argv from "kits19").
int prep_kits19_main(int argc, char **argv);
int prep_synth_kits19_main(int argc, char **argv);
// COCO: prep coco (argv from "coco"); prep synth coco (argv from "coco").
int prep_coco_main(int argc, char **argv);
int prep_synth_coco_main(int argc, char **argv);

// LibriSpeech: prep librispeech (argv from "librispeech"); prep synth librispeech (argv from
// "librispeech").
int prep_librispeech_main(int argc, char **argv);
int prep_synth_librispeech_main(int argc, char **argv);

#endif
