#!/usr/bin/env python3
"""Writes a TFRecord file of tf.train.Example records the way the MLPerf reference's stage 1
does (image/encoded, image/class/label, image/filename, image/class/synset, ...), with only the
standard library: the protobuf wire format and CRC-32C are written out here from their
specifications, independently of trainkit's reader.

  python3 write_tfrecord.py OUT LABEL:SYNSET:FILE [LABEL:SYNSET:FILE ...]
"""
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(num, payload):  # length-delimited
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def feature_bytes(v):
    return field(1, field(1, v))  # Feature.bytes_list { value }


def feature_int(v):
    return field(3, field(1, varint(v)))  # Feature.int64_list { packed value }


def example(feats):
    entries = b"".join(field(1, field(1, k.encode()) + field(2, v)) for k, v in feats.items())
    return field(1, entries)  # Example.features { feature map }


def main():
    out = open(sys.argv[1], "wb")
    for spec in sys.argv[2:]:
        label, synset, path = spec.split(":", 2)
        data = open(path, "rb").read()
        rec = example({
            "image/height": feature_int(1), "image/width": feature_int(1),
            "image/colorspace": feature_bytes(b"RGB"), "image/channels": feature_int(3),
            "image/class/label": feature_int(int(label)), "image/class/synset": feature_bytes(synset.encode()),
            "image/format": feature_bytes(b"JPEG"), "image/filename": feature_bytes(path.rsplit("/", 1)[-1].encode()),
            "image/encoded": feature_bytes(data)})
        n = struct.pack("<Q", len(rec))
        out.write(n + struct.pack("<I", masked(n)) + rec + struct.pack("<I", masked(rec)))
    out.close()


if __name__ == "__main__":
    main()
