#pragma once
/// What an agent records with a transfer besides its bytes and times (private to basic_agent):
/// the transfer's attributes, filled when it is created or when a notification tells of one,
/// and for a notified transfer the request id that carries the initiator's trace. Slow paths,
/// once per created transfer or per notification; inline, as they were inside the class, so
/// that what the compiler can inline into basic_agent is unchanged.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "xtel/agent/agent.hpp"
#include "xtel/core/ascii.hpp"
#include "xtel/core/label_table.hpp"
#include "xtel/core/transfer.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/metrics/attributes.hpp"

namespace xtel::detail {

/// The memory kind every descriptor names; unknown when they differ or there are none.
inline memory_kind memory_of(std::span<const descriptor> d) noexcept {
    if (d.empty()) {
        return memory_kind::unknown;
    }
    for (const descriptor& x : d) {
        if (x.kind != d.front().kind) {
            return memory_kind::unknown;
        }
    }
    return d.front().kind;
}

/// What every transfer of an agent shares: the backend, and the GPUs of this host (computed
/// once per process; unknown without CUDA devices).
inline transfer_attributes agent_base_attributes(label_table& labels) {
    transfer_attributes a;
    a.backend = labels.intern("ucx");
    if (const std::string& gpu = metrics::local_gpu_identifier(); !gpu.empty()) {
        a.gpu = labels.intern(gpu);
    }
    return a;
}

/// A new transfer's attributes, at create time (it interns the peer's name).
inline transfer_attributes created_transfer_attributes(const transfer_attributes& base,
                                                       label_table& labels,
                                                       transfer_op op,
                                                       std::span<const descriptor> local,
                                                       std::span<const descriptor> remote,
                                                       std::string_view remote_agent) {
    transfer_attributes a = base;
    a.remote_agent = labels.intern(remote_agent);
    a.op = op;
    a.local_memory = memory_of(local);
    a.remote_memory = memory_of(remote);
    return a;
}

/// A notified transfer's attributes: the initiator as its remote agent (0, "not known", when
/// there is no memory for its name), its op, and memory kinds the notification does not say.
inline transfer_attributes notified_transfer_attributes(const transfer_attributes& base,
                                                        label_table& labels,
                                                        const notification& n) noexcept {
    transfer_attributes attrs = base;
    attrs.op = n.op;
    attrs.local_memory = memory_kind::unknown;
    attrs.remote_memory = memory_kind::unknown;
    try {
        attrs.remote_agent = labels.intern(n.remote_agent);
    } catch (...) {
        attrs.remote_agent = 0;
    }
    return attrs;
}

/// The request id a notified transfer is staged with, written into `id`: the initiator's
/// trace as "00-<trace>-<span>-01", or the trace id alone when the initiator's id named no
/// span, so that the flusher rebuilds the context the initiator's span has; empty when the
/// notification carried no trace.
inline std::string_view notified_request_id(const notification& n,
                                            std::span<char, max_request_id> id) noexcept {
    std::size_t length = 0;
    if (n.traced) {
        const auto put = [&](std::span<const std::uint8_t> bytes) {
            ascii::write_hex(bytes, id.data() + length);
            length += 2 * bytes.size();
        };
        bool parent = false;
        for (const std::uint8_t b : n.span_id) {
            parent = parent || b != 0;
        }
        if (parent) {
            id[length++] = '0';
            id[length++] = '0';
            id[length++] = '-';
        }
        put(n.trace_id);
        if (parent) {
            id[length++] = '-';
            put(n.span_id);
            for (const char c : {'-', '0', '1'}) {
                id[length++] = c;
            }
        }
    }
    return {id.data(), length};
}

}  // namespace xtel::detail
