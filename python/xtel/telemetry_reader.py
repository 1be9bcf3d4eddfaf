#!/usr/bin/env python3
"""Prints the events of an xtel flight recorder file as the NIXL documents show them.

Standard library only. Follows docs/buffer-format.md: a 128-byte header, then 64-byte slots,
each a sequence number and a 56-byte event. It reads with os.pread, never a mapping, so a file
truncated under it is reported, not a crash; and it prints the same bytes as the C++
telemetry_reader for every file. The module xtel.telemetry_reader of the package
(`python -m xtel.telemetry_reader`), which examples/python/telemetry_reader.py runs from a
checkout without the package installed: it imports nothing of the package.
"""

import fcntl
import itertools
import operator
import os
import signal
import stat
import struct
import sys
import time

# xtel's version: the project's VERSION in CMakeLists.txt, which a test holds this to.
VERSION = "0.1.0"

HELP = r"""usage: telemetry_reader.py [options] <path>
       telemetry_reader.py [options] --telemetry_path <path>

Prints the events of an xtel flight recorder file, oldest first, then one line on stderr
saying how many it read and how many it missed (overwritten before it could read them).

options:
  -h, --help              print this help and exit
      --version           print xtel's version and exit
  --telemetry_path PATH   the file to read; PATH alone, without the option, does the same
  -f, --follow            keep printing new events as the writer publishes them; stops when the
                          writer closes the file, when the writer dies without closing it (its
                          lock is free), or, without --retry, when the path is replaced or removed
  -F, --retry             with --follow: when the path is replaced or removed, say so on stderr,
                          wait for a new file at the path and follow it from its beginning
  --json                  JSON objects, one a line: per event (and per run of missed events),
                          per --summary row, or one for --header
  --interval-ms N         how often --follow looks for new events (default 100)
  --category NAME         only events of category NAME: MEMORY, TRANSFER, CONNECTION, BACKEND,
                          ERROR, PERFORMANCE, SYSTEM or CUSTOM, in any case; repeat the option
                          to keep several categories
  --name GLOB             only events whose whole name matches GLOB, byte by byte and case
                          sensitive: * any bytes, ? one byte, [abc] [a-z] one byte of a set,
                          [!abc] one byte not in it (a [ without its ] is itself)
  --summary               instead of the events, one row per category and event name, sorted by
                          both: count, sum, min, max and last value, and rate_per_s, which is
                          (count - 1) / seconds from the row's earliest to its latest timestamp,
                          truncated to 3 decimals ("-", or null in JSON, for a single event or a
                          zero span). Sums are exact integers, never rounded
  --header                instead of the events, the file's header and what a read found:
                          format version, agent, capacity, writer pid, state (alive; closed;
                          crashed: marked open but no writer holds its lock; or unknown N),
                          creation time, written (events published), read, missed (overwritten
                          before they could be read); with --summary, the summary follows it
--summary and --header read the file once: they do not go with --follow.

Event names are bytes: the bytes before the first NUL among the first 37. A printable ASCII
byte is printed as itself, except a backslash, printed as \\; any other byte is printed as
\xNN (two lower-case hex digits). JSON strings hold that same text, escaped as JSON needs.

Each event and --summary row says its value's unit, known from its category and name for the
events xtel records (docs/events.md): us (microseconds), bytes, count, pid or version. Any
other event's unit is unknown: - in text, null in JSON.

exit status:
  0    done: the file was read, or the followed writer closed it, died, or it was replaced
  2    the file is not a flight recorder this reader can read, or was damaged while being read
       (truncated, write sequence gone backwards); one line on stderr says why
  64   bad command line (one line on stderr says why)
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
STATE_OPEN = 1
STATE_CLOSED = 2
# seq, timestamp_us, value, tag: the category byte, the kind byte and the 38-byte name field,
# kept whole as one bytes object, a dictionary key for what depends on category and name
SLOT = struct.Struct("<QQQ40s")
TAG_NAME = 2  # where the name field starts in a tag
TAG_OFFSET = 24  # where the tag starts in a slot
LITTLE_ENDIAN = sys.byteorder == "little"  # the file's order: its words can be cast in place
CATEGORIES = ["MEMORY", "TRANSFER", "CONNECTION", "BACKEND", "ERROR", "PERFORMANCE", "SYSTEM",
              "CUSTOM"]
# The unit of each event xtel records, by category number and name, as docs/events.md gives it
# (the C++ reader's unit_of is the same table). ASCII "us", not "µs": both readers print ASCII
# only, whatever the encoding of the locale Python writes stdout in.
UNITS = {
    (0, b"agent_memory_registered"): "bytes",
    (0, b"agent_memory_deregistered"): "bytes",
    (1, b"agent_tx_bytes"): "bytes",
    (1, b"agent_rx_bytes"): "bytes",
    (1, b"agent_tx_requests_num"): "count",
    (1, b"agent_rx_requests_num"): "count",
    (2, b"agent_connect"): "count",
    (2, b"agent_disconnect"): "count",
    (2, b"agent_connections"): "count",
    (3, b"ucx_backend_init"): "count",
    (3, b"ucx_version"): "version",
    (3, b"ucx_endpoint_error"): "count",
    (5, b"agent_xfer_time"): "us",
    (5, b"agent_xfer_post_time"): "us",
    (6, b"agent_start"): "pid",
    (6, b"agent_stop"): "pid",
    (6, b"telemetry_events_dropped"): "count",
}
# Every error kind's event, the two never recorded (ok, in_progress) with them.
for _status in ("ok", "in_progress", "invalid_argument", "not_found", "busy", "not_supported",
                "bad_metadata", "remote_disconnected", "timed_out", "backend_error"):
    UNITS[(4, b"agent_error_" + _status.encode())] = "count"
UCX_TRANSPORT_PREFIX = b"ucx_tl_"  # BACKEND: ucx_tl_<transport>, lanes, a count


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
        """The raw slots of the next events (at most max_events, up to the wrap) and, read
        after them, claim_seq: the slot of event n was rewritten meanwhile if
        n + capacity < claim_seq."""
        index = self.next % self.capacity
        n = min(self.published - self.next, max_events, self.capacity - index, CHUNK_SLOTS)
        raw = pread_all(self.fd, n * SLOT_SIZE, HEADER_SIZE + index * SLOT_SIZE)
        if raw is None:
            raise FormatError(f"{self.path}: damaged: truncated while being read")
        return raw, self.header()[11]  # claim_seq only now, after the slots were read

    def poll(self, max_events):
        """Yields the next events (up to max_events in all) in runs: (missed, events), missed
        being self.missed as it stood before the run's first event (so that missed events are
        reported where they happened), events an Events (columns: timestamps, values, tags; a
        tag as in SLOT, see tag_category and tag_name)."""
        self.refresh()
        while self.next < self.published and max_events > 0:
            raw, claimed = self.read_chunk(max_events)
            first = self.next
            n = len(raw) // SLOT_SIZE
            # Slots of events below claimed - capacity were claimed for newer ones: all missed.
            stale = min(max(claimed - self.capacity - first, 0), n)
            self.missed += stale
            slots = memoryview(raw)[stale * SLOT_SIZE:]
            words = slots.cast("Q")
            if LITTLE_ENDIAN and words[::SLOT_SIZE // 8].tolist() == list(
                    range(first + stale + 1, first + n + 1)):
                # The usual case, every slot holds its event: each column is cut out of the
                # slots whole, without a Python loop.
                yield self.missed, Events(words[1::SLOT_SIZE // 8].tolist(),
                                          words[2::SLOT_SIZE // 8].tolist(),
                                          tags_of(slots))
            else:
                yield from self.runs(slots, first + stale)
            self.next = first + n
            max_events -= n

    def runs(self, slots, seq):
        """The runs of published events among slots whose first holds event number seq."""
        missed = self.missed
        events = Events([], [], [])
        for s, ts, value, tag in SLOT.iter_unpack(slots):
            seq += 1
            if s == seq:
                events.timestamps.append(ts)
                events.values.append(value)
                events.tags.append(tag)
            else:
                if events:
                    yield missed, events
                    events = Events([], [], [])
                self.missed += 1  # overwritten, being overwritten, or never written
                missed = self.missed
        if events:
            yield missed, events

    def backlog(self):
        return self.published - self.next

    def writer_closed(self):
        return self.header()[9] == STATE_CLOSED

    def writer_pid(self):
        return self.header()[8]

    def writer_gone(self):
        """The file is still marked open but no writer holds its lock: the writer died."""
        return not self.writer_closed() and self.lock_free()

    def lock_free(self):
        """No writer holds the file's lock (taken and released at once, so that a new writer
        is never kept waiting)."""
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


class Events:
    """A run of events as three columns of the same length: timestamps (µs), values and tags.
    Columns, not one tuple per event, so that each step over a run is one call into C."""

    __slots__ = ("timestamps", "values", "tags")

    def __init__(self, timestamps, values, tags):
        self.timestamps = timestamps
        self.values = values
        self.tags = tags

    def __len__(self):
        return len(self.tags)

    def select(self, keep):
        """The events whose entry in keep (one bool per event) is true."""
        compress = itertools.compress
        return Events(list(compress(self.timestamps, keep)), list(compress(self.values, keep)),
                      list(compress(self.tags, keep)))


TAG_STRUCTS = {}  # number of slots -> the Struct that cuts their tags out


def tags_of(slots):
    """The tag of every slot in slots, in one struct call."""
    n = len(slots) // SLOT_SIZE
    cut = TAG_STRUCTS.get(n)
    if cut is None:
        if len(TAG_STRUCTS) > 64:
            TAG_STRUCTS.clear()
        cut = TAG_STRUCTS[n] = struct.Struct(
            f"<{f'{TAG_OFFSET}x{SLOT_SIZE - TAG_OFFSET}s' * n}")
    return cut.unpack(slots)


def format_second(second):
    """A whole second since the epoch as both readers print it, in local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))


