#!/usr/bin/env python3
"""Prints the events of an xtel flight recorder file as the NIXL documents show them.

Standard library only. Follows docs/buffer-format.md: a 128-byte header, then 64-byte slots,
each a sequence number and a 56-byte event. It reads with os.pread, never a mapping, so a file
truncated under it is reported, not a crash; and it prints the same bytes as the C++
telemetry_reader for every file.
"""

import fcntl
import os
import signal
import stat
import struct
import sys
import time

HELP = r"""usage: telemetry_reader.py --telemetry_path <path> [--follow [--retry]] [--json]
                          [--interval-ms N]
       telemetry_reader.py [options] <path>

Prints the events of an xtel flight recorder file, oldest first, then one line on stderr
saying how many it read and how many it missed (overwritten before it could read them).

options:
  -h, --help          print this help and exit
  -f, --follow        keep printing new events as the writer publishes them; stops when the
                      writer closes the file, when the writer dies without closing it (its lock
                      is free), or, without --retry, when the path is replaced or removed
  -F, --retry         with --follow: when the path is replaced or removed, say so on stderr,
                      wait for a new file at the path and follow it from its beginning
  --json              one JSON object per event (and per run of missed events)
  --interval-ms N     how often --follow looks for new events (default 100)

Event names are bytes: the bytes before the first NUL among the first 37. A printable ASCII
byte is printed as itself, except a backslash, printed as \\; any other byte is printed as
\xNN (two lower-case hex digits). JSON strings hold that same text, escaped as JSON needs.

exit status:
  0    done: the file was read, or the followed writer closed it, died, or it was replaced
  2    the file is not a flight recorder this reader can read, or was damaged while being read
       (truncated, write sequence gone backwards); one line on stderr says why
  64   bad command line
  130  interrupted by SIGINT
  143  terminated by SIGTERM
"""

MAGIC = b"XTELTLM\x00"
FORMAT_VERSION = 2
HEADER_SIZE = 128
SLOT_SIZE = 64
EVENT_SIZE = 56
MAX_NAME = 37
MAX_CAPACITY = (2**64 - 1 - HEADER_SIZE) // SLOT_SIZE
CHUNK_SLOTS = 1024
STEP = 4096
# magic, version, header_size, slot_size, event_size, capacity, write_seq, created_us, pid,
# state, agent_name, claim_seq
HEADER = struct.Struct("<8sIIIIQQQII64sQ")
STATE_CLOSED = 2
# seq, timestamp_us, value, category, kind, name
SLOT = struct.Struct("<QQQBB38s")
CATEGORIES = ["MEMORY", "TRANSFER", "CONNECTION", "BACKEND", "ERROR", "PERFORMANCE", "SYSTEM",
              "CUSTOM"]


class FormatError(Exception):
    """The file is not a telemetry buffer this reader can read, or was damaged under it."""


