#include "transfer_table.hpp"

#include <cstring>
#include <utility>

namespace xtel::python {

void kept_id::set(std::string_view id, bool traceparent) noexcept {
    const std::string_view clipped = clip_request_id(id);
    std::memcpy(bytes_, clipped.data(), clipped.size());
    size_ = static_cast<std::uint8_t>(clipped.size());
    traceparent_ = traceparent;
}

void transfer_table::add_dlist(std::uint64_t handle, tracked_dlist list) {
    if (dlists_.size() >= max_entries && !dlists_.contains(handle)) {
        dlists_.erase(dlists_.begin());
    }
    dlists_.insert_or_assign(handle, std::move(list));
}

const tracked_dlist* transfer_table::dlist(std::uint64_t handle) const noexcept {
    const auto it = dlists_.find(handle);
    return it == dlists_.end() ? nullptr : &it->second;
}

tracked_transfer& transfer_table::add(std::uint64_t handle) {
    if (const auto it = transfers_.find(handle); it != transfers_.end()) {
        it->second = tracked_transfer{};  // NIXL reused the handle's address
        return it->second;
    }
    if (transfers_.size() >= max_entries) {
        release(transfers_.begin()->first);
    }
    if (spare_.empty()) {
        return transfers_.try_emplace(handle).first->second;
    }
    transfers::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = handle;
    node.mapped() = tracked_transfer{};
    return transfers_.insert(std::move(node)).position->second;
}

tracked_transfer* transfer_table::find(std::uint64_t handle) noexcept {
    const auto it = transfers_.find(handle);
    return it == transfers_.end() ? nullptr : &it->second;
}

void transfer_table::release(std::uint64_t handle) noexcept {
    const auto it = transfers_.find(handle);
    if (it == transfers_.end()) {
        return;
    }
    transfers::node_type node = transfers_.extract(it);
    if (spare_.size() < max_spare) {
        try {
            spare_.push_back(std::move(node));  // reserved: does not allocate
        } catch (...) {
            // The node is freed with `node`: only its reuse is lost.
        }
    }
}

namespace {

namespace nb = nanobind;

bool ascii(const char* data, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
        if (static_cast<unsigned char>(data[i]) >= 0x80) {
            return false;
        }
    }
    return true;
}

/// `s`, a str, as UTF-8 into `out`; false (a Python error set) when it has none.
bool set_from_str(kept_id& out, PyObject* s) {
    Py_ssize_t n = 0;
    const char* data = PyUnicode_AsUTF8AndSize(s, &n);
    if (data == nullptr) {
        return false;
    }
    out.set({data, static_cast<std::size_t>(n)}, false);
    return true;
}

std::uint64_t length_at(const std::vector<std::uint64_t>& lengths, PyObject* index) {
    const Py_ssize_t i = PyNumber_AsSsize_t(index, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) {
        throw nb::python_error();
    }
    if (i < 0 || static_cast<std::size_t>(i) >= lengths.size()) {
        throw nb::index_error("a descriptor index outside its prepped list");
    }
    return lengths[static_cast<std::size_t>(i)];
}

}  // namespace

void set_request_of(kept_id& out, nb::handle notif) {
    PyObject* o = notif.ptr();
    if (o == Py_None) {
        out.clear();
        return;
    }
    const char* data = nullptr;
    Py_ssize_t n = 0;
    if (PyBytes_Check(o)) {
        data = PyBytes_AS_STRING(o);
        n = PyBytes_GET_SIZE(o);
    } else if (PyByteArray_Check(o)) {
        data = PyByteArray_AS_STRING(o);
        n = PyByteArray_GET_SIZE(o);
    } else if (PyUnicode_Check(o)) {
        if (PyUnicode_GET_LENGTH(o) == 0) {
            out.clear();
        } else if (!set_from_str(out, o)) {
            throw nb::python_error();
        }
        return;
    } else {
        const int truth = PyObject_IsTrue(o);
        if (truth < 0) {
            throw nb::python_error();
        }
        if (truth == 0) {
            out.clear();
            return;
        }
        out.set(text_of(notif), false);
        return;
    }
    if (n == 0) {
        out.clear();
    } else if (ascii(data, static_cast<std::size_t>(n))) {
        out.set({data, static_cast<std::size_t>(n)}, false);
    } else {
        out.set(text_of(notif), false);
    }
}

std::string text_of(nb::handle value) {
    PyObject* o = value.ptr();
    if (PyBytes_Check(o) || PyByteArray_Check(o)) {
        const char* data = PyBytes_Check(o) ? PyBytes_AS_STRING(o) : PyByteArray_AS_STRING(o);
        const Py_ssize_t n = PyBytes_Check(o) ? PyBytes_GET_SIZE(o) : PyByteArray_GET_SIZE(o);
        if (ascii(data, static_cast<std::size_t>(n))) {
            return std::string(data, static_cast<std::size_t>(n));
        }
        const nb::object s = nb::steal(PyUnicode_DecodeUTF8(data, n, "replace"));
        if (!s.is_valid()) {
            throw nb::python_error();
        }
        return text_of(s);
    }
    const nb::object s = PyUnicode_Check(o) ? nb::borrow(o) : nb::steal(PyObject_Str(o));
    Py_ssize_t n = 0;
    const char* data = s.is_valid() ? PyUnicode_AsUTF8AndSize(s.ptr(), &n) : nullptr;
    if (data == nullptr) {
        throw nb::python_error();
    }
    return std::string(data, static_cast<std::size_t>(n));
}

std::uint64_t bytes_at(const std::vector<std::uint64_t>& lengths,
                       nb::handle indices,
                       std::uint64_t& count) {
    PyObject* o = indices.ptr();
    std::uint64_t bytes = 0;
    if (PyList_Check(o) || PyTuple_Check(o)) {
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        PyObject** items = PySequence_Fast_ITEMS(o);
        for (Py_ssize_t i = 0; i < n; ++i) {
            bytes += length_at(lengths, items[i]);
        }
        count = static_cast<std::uint64_t>(n);
        return bytes;
    }
    const nb::object it = nb::steal(PyObject_GetIter(o));
    if (!it.is_valid()) {
        throw nb::python_error();
    }
    count = 0;
    while (true) {
        const nb::object item = nb::steal(PyIter_Next(it.ptr()));
        if (!item.is_valid()) {
            if (PyErr_Occurred()) {
                throw nb::python_error();
            }
            return bytes;
        }
        bytes += length_at(lengths, item.ptr());
        ++count;
    }
}

}  // namespace xtel::python