def format_timestamp(us):
    return f"{format_second(us // 1_000_000)}.{us % 1_000_000:06d}"


def category_name(cat):
    return CATEGORIES[cat] if cat < len(CATEGORIES) else "UNKNOWN"


def tag_name(tag):
    """The name's bytes: those before the first NUL among the first MAX_NAME of the field."""
    return tag[TAG_NAME:TAG_NAME + MAX_NAME].split(b"\x00", 1)[0]


def tag_category(tag):
    """The category number, 8 for every out-of-range one (all printed UNKNOWN)."""
    return min(tag[0], len(CATEGORIES))


def unit_of(cat, name):
    """The unit of an event of category number cat and name (bytes); None when unknown, as for
    a user's own events, whose unit only their recorder knows."""
    unit = UNITS.get((cat, name))
    lanes = cat == 3 and name.startswith(UCX_TRANSPORT_PREFIX) and name != UCX_TRANSPORT_PREFIX
    return "count" if unit is None and lanes else unit


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


def glob_match(pattern, name):
    """Whether the bytes `name` match the glob `pattern` (bytes) as a whole (see HELP --name);
    the C++ reader's glob_match is the same algorithm."""
    p = n = 0
    star_p = star_n = -1
    while n < len(name):
        if p < len(pattern) and pattern[p] == 0x2A:  # *
            star_p, star_n = p, n
            p += 1
            continue
        if p < len(pattern):
            matched, width = glob_one(pattern, p, name[n])
            if matched:
                p += width
                n += 1
                continue
        if star_p < 0:
            return False
        star_n += 1  # the last * takes one more byte
        p, n = star_p + 1, star_n
    while p < len(pattern) and pattern[p] == 0x2A:
        p += 1
    return p == len(pattern)


