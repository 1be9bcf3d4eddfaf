// Local memory: registering the user's, allocating memory UCX can share, deregistering; and
// whether this build and machine can register GPU memory.

#include <iterator>

#include "agent/ucx/backend_impl.hpp"
#include "core/cuda_runtime.hpp"

namespace xtel::detail {

using namespace ucx;

ucx_backend::impl::local_region* ucx_backend::impl::find_local(const descriptor& d) noexcept {
    auto it = local.upper_bound(d.address);
    if (it == local.begin()) {
        return nullptr;
    }
    --it;
    const descriptor& r = it->second.desc;
    const bool inside = d.address >= r.address && d.end() <= r.end() && d.end() >= d.address;
    return inside && r.kind == d.kind && r.device == d.device ? &it->second : nullptr;
}

status ucx_backend::impl::check_new_region(const descriptor& d) const {
    if (d.length == 0 || d.address == 0 || d.end() < d.address) {
        return fail(status_code::invalid_argument,
                    "agent '{}': cannot register {}: expected a non-null address and a "
                    "length of at least 1 byte that does not wrap around",
                    name, describe(d));
    }
    if (d.kind != memory_kind::dram && d.kind != memory_kind::vram) {
        return fail(status_code::invalid_argument,
                    "agent '{}': memory kind {} is unknown (expected DRAM or VRAM)", name,
                    static_cast<int>(d.kind));
    }
    auto it = local.lower_bound(d.address);
    if (it != local.end() && it->second.desc.address < d.end()) {
        return fail(status_code::invalid_argument,
                    "agent '{}': {} overlaps the registered region {}", name, describe(d),
                    describe(it->second.desc));
    }
    if (it != local.begin() && std::prev(it)->second.desc.end() > d.address) {
        return fail(status_code::invalid_argument,
                    "agent '{}': {} overlaps the registered region {}", name, describe(d),
                    describe(std::prev(it)->second.desc));
    }
    return {};
}

status ucx_backend::impl::map(const descriptor& d, bool allocate, descriptor& out) {
    ucp_mem_map_params_t p{};
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    p.address = allocate ? nullptr : d.pointer();
    p.length = d.length;
    if (allocate) {
        p.field_mask |= UCP_MEM_MAP_PARAM_FIELD_FLAGS;
        p.flags = UCP_MEM_MAP_ALLOCATE;
    }
    if (d.kind == memory_kind::vram) {
        p.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
        p.memory_type = UCS_MEMORY_TYPE_CUDA;
    }
    local_region region;
    region.desc = d;
    region.allocated = allocate;
    ucs_status_t st = ::ucp_mem_map(context, &p, &region.memh);
    if (st != UCS_OK) {
        return fail(status_code::backend_error, "agent '{}': UCX could not {} {}: {}", name,
                    allocate ? "allocate" : "register", describe(d), ::ucs_status_string(st));
    }
    if (allocate) {
        ucp_mem_attr_t attr{};
        attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
        st = ::ucp_mem_query(region.memh, &attr);
        if (st != UCS_OK) {
            ::ucp_mem_unmap(context, region.memh);
            return fail(status_code::backend_error,
                        "agent '{}': UCX allocated {} bytes but would not say where: {}", name,
                        d.length, ::ucs_status_string(st));
        }
        region.desc.address = reinterpret_cast<std::uintptr_t>(attr.address);
    }
    void* packed = nullptr;
    std::size_t packed_size = 0;
    st = ::ucp_rkey_pack(context, region.memh, &packed, &packed_size);
    if (st != UCS_OK) {
        ::ucp_mem_unmap(context, region.memh);
        return fail(status_code::backend_error,
                    "agent '{}': UCX could not pack a remote key for {}: {}", name, describe(d),
                    ::ucs_status_string(st));
    }
    const auto* b = static_cast<const std::byte*>(packed);
    region.rkey.assign(b, b + packed_size);
    ::ucp_rkey_buffer_release(packed);
    out = region.desc;
    registered += d.length;
    local.emplace(region.desc.address, std::move(region));
    return {};
}

status ucx_backend::impl::register_memory(const descriptor& d) {
    if (status st = check_new_region(d); !st.ok()) {
        return st;
    }
    if (d.kind == memory_kind::vram) {
        if (status st = vram_support(); !st.ok()) {
            return fail(status_code::not_supported, "agent '{}': cannot register {}: {}", name,
                        describe(d), st.message());
        }
    }
    descriptor out;
    return map(d, false, out);
}

status ucx_backend::impl::allocate_memory(std::uint64_t bytes, descriptor& out) {
    if (bytes == 0 || bytes > (std::uint64_t{1} << 46)) {
        return fail(status_code::invalid_argument,
                    "agent '{}': cannot allocate {} bytes (expected 1 byte to 64 TiB)", name,
                    bytes);
    }
    const descriptor d{0, bytes, memory_kind::dram, 0};
    return map(d, true, out);
}

status ucx_backend::impl::deregister_memory(const descriptor& d) {
    const auto it = local.find(d.address);
    if (it == local.end() || it->second.desc != d) {
        return fail(status_code::not_found,
                    "agent '{}': {} is not a registered region (deregister exactly the "
                    "descriptor that was registered)",
                    name, describe(d));
    }
    if (it->second.users > 0) {
        return fail(status_code::busy,
                    "agent '{}': {} is used by {} operation(s) of live transfers; release "
                    "them first",
                    name, describe(d), it->second.users);
    }
    ::ucp_mem_unmap(context, it->second.memh);
    registered -= d.length;
    local.erase(it);
    return {};
}

// ---- the public object --------------------------------------------------------------------

status ucx_backend::register_memory(const descriptor& region) {
    return impl_->register_memory(region);
}

status ucx_backend::allocate_memory(std::uint64_t bytes, descriptor& out) {
    return impl_->allocate_memory(bytes, out);
}

status ucx_backend::deregister_memory(const descriptor& region) {
    return impl_->deregister_memory(region);
}

std::uint64_t ucx_backend::registered_bytes() const noexcept {
    return impl_->registered;
}

status vram_support() {
    std::string why;
    if (cuda::device_count(why) == 0) {
        return status(status_code::not_supported, why);
    }
    return {};
}

}  // namespace xtel::detail
