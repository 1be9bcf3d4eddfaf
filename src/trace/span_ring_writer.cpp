#include <fmt/format.h>

#include "trace/span_ring_file.hpp"

namespace xtel::trace::span_ring {

writer::writer(const std::filesystem::path& dir,
               std::string_view agent_name,
               std::uint32_t slot_count)
    : owned_file_writer(
          detail::file_kind,
          xtel::detail::agent_file_path(detail::file_kind, dir, agent_name, file_suffix)),
      slot_count_(slot_count) {
    if (slot_count == 0 || slot_count > max_slot_count) {
        throw config_error(fmt::format("span ring slot count {} is invalid: expected 1 to {}",
                                       slot_count, max_slot_count));
    }
    file_size_ = detail::slot_offset(slot_count);

    auto h = xtel::detail::new_owned_header<file_header>(detail::file_kind, agent_name);
    h.slot_size = sizeof(slot);
    h.slot_count = slot_count;
    // posix_fallocate reserves the slots zeroed: sequence 0, no span yet.
    create(agent_name, file_size_, std::as_bytes(std::span(&h, 1)));
}

bool writer::write(std::span<const span_record> spans) noexcept {
    if (failed()) {
        return false;
    }
    const xtel::detail::owned_writer file = owned();
    // Once a batch, not once a span: the check is an fstat and a read of the magic.
    if (!file.intact(file_size_)) {
        return false;
    }
    for (const span_record& r : spans) {
        // Per slot, a seqlock: odd while the span is written, even once it is whole
        // (docs/trace-format.md, Writing). A reader that copied the slot while it was odd, or
        // saw the number move, knows its copy may be torn and counts the span lost.
        const std::uint64_t n = head_ + 1;
        const std::uint64_t at = detail::slot_offset((n - 1) % slot_count_);
        const std::uint64_t writing = 2 * n - 1;
        const std::uint64_t whole = 2 * n;
        if (!file.write_at(&writing, sizeof writing, at) ||
            !file.write_at(&r, sizeof r, at + offsetof(slot, record)) ||
            !file.write_at(&whole, sizeof whole, at)) {
            return false;
        }
        head_ = n;
    }
    // The head last: a reader never reads past it, so it never waits on a slot being written.
    if (!spans.empty() && !file.write_at(&head_, sizeof head_, offsetof(file_header, head))) {
        return false;
    }
    written_.fetch_add(spans.size(), std::memory_order_relaxed);
    return true;
}

}  // namespace xtel::trace::span_ring