def glob_one(pattern, p, c):
    """Whether byte c matches the pattern element at p, and how many pattern bytes it spans."""
    first = pattern[p]
    if first == 0x3F:  # ?
        return True, 1
    if first != 0x5B:  # not [
        return first == c, 1
    i = p + 1
    negate = i < len(pattern) and pattern[i] == 0x21  # !
    if negate:
        i += 1
    start = i
    if i < len(pattern) and pattern[i] == 0x5D:  # a ] first is a member
        i += 1
    while i < len(pattern) and pattern[i] != 0x5D:
        i += 1
    if i >= len(pattern):
        return c == 0x5B, 1  # no closing ]: a plain [
    found = False
    j = start
    while j < i:
        if j + 2 < i and pattern[j + 1] == 0x2D:  # a-z
            found = found or pattern[j] <= c <= pattern[j + 2]
            j += 3
        else:
            found = found or pattern[j] == c
            j += 1
    return found != negate, i + 1 - p


class Filter:
    """--category and --name: which events to keep, decided once per distinct tag (category,
    kind and name field; a file holds few)."""

    def __init__(self, categories, glob):
        self.categories = categories
        self.glob = glob
        self.decided = {}

    def keeps(self, tag):
        kept = self.decided.get(tag)
        if kept is None:
            kept = self.decided[tag] = (
                (self.categories is None or tag[0] in self.categories) and
                (self.glob is None or glob_match(self.glob, tag_name(tag))))
        return kept

    def apply(self, events):
        keep = list(map(self.keeps, events.tags))
        return events if all(keep) else events.select(keep)


