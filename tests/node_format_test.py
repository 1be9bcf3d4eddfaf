#!/usr/bin/env python3
"""Reads the fixed node file tests/data/node/prefill-0.metrics with a reader written from
docs/node-format.md alone (no xtel code), and holds what it finds to values written by hand.

A second reader, from the page and nothing else, is what shows the page is enough to read the
file: the header, the latest area, and every family, series, bound and exemplar of the payload,
with values, sums, exemplar values and bounds divided by 10^decimals as the page says.
tests/unit/node_fixed_file_test.cpp reads the same file through xtel's own reader and codec and
prints the same listing (tests/data/node/prefill-0.expected), so the two readers agree.
The payload reader takes versions 1, 2 and 3; the golden payloads of tests/golden (one agent's,
as each version wrote it, and with native histograms only) are checked too, native buckets
against the bucket rule of the page.

usage: node_format_test.py SOURCE_DIR          check, exit 0 when everything matched
       node_format_test.py --print FILE        print the listing of any node file
"""

import fcntl
import math
import os
import re
import stat
import struct
import sys
from decimal import Decimal

HEADER_SIZE = 256
MAX_PAYLOAD = 256 * 1024 * 1024
TYPES = ["counter", "gauge", "histogram", "summary"]


class Damaged(Exception):
    pass


def pread_all(fd, size, offset):
    """Exactly size bytes at offset, or None when the file ends first."""
    parts = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            return None
        parts.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def read_header(fd):
    """The header's fields (node-format.md, "Header"), areas as 5-tuples."""
    raw = pread_all(fd, HEADER_SIZE, 0)
    if raw is None:
        raise Damaged("shorter than its 256-byte header")
    magic, version, header_size, created_us, start_time_us, writer_pid, state = struct.unpack_from(
        "<8sIIQQII", raw, 0)
    agent_name = raw[40:104].split(b"\0", 1)[0]
    generation, refused = struct.unpack_from("<QQ", raw, 104)
    areas = [struct.unpack_from("<QQQQQ", raw, 120 + 40 * i) for i in range(2)]
    return {
        "magic": magic, "version": version, "header_size": header_size,
        "created_us": created_us, "start_time_us": start_time_us, "writer_pid": writer_pid,
        "state": state, "agent_name": agent_name, "generation": generation,
        "refused": refused, "areas": areas,
    }


def generation_now(fd):
    return struct.unpack("<Q", pread_all(fd, 8, 104))[0]