class Stop(Exception):
    """SIGINT or SIGTERM: the program ends with 128 + signum."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def strerror(e):
    return e.strerror or str(e)


def pread_all(fd, size, offset):
    """Exactly size bytes at offset, or None when the file ends first (it was truncated)."""
    parts = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            return None
        parts.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


class Reader:
    """The pread reader of docs/buffer-format.md, as xtel::flight_recorder::reader."""

    def __init__(self, path):
        self.path = path
        try:
            # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as e:
            raise FormatError(f"{path}: cannot open: {strerror(e)}") from None
        try:
            self._check(fd)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.next = 0
        self.published = 0
        self.missed = 0

    def _check(self, fd):
        path = self.path
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FormatError(f"{path}: is a directory, not a telemetry buffer")
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"{path}: is not a regular file")
        size = st.st_size
        if size < HEADER_SIZE:
            raise FormatError(f"{path}: truncated: {size} bytes, smaller than the "
                              f"{HEADER_SIZE}-byte header")
        head = pread_all(fd, HEADER.size, 0)
        if head is None:
            raise FormatError(f"{path}: cannot read the header")
        (magic, version, header_size, slot_size, event_size, capacity, *_) = HEADER.unpack(head)
        if magic != MAGIC:
            raise FormatError(f"{path}: not a telemetry buffer (bad magic)")
        if version != FORMAT_VERSION:
            raise FormatError(f"{path}: unsupported format version {version} "
                              f"(this reader reads version {FORMAT_VERSION})")
        if (header_size, slot_size, event_size) != (HEADER_SIZE, SLOT_SIZE, EVENT_SIZE):
            raise FormatError(
                f"{path}: unexpected layout (header {header_size} bytes, slot {slot_size}, "
                f"event {event_size}; expected {HEADER_SIZE}, {SLOT_SIZE}, {EVENT_SIZE})")
        if capacity == 0 or capacity > MAX_CAPACITY:
            raise FormatError(f"{path}: absurd capacity {capacity} "
                              f"(expected 1 to {MAX_CAPACITY} slots)")
        if capacity > (size - HEADER_SIZE) // SLOT_SIZE:
            raise FormatError(f"{path}: truncated: {size} bytes cannot hold the {capacity} "
                              f"events the header declares")
        self.capacity = capacity

    def close(self):
        os.close(self.fd)

    def header(self):
        head = pread_all(self.fd, HEADER.size, 0)
        if head is None:
            raise FormatError(f"{self.path}: damaged: truncated below its {HEADER_SIZE}-byte "
                              "header")
        return HEADER.unpack(head)

    def refresh(self):
        expected = HEADER_SIZE + self.capacity * SLOT_SIZE
        size = os.fstat(self.fd).st_size
        if size < expected:
            raise FormatError(f"{self.path}: damaged: truncated to {size} bytes while being "
                              f"read (the header declares {expected})")
        w = self.header()[6]
        if w < self.next:
            raise FormatError(f"{self.path}: damaged: write_seq went back from {self.next} to "
                              f"{w} (the file was rewritten or damaged)")
        self.published = w
        if w - self.next > self.capacity:
            self.missed += w - self.capacity - self.next
            self.next = w - self.capacity

    def read_chunk(self, max_events):
        """Slots of the next events, each (seq, ts, value, cat, kind, name); a slot the writer
        claimed for a newer event before the read finished comes back with seq 0."""
        index = self.next % self.capacity
        n = min(self.published - self.next, max_events, self.capacity - index, CHUNK_SLOTS)
        raw = pread_all(self.fd, n * SLOT_SIZE, HEADER_SIZE + index * SLOT_SIZE)
        if raw is None:
            raise FormatError(f"{self.path}: damaged: truncated while being read")
        claimed = self.header()[11]  # only now, after the slots were read
        slots = []
        for i in range(n):
            s = SLOT.unpack_from(raw, i * SLOT_SIZE)
            if self.next + i + self.capacity < claimed:
                s = (0,) + s[1:]
            slots.append(s)
        return slots

    def poll(self, max_events):
        """Yields (ts, cat, name, value) for up to max_events of the events not yet read."""
        self.refresh()
        while self.next < self.published and max_events > 0:
            chunk = self.read_chunk(max_events)
            for seq, ts, value, cat, _kind, name in chunk:
                n = self.next
                self.next += 1
                if seq == n + 1:
                    yield ts, cat, name[:MAX_NAME].split(b"\x00", 1)[0], value
                else:
                    self.missed += 1  # overwritten, being overwritten, or never written
            max_events -= len(chunk)

    def backlog(self):
        return self.published - self.next

    def writer_closed(self):
        return self.header()[9] == STATE_CLOSED

    def writer_pid(self):
        return self.header()[8]

    def writer_gone(self):
        """The file is still marked open but no writer holds its lock: the writer died."""
        if self.writer_closed():
            return False
        try:
            fcntl.flock(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return False
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        return True

    def replaced(self):
        try:
            by_path = os.stat(self.path)
        except OSError:
            return True
        mine = os.fstat(self.fd)
        return (by_path.st_ino, by_path.st_dev) != (mine.st_ino, mine.st_dev)


def format_timestamp(us):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(us // 1_000_000)) + \
        f".{us % 1_000_000:06d}"


def category_name(cat):
    return CATEGORIES[cat] if cat < len(CATEGORIES) else "UNKNOWN"


def escape_name(raw):
    """Printable ASCII that tells every byte sequence apart (see HELP)."""
    out = []
    for b in raw:
        if b == 0x5C:
            out.append("\\\\")
        elif 0x20 <= b <= 0x7E:
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
    return "".join(out)


def json_escape(text):
    return text.replace("\\", "\\\\").replace('"', '\\"')


class Printer:
    """Prints events and runs of missed events, across every file a --retry run follows."""

    def __init__(self, as_json, out):
        self.as_json = as_json
        self.out = out
        self.read = 0
        self.reported = 0
        self.missed_total = 0

    def event(self, ts, cat, name, value):
        stamp = format_timestamp(ts)
        text = escape_name(name)
        if self.as_json:
            self.out.write(f'{{"timestamp_us":{ts},"timestamp":"{stamp}",'
                           f'"category":"{category_name(cat)}","event":"{json_escape(text)}",'
                           f'"value":{value}}}\n')
        else:
            self.out.write("=== NIXL Telemetry Event ===\n"
                           f"Timestamp: {stamp}\n"
                           f"Category: {category_name(cat)}\n"
                           f"Event: {text}\n"
                           f"Value: {value}\n"
                           "===========================\n\n")
        self.read += 1

    def missed(self, reader):
        if reader.missed == self.reported:
            return
        n = reader.missed - self.reported
        if self.as_json:
            self.out.write(f'{{"missed":{n}}}\n')
        else:
            self.out.write(f"=== Missed {n} events (overwritten before they were read) ===\n\n")
        self.reported = reader.missed
        self.missed_total += n

    def next_file(self):
        self.reported = 0


def drain(reader, out):
    """Prints everything published so far, a bounded step at a time."""
    while True:
        for ts, cat, name, value in reader.poll(STEP):
            out.missed(reader)
            out.event(ts, cat, name, value)
        out.missed(reader)
        out.out.flush()
        if reader.backlog() == 0:
            return


def say(path, what):
    print(f"telemetry_reader: {path}: {what}", file=sys.stderr, flush=True)


def reopen(args):
    """Waits for a flight recorder to appear at the path again."""
    while True:
        try:
            return Reader(args.path)
        except FormatError:
            time.sleep(args.interval_ms / 1000.0)


def follow(reader, args, out):
    """Follows the file until the writer closes it or dies, the path is replaced (without
    --retry), or a signal comes."""
    last_lock_check = time.monotonic()
    while True:
        # Each condition is seen before the final drain, so nothing published before it is lost.
        closed = reader.writer_closed()
        replaced = not closed and reader.replaced()
        before = reader.next
        drain(reader, out)
        if closed:
            return
        if replaced:
            if not args.retry:
                say(args.path, "the file was replaced or removed; stopping (--retry follows the "
                    "new one)")
                return
            say(args.path, "the file was replaced or removed; waiting for the new one")
            reader.close()
            reader = reopen(args)
            say(args.path, "following the new file")
            out.next_file()
            continue
        if reader.next == before and time.monotonic() - last_lock_check >= 1.0:
            last_lock_check = time.monotonic()
            if reader.writer_gone():
                drain(reader, out)
                say(args.path, f"writer pid {reader.writer_pid()} ended without closing the file")
                return
        time.sleep(args.interval_ms / 1000.0)


class Args:
    path = None
    follow = False
    retry = False
    json = False
    interval_ms = 100


def usage_error(why):
    print(f"telemetry_reader: {why}\n(telemetry_reader.py --help says more)", file=sys.stderr)
    sys.exit(64)


def parse_args(argv):
    """The same command line as the C++ reader (argparse's messages and statuses differ)."""
    args = Args()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--follow", "-f"):
            args.follow = True
        elif a in ("--retry", "-F"):
            args.retry = True
        elif a == "--json":
            args.json = True
        elif a == "--interval-ms" and i + 1 < len(argv):
            i += 1
            try:
                args.interval_ms = int(argv[i])
            except ValueError:
                args.interval_ms = 0
            if args.interval_ms <= 0:
                usage_error("--interval-ms takes a positive number of milliseconds")
        elif a == "--telemetry_path" and i + 1 < len(argv):
            i += 1
            args.path = argv[i]
        elif a in ("--help", "-h"):
            sys.stdout.write(HELP)
            sys.exit(0)
        elif a.startswith("-"):
            usage_error(f"unknown option {a}")
        elif args.path is None:
            args.path = a
        else:
            usage_error("one path only")
        i += 1
    if not args.path:
        usage_error("missing the path of a telemetry file")
    if args.retry and not args.follow:
        usage_error("--retry goes with --follow")
    return args


def on_signal(signum, _frame):
    raise Stop(signum)


def main(argv):
    args = parse_args(argv)
    out = Printer(args.json, sys.stdout)
    status = 0
    reader = None
    try:
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        reader = Reader(args.path)
        if args.follow:
            follow(reader, args, out)
        else:
            drain(reader, out)
    except FormatError as e:
        sys.stdout.flush()
        print(f"telemetry_reader: {e}", file=sys.stderr)
        return 2
    except Stop as s:
        # Later signals must not interrupt the summary.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        status = 128 + s.signum
    sys.stdout.flush()
    print(f"{args.path}: {out.read} events read, {out.missed_total} missed", file=sys.stderr)
    return status


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(0)