# An event: its head, microseconds, middle, value and tail (in JSON, after its timestamp_us).
TEXT_EVENT = "%s%06d%s%d%s"
JSON_EVENT = '{"timestamp_us":%d%s%06d%s%d%s'


class Texts(dict):
    """Texts made once per key, by make(key), when first asked for; at most 4,096 kept."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, key):
        if len(self) >= 4096:
            self.clear()
        text = self[key] = self.make(key)
        return text


class Printer:
    """Prints events and runs of missed events, across every file a --retry run follows. A
    run of missed events is reported before the next event printed, and at the end of a step."""

    def __init__(self, as_json, out, keep):
        self.as_json = as_json
        self.out = out
        self.keep = keep
        self.read = 0
        self.reported = 0
        self.missed_total = 0
        self.middles = Texts(self.middle)  # tag -> what an event prints between its
        #                                     microseconds and its value
        self.tails = Texts(self.tail)  # tag -> what an event prints after its value
        self.heads = Texts(self.head)  # whole second -> what an event prints before its
        #                                microseconds

    def events(self, missed, events):
        """Prints a run from Reader.poll, after the missed events before it. The hot loop:
        what an event prints between its timestamp and its value is made once per tag, what it
        prints up to its microseconds once per second, and the run is then formatted by one %
        over its columns, with no Python code run per event."""
        self.read += len(events)
        if self.keep is not None:
            events = self.keep.apply(events)
        if not events:
            return  # missed events are reported before the next one printed
        parts = []
        add = parts.append
        if missed != self.reported:
            add(self.missed_text(missed - self.reported))
            self.missed_total += missed - self.reported
            self.reported = missed
        # Each tag's middle and each second's head are made once (few of either in a run): the
        # rest is one template, repeated, that % fills from the columns, all in C.
        timestamps = events.timestamps
        million = itertools.repeat(1_000_000)
        width = 6 if self.as_json else 5  # the template's fields per event
        fields = [None] * (width * len(timestamps))
        if self.as_json:
            fields[0::6] = timestamps
        fields[width - 5::width] = list(map(self.heads.__getitem__,
                                            map(operator.floordiv, timestamps, million)))
        fields[width - 4::width] = list(map(operator.mod, timestamps, million))
        fields[width - 3::width] = list(map(self.middles.__getitem__, events.tags))
        fields[width - 2::width] = events.values
        fields[width - 1::width] = list(map(self.tails.__getitem__, events.tags))
        add((JSON_EVENT if self.as_json else TEXT_EVENT) * len(timestamps) % tuple(fields))
        self.out.write("".join(parts))

    def head(self, second):
        """What an event of that second prints before its microseconds (in JSON, after its
        timestamp_us)."""
        text = format_second(second)
        if self.as_json:
            return f',"timestamp":"{text}.'
        return f"=== NIXL Telemetry Event ===\nTimestamp: {text}."

    def middle(self, tag):
        """What an event prints between its timestamp and its value."""
        category = category_name(tag[0])
        text = escape_name(tag_name(tag))
        if self.as_json:
            return f'","category":"{category}","event":"{json_escape(text)}","value":'
        return f"\nCategory: {category}\nEvent: {text}\nValue: "

    def tail(self, tag):
        """What an event prints after its value: its unit, and the end of the event."""
        unit = unit_of(tag_category(tag), tag_name(tag))
        if self.as_json:
            return ',"unit":%s}\n' % ("null" if unit is None else f'"{unit}"')
        # The unit on a line of its own: NIXL's "Value: N" line stays as tools parse it.
        return f"\nUnit: {unit or '-'}\n===========================\n\n"

    def missed_text(self, n):
        if self.as_json:
            return f'{{"missed":{n}}}\n'
        return f"=== Missed {n} events (overwritten before they were read) ===\n\n"

    def missed(self, reader):
        if reader.missed == self.reported:
            return
        self.out.write(self.missed_text(reader.missed - self.reported))
        self.missed_total += reader.missed - self.reported
        self.reported = reader.missed

    def next_file(self):
        self.reported = 0


class Summary:
    """--summary: per (category, name), count, exact sum, min, max, last value and the span
    of timestamps, printed as the C++ reader prints them."""

    def __init__(self, keep):
        self.keep = keep
        self.rows = {}  # (category, 8 for UNKNOWN; name) -> [count, sum, min, max, last,
        #                                                   min timestamp, max timestamp]
        self.keys = {}  # tag -> its key in rows
        self.read = 0
        self.missed_total = 0

    def events(self, _missed, events):
        self.read += len(events)
        if self.keep is not None:
            events = self.keep.apply(events)
        rows = self.rows
        keys = self.keys
        for ts, value, tag in zip(events.timestamps, events.values, events.tags):
            key = keys.get(tag)
            if key is None:
                key = keys[tag] = (tag_category(tag), tag_name(tag))
            row = rows.get(key)
            if row is None:
                rows[key] = [1, value, value, value, value, ts, ts]
                continue
            row[0] += 1
            row[1] += value
            if value < row[2]:
                row[2] = value
            if value > row[3]:
                row[3] = value
            row[4] = value
            if ts < row[5]:
                row[5] = ts
            if ts > row[6]:
                row[6] = ts

    def missed(self, reader):
        self.missed_total = reader.missed

    def print(self, as_json, out):
        lines = []
        table = [("category", "event", "unit", "count", "sum", "min", "max", "last",
                  "rate_per_s")]
        # By category number, then by the name's bytes.
        for (cat, name), (count, total, low, high, last, t0, t1) in sorted(self.rows.items()):
            category = CATEGORIES[cat] if cat < 8 else "UNKNOWN"
            text = escape_name(name)
            unit = unit_of(cat, name)
            rate = rate_text(count, t1 - t0)
            if as_json:
                unit_json = "null" if unit is None else f'"{unit}"'
                lines.append(f'{{"category":"{category}","event":"{json_escape(text)}",'
                             f'"unit":{unit_json},'
                             f'"count":{count},"sum":{total},"min":{low},"max":{high},'
                             f'"last":{last},"rate_per_s":{"null" if rate is None else rate},'
                             f'"min_timestamp_us":{t0},"max_timestamp_us":{t1}}}\n')
            else:
                table.append((category, text, unit or "-", str(count), str(total), str(low),
                              str(high), str(last), "-" if rate is None else rate))
        if not as_json:
            widths = [max(len(r[i]) for r in table) for i in range(9)]
            for r in table:
                cells = [r[i].ljust(widths[i]) for i in range(3)]
                cells += [r[i].rjust(widths[i]) for i in range(3, 9)]
                lines.append("  ".join(cells) + "\n")
        out.write("".join(lines))


def rate_text(count, span_us):
    """(count - 1) events per second of span, truncated to 3 decimals; None when undefined."""
    if count < 2 or span_us == 0:
        return None
    milli = (count - 1) * 1_000_000_000 // span_us
    return f"{milli // 1000}.{milli % 1000:03d}"


def writer_state(reader, state):
    """What the header's state says, with the lock telling a live writer from a dead one."""
    if state == STATE_CLOSED:
        return "closed"
    if state == STATE_OPEN:
        return "crashed" if reader.lock_free() else "alive"
    return f"unknown {state}"


