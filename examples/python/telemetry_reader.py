#!/usr/bin/env python3
"""Prints the events of an xtel flight recorder file as the NIXL documents show them.

    python3 telemetry_reader.py --telemetry_path <path> [--follow] [--json] [--interval-ms N]

Standard library only. Follows docs/buffer-format.md: a 128-byte header, then 64-byte slots,
each a sequence number and a 56-byte event. A slot's sequence is checked before and after the
copy, so an event the writer overwrote meanwhile is counted as missed, never printed torn.
"""

import argparse
import json
import mmap
import os
import signal
import stat
import struct
import sys
import time

MAGIC = b"XTELTLM\x00"
FORMAT_VERSION = 2
HEADER_SIZE = 128
SLOT_SIZE = 64
EVENT_SIZE = 56
MAX_NAME = 38
BUSY_BIT = 1 << 63
# magic, version, header_size, slot_size, event_size, capacity, write_seq, created_us, pid, state
HEADER = struct.Struct("<8sIIIIQQQII")
WRITE_SEQ_OFFSET = 32
STATE_OFFSET = 52
STATE_CLOSED = 2
# seq, timestamp_us, value, category, kind, name
SLOT = struct.Struct("<QQQBB38s")
U64 = struct.Struct("<Q")
CATEGORIES = ["MEMORY", "TRANSFER", "CONNECTION", "BACKEND", "ERROR", "PERFORMANCE", "SYSTEM",
              "CUSTOM"]


class FormatError(Exception):
    """The file is not a telemetry buffer this reader can read."""


class Reader:
    def __init__(self, path):
        self.path = path
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            raise FormatError(f"{path}: cannot open: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise FormatError(f"{path}: is a directory, not a telemetry buffer")
            if not stat.S_ISREG(st.st_mode):
                raise FormatError(f"{path}: is not a regular file")
            size = st.st_size
            if size < HEADER_SIZE:
                raise FormatError(f"{path}: truncated: {size} bytes, smaller than the "
                                  f"{HEADER_SIZE}-byte header")
            head = os.pread(fd, HEADER.size, 0)
            (magic, version, header_size, slot_size, event_size, capacity, _, _, _,
             _) = HEADER.unpack(head)
            if magic != MAGIC:
                raise FormatError(f"{path}: not a telemetry buffer (bad magic)")
            if version != FORMAT_VERSION:
                raise FormatError(f"{path}: unsupported format version {version} "
                                  f"(this reader reads version {FORMAT_VERSION})")
            if (header_size, slot_size, event_size) != (HEADER_SIZE, SLOT_SIZE, EVENT_SIZE):
                raise FormatError(
                    f"{path}: unexpected layout (header {header_size} bytes, slot {slot_size}, "
                    f"event {event_size}; expected {HEADER_SIZE}, {SLOT_SIZE}, {EVENT_SIZE})")
            if capacity == 0 or capacity > (size - HEADER_SIZE) // SLOT_SIZE:
                raise FormatError(f"{path}: truncated: {size} bytes cannot hold the {capacity} "
                                  f"events the header declares")
            self.capacity = capacity
            self.map = mmap.mmap(fd, HEADER_SIZE + capacity * SLOT_SIZE, mmap.MAP_SHARED,
                                 mmap.PROT_READ)
        finally:
            os.close(fd)
        self.next = 0
        self.missed = 0

    def published(self):
        return U64.unpack_from(self.map, WRITE_SEQ_OFFSET)[0]

    def writer_closed(self):
        return struct.unpack_from("<I", self.map, STATE_OFFSET)[0] == STATE_CLOSED

    def poll(self):
        """Yields (missed_so_far, event) for each event published since the last call."""
        published = self.published()
        if published > self.next + self.capacity:
            self.missed += published - self.capacity - self.next
            self.next = published - self.capacity
        while self.next < published:
            seq = self.next
            offset = HEADER_SIZE + (seq % self.capacity) * SLOT_SIZE
            before, ts, value, cat, _kind, name = SLOT.unpack_from(self.map, offset)
            after = U64.unpack_from(self.map, offset)[0]
            self.next += 1
            if before != seq + 1 or after != seq + 1:
                self.missed += 1  # overwritten, or being overwritten, before we read it
                continue
            yield ts, cat, name.split(b"\x00", 1)[0], value


def format_timestamp(us):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(us // 1_000_000)) + \
        f".{us % 1_000_000:06d}"


def category_name(cat):
    return CATEGORIES[cat] if cat < len(CATEGORIES) else "UNKNOWN"


def printable(raw):
    return "".join(chr(b) if 0x20 <= b <= 0x7E else "?" for b in raw)


def print_event(ts, cat, name, value, as_json, out):
    stamp = format_timestamp(ts)
    if as_json:
        # Latin-1 maps each byte to one code point, as the C++ reader escapes them.
        obj = {"timestamp_us": ts, "timestamp": stamp, "category": category_name(cat),
               "event": name.decode("latin-1"), "value": value}
        out.write(json.dumps(obj, separators=(",", ":")) + "\n")
        return
    out.write("=== NIXL Telemetry Event ===\n"
              f"Timestamp: {stamp}\n"
              f"Category: {category_name(cat)}\n"
              f"Event: {printable(name)}\n"
              f"Value: {value}\n"
              "===========================\n\n")


def print_missed(n, as_json, out):
    if as_json:
        out.write(json.dumps({"missed": n}, separators=(",", ":")) + "\n")
    else:
        out.write(f"=== Missed {n} events (overwritten before they were read) ===\n\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--telemetry_path", required=True, help="the flight recorder file")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new events")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--interval-ms", type=int, default=100, help="polling interval")
    args = parser.parse_args(argv)
    if args.interval_ms <= 0:
        parser.error("--interval-ms takes a positive number of milliseconds")

    interrupted = []
    signal.signal(signal.SIGINT, lambda *_: interrupted.append(True))
    signal.signal(signal.SIGTERM, lambda *_: interrupted.append(True))
    try:
        reader = Reader(args.telemetry_path)
    except FormatError as e:
        print(f"telemetry_reader: {e}", file=sys.stderr)
        return 2

    out = sys.stdout
    read = 0
    missed_reported = 0
    while True:
        for ts, cat, name, value in reader.poll():
            if reader.missed > missed_reported:
                print_missed(reader.missed - missed_reported, args.json, out)
                missed_reported = reader.missed
            print_event(ts, cat, name, value, args.json, out)
            read += 1
        if reader.missed > missed_reported:
            print_missed(reader.missed - missed_reported, args.json, out)
            missed_reported = reader.missed
        out.flush()
        if not args.follow or interrupted:
            break
        time.sleep(args.interval_ms / 1000.0)
        if interrupted:
            # One last look, so events published just before the signal are not left out.
            args.follow = False
    print(f"{args.telemetry_path}: {read} events read, {reader.missed} missed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(0)