def writer_alive(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def copy_latest(fd):
    """("Copying the latest payload") -> (latest generation L, area index, payload bytes), or
    (0, None, None) when nothing was published."""
    for _attempt in range(64):
        g1 = generation_now(fd)
        latest = g1
        if g1 % 2:
            if writer_alive(fd):
                continue
            latest = g1 - 1  # a writer that died: the area before, compared with G1 still
        if latest == 0:
            if generation_now(fd) != g1:
                continue
            return 0, None, None
        h = read_header(fd)
        size = os.fstat(fd).st_size
        carrying = [i for i, a in enumerate(h["areas"]) if a[3] == latest]
        payload = None
        index = carrying[0] if len(carrying) == 1 else None
        if index is not None:
            offset, capacity, length = h["areas"][index][:3]
            if (length <= capacity <= MAX_PAYLOAD and offset >= HEADER_SIZE and offset <= size
                    and capacity <= size - offset):
                payload = pread_all(fd, length, offset)
        if generation_now(fd) != g1:
            continue
        if payload is None:
            raise Damaged(f"no whole area carries generation {latest}")
        return latest, index, payload
    raise Damaged("busy: the generation kept moving")


class Payload:
    """The payload's fields in order ("The payload: an encoded snapshot")."""

    def __init__(self, data):
        self.data = data
        self.at = 0

    def take(self, n):
        if self.at + n > len(self.data):
            raise Damaged(f"payload too short at byte {self.at}")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def u8(self):
        return self.take(1)[0]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def i8(self):
        return struct.unpack("<b", self.take(1))[0]

    def i32(self):
        return struct.unpack("<i", self.take(4))[0]

    def double(self):
        return struct.unpack("<d", self.take(8))[0]

    def string(self):
        return self.take(self.u32())


def quoted(raw):
    """Bytes as the listing shows them: in quotes, printable ASCII as itself except \\ and ",
    anything else \\xNN."""
    out = []
    for b in raw:
        if b in (0x5C, 0x22):
            out.append("\\" + chr(b))
        elif 0x20 <= b <= 0x7E:
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
    return '"' + "".join(out) + '"'


def scaled(value, decimals):
    """An integer in units of 10^-decimals, as the exact decimal it stands for, with all its
    decimals (40 with 6 decimals is 0.000040)."""
    return format(Decimal(value).scaleb(-decimals), "f")


def bound_text(bound, decimals):
    """A bound (a double in units of 10^-decimals) as the exact decimal it stands for, without
    trailing zeros (10 with 6 decimals is 0.00001)."""
    text = scaled(Decimal(bound), decimals)
    return text.rstrip("0").rstrip(".") if "." in text else text


def decode(data):
    """The listing lines of a payload."""
    p = Payload(data)
    lines = []
    if p.take(4) != b"XSNP":
        raise Damaged("payload magic is not XSNP")
    version = p.u32()
    labels = [(p.string(), p.string()) for _ in range(p.u32())]
    lines.append(f"snapshot version={version} labels=" +
                 ",".join(f"{n.decode()}={quoted(v)}" for n, v in labels))
    for _ in range(p.u32()):
        name = p.string()
        help_text = p.string()
        kind = TYPES[p.u8()]
        decimals = p.u8()
        fixed = p.u8()
        unit = p.string()
        label_names = [p.string() for _ in range(p.u32())]
        bounds = [p.double() for _ in range(p.u32())]
        # Version 3: whether the series keep native buckets, and from which schema.
        native, native_schema = (p.u8(), p.i8()) if version >= 3 else (0, 0)
        if native not in (0, 1) or not -4 <= native_schema <= 8:
            raise Damaged(f"native={native} native_schema={native_schema}")
        # This file predates the unit of this one family (issue 29: bytes now): not asserted.
        unit_text = "?" if name == b"xtel_transfer_bytes_total" else quoted(unit)
        lines.append(f"family {name.decode()} type={kind} decimals={decimals} fixed_labels={fixed}"
                     f" unit={unit_text} label_names=" + ",".join(n.decode() for n in label_names)
                     + (f" native_schema={native_schema}" if native else ""))
        lines.append(f"  help {quoted(help_text)}")
        if bounds:
            # Bounds are in the family's units, like the values: shown divided by 10^decimals.
            lines.append("  bounds " + " ".join(bound_text(b, decimals) for b in bounds))
        for _ in range(p.u32()):
            values = [p.string() for _ in range(p.u32())]
            value, total, count = p.u64(), p.u64(), p.u64()
            buckets = [p.u64() for _ in range(p.u32())]
            lines.append("  series " + ",".join(
                f"{n.decode()}={quoted(v)}" for n, v in zip(label_names, values)) +
                f" value={scaled(value, decimals)} sum={scaled(total, decimals)} count={count}"
                " buckets=" + ",".join(str(b) for b in buckets))
            for i in range(p.u32()):
                ex_name, ex_value = p.string(), p.string()
                ex_observed, ex_us = p.u64(), p.u64()
                # Version 2: the transfer's trace and span ids, all zero for none.
                ids = (p.take(16), p.take(8)) if version >= 2 else (bytes(16), bytes(8))
                if ex_value:
                    shown = "".join(f" {n}={i.hex()}" for n, i in zip(("trace_id", "span_id"), ids)
                                    if any(i))
                    lines.append(f"    exemplar {i} {ex_name.decode()}={quoted(ex_value)} "
                                 f"value={scaled(ex_observed, decimals)} timestamp_us={ex_us}"
                                 + shown)
            if native:
                schema, first, zero = p.i8(), p.i32(), p.u64()
                native_buckets = [p.u64() for _ in range(p.u32())]
                # The page's rules a reader relies on: every observation in one bucket.
                if (not -4 <= schema <= native_schema or len(native_buckets) > 160
                        or sum(native_buckets) + zero != count):
                    raise Damaged(f"native buckets of schema {schema}: {native_buckets}")
                lines.append(f"    native schema={schema} first={first} zero_count={zero} "
                             "buckets=" + ",".join(str(b) for b in native_buckets))
    if p.at != len(data):
        raise Damaged(f"{len(data) - p.at} bytes after the last family")
    return lines


def listing(path):
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Damaged("not a regular file")
        h = read_header(fd)
        if (h["magic"], h["version"], h["header_size"]) != (b"XTELNODE", 1, HEADER_SIZE):
            raise Damaged("not a version 1 node file")
        if h["state"] not in (1, 2):
            raise Damaged(f"state {h['state']}")
        lines = [f"header version={h['version']} header_size={h['header_size']} "
                 f"created_us={h['created_us']} start_time_us={h['start_time_us']} "
                 f"writer_pid={h['writer_pid']} state={h['state']} "
                 f"agent_name={quoted(h['agent_name'])} generation={h['generation']} "
                 f"refused={h['refused']}"]
        for i, (offset, capacity, length, generation, published_us) in enumerate(h["areas"]):
            lines.append(f"area {i} offset={offset} capacity={capacity} length={length} "
                         f"generation={generation} published_us={published_us}")
        latest, index, payload = copy_latest(fd)
        if index is None:
            return lines + ["latest none"]
        lines.append(f"latest number={latest // 2} area={index} "
                     f"published_us={h['areas'][index][4]}")
        return lines + decode(payload)
    finally:
        os.close(fd)


def check(source_dir):
    data = os.path.join(source_dir, "tests", "data", "node")
    lines = listing(os.path.join(data, "prefill-0.metrics"))
    failures = []

    def expect(what, ok):
        if not ok:
            failures.append(what)

    with open(os.path.join(data, "prefill-0.expected"), encoding="ascii") as f:
        expected = f.read().splitlines()
    expect("the listing is tests/data/node/prefill-0.expected, line for line", lines == expected)
    for i, (got, want) in enumerate(zip(lines, expected)):
        if got != want:
            print(f"line {i + 1}:\n  read:     {got}\n  expected: {want}", file=sys.stderr)
            break
    if len(lines) != len(expected):
        print(f"{len(lines)} lines read, {len(expected)} expected", file=sys.stderr)
    # Values written by hand from the generator's inputs and the page, besides the file.
    text = "\n".join(lines) + "\n"
    for want in [
        # The writer closed the file after two publishes: generation 4, area 1 the latest.
        " state=2 agent_name=\"prefill-0\" generation=4 refused=0\n",
        "area 0 offset=256 capacity=65536 ",
        "area 1 offset=65792 capacity=65536 ",
        "latest number=2 area=1 ",
        "snapshot version=1 labels=agent_name=\"prefill-0\"\n",
        # Latency kept in microseconds (decimals 6) over the bounds 10, 250 and 5000 µs: shown
        # in seconds, bounds included. Writes of 40 and 1848 µs fell in the second and third
        # buckets, a read of 9000 µs above them all (only in the count).
        "family xtel_transfer_duration_seconds type=histogram decimals=6 fixed_labels=0 "
        "unit=\"seconds\" ",
        "  bounds 0.00001 0.00025 0.005\n",
        " value=0.000000 sum=0.001888 count=2 buckets=0,1,1\n",
        " value=0.000000 sum=0.009000 count=1 buckets=0,0,0\n",
        "exemplar 1 request_id=\"req-1\" value=0.000040 timestamp_us=1767225600000000\n",
        "exemplar 2 request_id=\"req-2\" value=0.001848 timestamp_us=1767225600001000\n",
        # The same latencies in the NIXL set: microseconds, decimals 0, the bounds as given.
        "family agent_xfer_time_us type=histogram decimals=0 ",
        "  bounds 10 250 5000\n",
        " value=0 sum=10888 count=3 buckets=0,1,1\n",
        # The NIXL set's bytes, without decimals.
        "family agent_tx_bytes_total type=counter decimals=0 ",
        " value=1114112 sum=0 count=0 buckets=\n",
        " value=4096 sum=0 count=0 buckets=\n",
        " value=1048576 sum=0 count=0 buckets=\n",
    ]:
        expect(f"the listing holds {want!r}", want in text)
    # One agent's payload written as versions 1, 2 and 3 (tests/golden): the same listing but
    # for the version (its histograms are classic: no native buckets to list).
    golden = os.path.join(source_dir, "tests", "golden")
    listed = []
    for name in ("node_payload_v1.bin", "node_payload_v2.bin", "node_payload.bin"):
        with open(os.path.join(golden, name), "rb") as f:
            listed.append(decode(f.read()))
    # Versions 1 and 2 were written before this release's renames: compared under the new names.
    written = [with_new_names(lines) for lines in listed[:2]] + [family_blocks(listed[2])]
    for version, lines in enumerate(listed, 1):
        expect(f"golden payload {version} is version {version}",
               lines[0].startswith(f"snapshot version={version} "))
        expect(f"version {version} of one payload lists as version 1 does, renamed",
               written[version - 1] == written[0] and len(lines) > 10)
    failures.extend(check_native(golden))
    failures.extend(check_page_versions(source_dir))
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


def check_page_versions(source_dir):
    """What the page says of the payload's versions agrees with its own Payload table (and so
    with the golden payloads above): its introduction named version 1 where the table says 3,
    and marked the exemplar's trace and span ids "(version 2 only)" though version 3 has them.
    Returns what failed."""
    with open(os.path.join(source_dir, "docs", "node-format.md"), encoding="utf-8") as f:
        page = f.read()
    current = re.search(r"^\| 4 \| 4 \| version \| u32, `(\d+)`", page, re.M)
    if current is None:
        return ["the Payload table gives the payload's version"]
    version = int(current.group(1))
    failures = []
    intro = re.search(r"the\s+payload\s+by\s+its\s+own\s+\((\d+)", page)
    if intro is None or int(intro.group(1)) != version:
        failures.append(f"the introduction names the payload's version {version}")
    for only in re.findall(r"\(version (\d+) only\)", page):
        if int(only) != version:
            failures.append(f"no field is of version {only} only: version {version} is read")
    return failures


def native_index(value, schema):
    """The page's native bucket of a value as shown (> 0): ceil(log2(value) * 2^schema)."""
    return math.ceil(math.log2(value) * 2 ** schema)


def native_indexes(line):
    """The indexes of the non-empty buckets of a listing's `native` line."""
    fields = dict(f.split("=", 1) for f in line.split()[1:])
    counts = [int(c) for c in fields["buckets"].split(",") if c]
    return [int(fields["first"]) + k for k, c in enumerate(counts) if c]


def check_native(golden):
    """The same agent's payload with native histograms only (tests/golden), against the
    fixed transfers' latencies and the page's bucket rule; returns what failed."""
    with open(os.path.join(golden, "node_payload_native.bin"), "rb") as f:
        lines = decode(f.read())
    failures = []

    def family_lines(name):
        start = next((i for i, l in enumerate(lines) if l.startswith(f"family {name} ")), None)
        if start is None:
            return []
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("family ")),
                   len(lines))
        return lines[start:end]

    if not lines[0].startswith("snapshot version=3 "):
        failures.append("tests/golden/node_payload_native.bin is version 3")
    # The agent's successful timed transfers took 40 and 900 us (writes to decode-0) and 15 us
    # (a read from decode-1); at schema 3, seconds as shown (decimals 6) in xtel's family,
    # microseconds in NIXL's. No classic bounds: no bounds line.
    for name, scale, wanted in [
            ("xtel_transfer_duration_seconds", 1e-6, [[40, 900], [15]]),
            ("agent_xfer_time_us", 1, [[15, 40, 900]]),
            ("agent_xfer_post_time_us", 1, [[1, 2, 3]])]:
        block = family_lines(name)
        natives = [l for l in block if l.startswith("    native ")]
        got = [native_indexes(l) for l in natives]
        want = [[native_index(us * scale, 3) for us in values] for values in wanted]
        checks = [
            (f"{name} keeps native buckets from schema 3", block and block[0].endswith(
                " native_schema=3")),
            (f"{name} has no classic bounds", not any(l.startswith("  bounds ") for l in block)),
            (f"{name}'s non-empty native buckets are {want}", sorted(got) == sorted(want)),
            (f"{name}'s series are at schema 3 without zeros", natives and all(
                " schema=3 " in l and " zero_count=0 " in l for l in natives)),
        ]
        failures += [what for what, ok in checks if not ok]
    # By hand, from the page: 40 us is 2^-14.6 s, in bucket ceil(-14.6 * 8) = -116; 900 us in
    # -80; both in one series, so its buckets run from -116 to -80.
    want = "    native schema=3 first=-116 zero_count=0 buckets=1," + "0," * 35 + "1"
    if want not in lines:
        failures.append(f"the listing holds {want!r}")
    return failures