def print_header(reader, read, as_json, out):
    """--header, after a full read: `reader.next` is what the writer had published."""
    (_magic, version, _hs, _ss, _es, capacity, _w, created_us, pid, state, agent,
     _claim) = reader.header()
    agent_text = escape_name(agent.split(b"\x00", 1)[0])
    state_text = writer_state(reader, state)
    if as_json:
        out.write(f'{{"format_version":{version},"agent":"{json_escape(agent_text)}",'
                  f'"capacity":{capacity},"writer_pid":{pid},"state":"{state_text}",'
                  f'"created_us":{created_us},"written":{reader.next},"read":{read},'
                  f'"missed":{reader.missed}}}\n')
    else:
        out.write(f"format version: {version}\n"
                  f"agent: {agent_text}\n"
                  f"capacity: {capacity} events\n"
                  f"writer pid: {pid}\n"
                  f"state: {state_text}\n"
                  f"created: {format_timestamp(created_us)}\n"
                  f"written: {reader.next}\n"
                  f"read: {read}\n"
                  f"missed: {reader.missed}\n")


def drain(reader, out):
    """Hands everything published so far to out (a Printer or a Summary), a bounded step at a
    time."""
    while True:
        for missed, events in reader.poll(STEP):
            out.events(missed, events)
        out.missed(reader)
        if isinstance(out, Printer):
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
    categories = None  # set of category numbers, or None for all
    glob = None  # bytes, or None for every name
    summary = False
    header = False


