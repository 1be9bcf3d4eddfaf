#pragma once
// --user: xtel-exporter started as root binds its port, then runs as an unprivileged account.
// That account must be able to read the agents' node files, which are 0600: the agents' own
// user (or one of the same uid).

#include <sys/types.h>

#include <string>
#include <string_view>

namespace xtel::xtel_exporter {

struct account {
    std::string name;
    uid_t uid = 0;
    gid_t gid = 0;
};

/// The account `name` names, if this process may become it: any as root, else only the one it
/// runs as already. Throws usage_error: no such account, or not root.
account account_to_run_as(std::string_view name);

/// Runs the whole process (every thread) as `a` from now on: its groups, its group, then its
/// user, and checks that root cannot be regained. Nothing when it runs as `a` already. Throws
/// error.
void run_as(const account& a);

}  // namespace xtel::xtel_exporter