# The families renamed in this release (docs/metrics.md, "Renamed in this release"), old name
# -> new name, and the one HELP that changed with its name.
RENAMED = {
    "xtel_exporter_up": "xtel_telemetry_exporter_up",
    "xtel_exporter_events_lost_total": "xtel_telemetry_exporter_events_lost_total",
    "xtel_prometheus_ignored_events_total": "xtel_telemetry_events_unmapped_total",
}
RENAMED_HELP = {
    "Events the Prometheus exporter did not fold into a family":
        "Events the agent's metric model mapped to no family",
}


def family_blocks(lines):
    """A listing's families, each its lines, in name order (a rename moves a family)."""
    blocks = []
    for line in lines[1:]:
        if line.startswith("family ") or not blocks:
            blocks.append([line])
        else:
            blocks[-1].append(line)
    return sorted(blocks)


def with_new_names(lines):
    """family_blocks of a listing written before the renames, as if written after them."""
    renamed = []
    for line in lines:
        if line.startswith("family "):
            name, _, rest = line[len("family "):].partition(" ")
            line = f"family {RENAMED.get(name, name)} {rest}"
        elif line.startswith("  help "):
            for old, new in RENAMED_HELP.items():
                line = line.replace(old, new)
        renamed.append(line)
    return family_blocks(renamed)


def main(argv):
    if len(argv) == 2 and argv[0] == "--print":
        sys.stdout.write("\n".join(listing(argv[1])) + "\n")
        return 0
    if len(argv) != 1:
        sys.stderr.write(__doc__)
        return 64
    return check(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