def usage_error(why):
    print(f"telemetry_reader: {why} (telemetry_reader.py --help says more)", file=sys.stderr)
    sys.exit(64)


def parse_category(text):
    try:
        return CATEGORIES.index(text.upper())
    except ValueError:
        usage_error(f'--category: unknown category "{text}" (accepted, in any case: '
                    f'{", ".join(CATEGORIES)})')


def parse_args(argv):
    """The same command line as the C++ reader (argparse's messages and statuses differ)."""
    args = Args()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--interval-ms", "--telemetry_path", "--category", "--name"):
            if i + 1 >= len(argv):
                usage_error(f"{a} needs a value")
            i += 1
            value = argv[i]
            if a == "--interval-ms":
                # Digits only, as the C++ reader's from_chars reads them, and within an int.
                ok = value.isascii() and value.isdigit() and 0 < int(value) < 2**31
                args.interval_ms = int(value) if ok else 0
                if args.interval_ms <= 0:
                    usage_error("--interval-ms takes a positive number of milliseconds, "
                                f'not "{value}"')
            elif a == "--telemetry_path":
                if args.path is not None:
                    usage_error("one path only")
                args.path = value
            elif a == "--category":
                args.categories = (args.categories or set()) | {parse_category(value)}
            else:
                args.glob = os.fsencode(value)  # the bytes of the command line
        elif a in ("--follow", "-f"):
            args.follow = True
        elif a in ("--retry", "-F"):
            args.retry = True
        elif a == "--json":
            args.json = True
        elif a == "--summary":
            args.summary = True
        elif a == "--header":
            args.header = True
        elif a in ("--help", "-h"):
            sys.stdout.write(HELP)
            sys.exit(0)
        elif a == "--version":
            sys.stdout.write(f"telemetry_reader.py {VERSION}\n")
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
    if args.follow and (args.summary or args.header):
        usage_error("--summary and --header read the file once: they do not go with --follow")
    return args


def on_signal(signum, _frame):
    raise Stop(signum)


def main(argv):
    args = parse_args(argv)
    keep = None
    if args.categories is not None or args.glob is not None:
        keep = Filter(args.categories, args.glob)
    once = args.summary or args.header
    out = Summary(keep) if once else Printer(args.json, sys.stdout, keep)
    status = 0
    try:
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        reader = Reader(args.path)
        if args.follow:
            follow(reader, args, out)
        else:
            drain(reader, out)
        if args.header:
            print_header(reader, out.read, args.json, sys.stdout)
        if args.summary:
            out.print(args.json, sys.stdout)
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


def run(argv):
    """main(argv), a closed pipe (`| head`) ending it quietly: the exit status. What
    `python -m xtel.telemetry_reader` and examples/python/telemetry_reader.py run."""
    try:
        return main(argv)
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
