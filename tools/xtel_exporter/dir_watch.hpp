#pragma once
// Tells xtel-exporter promptly when the files it serves (node files, notices, span rings) arrive
// in its directory or leave it (inotify), so that a new agent, or one that stopped, shows in the
// next push and in the agents gauge, and its spans are read, without waiting for the rescan.
// The rescan stays: inotify does not see changes made on another machine of a shared file
// system, and the watch can be lost.

#include <filesystem>

#include "xtel/node/scanner.hpp"

namespace xtel::xtel_exporter {

class dir_watch {
  public:
    /// Watches the directory `files` lists, for the names it lists (which outlives this).
    /// When it cannot (no inotify, out of watches, a directory it cannot read),
    /// logs why once and watching() is false.
    explicit dir_watch(const node::scanner& files);
    ~dir_watch();

    dir_watch(const dir_watch&) = delete;
    dir_watch& operator=(const dir_watch&) = delete;

    bool watching() const noexcept { return fd_ >= 0; }
    /// To poll for reading; -1 when not watching.
    int fd() const noexcept { return fd_; }

    /// Reads the events that came; true when one may have changed what is to be served: a
    /// file the scanner lists moved in or out, deleted or closed by a writer, lost events, or the
    /// watch itself gone (logged once; watching() is false from then on). Never blocks.
    bool changed() noexcept;

  private:
    void stop() noexcept;

    const node::scanner& files_;
    std::filesystem::path dir_;
    int fd_ = -1;
};

}  // namespace xtel::xtel_exporter
