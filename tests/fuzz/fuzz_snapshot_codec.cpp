// Fuzz target: decode arbitrary bytes as an encoded snapshot (the node snapshot file's payload,
// src/metrics/snapshot_codec.cpp). Any input must end in snapshot_decode_error or a snapshot,
// never a crash, an out-of-bounds read or an allocation the input does not justify. Besides
// those, a finding is an accepted input that does not encode back to the same bytes: the
// decoder accepts only the one encoding encode_snapshot gives each snapshot.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "xtel/metrics/snapshot_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
    xtel::metrics::snapshot s;
    try {
        s = xtel::metrics::decode_snapshot(input);
    } catch (const xtel::metrics::snapshot_decode_error&) {
        return 0;
    }
    std::vector<std::byte> again;
    xtel::metrics::encode_snapshot(s, again);
    if (!std::equal(again.begin(), again.end(), input.begin(), input.end())) {
        std::fprintf(stderr, "fuzz_snapshot_codec: an accepted input encodes to other bytes\n");
        std::abort();
    }
    return 0;
}
