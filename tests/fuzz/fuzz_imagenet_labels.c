// Fuzz the ImageNet label-file and synset-list readers (LOC_val_solution.csv, per-image synset
// lists, the devkit ground truth with a synset order): any input must parse or give an error
// naming a line, never crash; every label parsed names a WordNet id.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "imagenet/imagenet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *buf = (const char *)data;
    tk_err e;
    imagenet_synsets order = {0}, s;
    const char *ids[3] = {"n01440764", "n01443537", "n01484850"};
    imagenet_synsets_from(&order, ids, 3, &e);
    imagenet_labels l;
    for (int k = 0; k < 2; k++)
        if (imagenet_labels_parse(&l, buf, size, "fuzz", k ? &order : NULL, &e) == 0) {
            for (size_t i = 0; i < l.n; i++)
                if (!imagenet_is_wnid(l.wnid[i], strlen(l.wnid[i]))) abort();
            imagenet_labels_free(&l);
        }
    if (imagenet_synsets_parse(&s, buf, size, "fuzz", &e) == 0) {
        for (int i = 1; i < s.n; i++)
            if (strcmp(s.id[i - 1], s.id[i]) >= 0) abort(); // sorted and unique
        imagenet_synsets_free(&s);
    }
    imagenet_synsets_free(&order);
    return 0;
}
