#!/usr/bin/env python3
"""Writes the seed corpus of job_record_fuzzer (tests/fuzz/corpus/job_record_fuzzer/).

job_record_fuzzer.cc reads its input with libFuzzer's FuzzedDataProvider: strings from the front
(a backslash followed by another character ends one; two backslashes are one), integers and
booleans from the back (first byte read = most significant), the blobs from what is left. This
script lays out stored job rows in that order, so the seeds start as whole, plausible rows: each
state, a stored evidence request (taken from the request_fuzzer seed, without its selector byte)
and the edge cases of a damaged row (times before 1970, invalid UTF-8, an unknown state).

  /usr/bin/python3 tests/fuzz/make_job_record_seeds.py tests/fuzz/corpus
"""
import pathlib
import struct
import sys


class Row:
    def __init__(self):
        self.front = b""
        self.back = []  # bytes in the order the provider reads them (from the end)

    def string(self, s):
        self.front += s.replace(b"\\", b"\\\\") + b"\\ "

    def integral(self, value, num_bytes):
        self.back += list(value.to_bytes(num_bytes, "big"))

    def boolean(self, b):
        self.integral(1 if b else 0, 1)

    def int64(self, v):  # ConsumeIntegral<int64_t>: v - INT64_MIN as 8 big-endian bytes
        self.integral(v + (1 << 63), 8)

    def double(self, v):  # not decoded exactly; any 9 bytes give some double
        self.boolean(v < 0)
        self.back += list(struct.pack(">d", abs(v)))

    def time(self, micros):
        self.boolean(micros is None)
        if micros is not None:
            self.int64(micros)

    def finish(self, request, result):
        middle = request + result
        rng = len(middle) + len(self.back)  # remaining_bytes() before the size is read
        num_bytes = max(1, (rng.bit_length() + 7) // 8)
        # Rough: the size's own bytes are counted in the range; its value selects len(request).
        self.integral(len(request), num_bytes)
        return self.front + middle + bytes(reversed(self.back))


def row(token, job_id, evidence, kind, state, error_code, message, progress, attempts, key,
        cancel, owner, times, request, result):
    r = Row()
    r.string(token)
    r.string(job_id)
    r.boolean(evidence)
    if not evidence:
        r.string(kind)
    r.string(state)
    r.int64(error_code)
    r.string(message)
    r.double(progress)
    r.string(b"sampling 40%")
    r.int64(attempts)
    r.string(key)
    r.boolean(cancel)
    r.string(owner)
    for t in times:
        r.time(t)
    return r.finish(request, result)


def main():
    corpus = pathlib.Path(sys.argv[1])
    request = (corpus / "request_fuzzer" / "evidence-mauna-loa").read_bytes()[1:]
    out = corpus / "job_record_fuzzer"
    out.mkdir(parents=True, exist_ok=True)
    job_id = b"01KAZ3Q4W5E6R7T8Y9U0I1O2P3"
    now = 1764080000000000
    seeds = {
        "queued": row(b"", job_id, True, b"", b"QUEUED", 0, b"", 0.0, 0, b"client-key-1",
                      False, b"", [None, now, None, None, now], request, b""),
        "running": row(b"p1.42", job_id, True, b"", b"RUNNING", 0, b"", 0.4, 1, b"", True,
                       b"host-a/0", [now + 30000000, now, now + 1000, None, now + 2000],
                       request, b""),
        "succeeded": row(b"p1.0", job_id, True, b"", b"SUCCEEDED", 0, b"", 1.0, 1, b"", False,
                         b"", [None, now, now + 1000, now + 9000000, now + 9000000], request,
                         b"\x09\x00\x00\x00\x00\x00\x00\xf0\xbf"),
        "failed": row(b"p1.9223372036854775807", job_id, False, b"search", b"FAILED", 10,
                      b"job abandoned: started 5 times", 0.0, 5, b"", False, b"",
                      [None, now, now, now, now], b"", b""),
        "damaged": row(b"p1.-1", b"01K\xff\xfe/..", False, b"\xc3\x28", b"RUNNiNG", -1,
                       b"\xe2\x82", float("nan"), -7, b"\xf5", True, b"\x80",
                       [-1, -(1 << 63), (1 << 63) - 1, -1500000, 0], b"\x0a\xff\xff", b"\xff"),
    }
    for name, data in seeds.items():
        (out / name).write_bytes(data)
        print(out / name)


if __name__ == "__main__":
    main()
