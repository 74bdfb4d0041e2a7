#include "call/call_plan.hpp"

#include "common/demangle.hpp"
#include "common/object_locator.hpp"
#include "common/posix.hpp"
#include "registry/function_table.hpp"
#include "spawn/start_worker.hpp"

#include <mpify/error.hpp>

#include <dlfcn.h>
#include <signal.h>

#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::string unregistered_message(const void* address) {
    Dl_info info{};
    std::string name = "the function";
    if (::dladdr(address, &info) != 0 && info.dli_sname != nullptr) name = "'" + demangle(info.dli_sname) + "'";
    return fmt::format("mpify: {} is not registered, so other processes cannot find it. Add "
                       "MPIFY_REGISTER(<its name>); at namespace scope next to its definition, in the "
                       "program or shared library that defines it.",
                       name);
}

std::string not_on_other_machines_message(const std::string& label, const std::string& function_name) {
    return fmt::format("{}: {} is compiled into the program itself, which is not on the other machines; put it in a "
                       "shared library (load_source, or a library the program links): it travels to machines that "
                       "lack it",
                       label, function_name);
}

namespace {

void check_options(const Options& options, int n, const std::string& label) {
    if (n < 1) throw UsageError(fmt::format("{}: n must be at least 1 (it is {})", label, n));
    if (options.caller_rank && (*options.caller_rank < 0 || *options.caller_rank >= n))
        throw UsageError(fmt::format("{}: caller_rank is {}, outside [0, {}); use a rank in that range, or "
                                     "std::nullopt for a caller that only waits",
                                     label, *options.caller_rank, n));
    if (options.timeout.count() < 0) throw UsageError(fmt::format("{}: timeout is negative", label));
    for (int rank : options.output_ranks)
        if (rank < 0 || rank >= n)
            throw UsageError(fmt::format("{}: Options::output_ranks names rank {}, outside [0, {}): name ranks of "
                                         "the call, or leave it empty for every rank",
                                         label, rank, n));
    for (const auto& [name, value] : options.env) {
        // An environment entry is a C string "NAME=value": '=' ends the name, NUL the entry.
        if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos)
            throw UsageError(fmt::format("{}: Options::env: '{}' is not a valid environment variable name (it "
                                         "must be non-empty, without '=' or NUL)",
                                         label, name.substr(0, name.find('\0'))));
        if (value.find('\0') != std::string::npos)
            throw UsageError(fmt::format("{}: Options::env: the value of {} contains a NUL byte at {}; the "
                                         "environment cannot carry it (it would be cut there)",
                                         label, name, value.find('\0')));
    }
    struct sigaction current{};
    ::sigaction(SIGCHLD, nullptr, &current);
    if (current.sa_handler == SIG_IGN || (current.sa_flags & SA_NOCLDWAIT))
        throw UsageError(
            fmt::format("{}: SIGCHLD is ignored in this process, so the exit status of workers cannot be "
                        "read; restore its default handler (signal(SIGCHLD, SIG_DFL)) before calling ranch",
                        label));
}

// "mpify::ranch(train, n=4)", from the function's registered name ("?" if none).
std::string label_for(const std::string& function_name, int n, const char* api = "mpify::ranch") {
    return fmt::format("{}({}, n={})", api, function_name, n);
}

}  // namespace

std::string call_label(const void* function, int n, const char* api) {
    FunctionEntry entry;
    return label_for(find_function_by_address(function, entry) ? entry.name : "?", n, api);
}

CallPlan plan_call(const Options& options, int n, const CallRequest& request) {
    fill_standard_fds();  // before this call makes any fd
    CallPlan plan;
    plan.n = n;
    plan.function = request.function;
    plan.context_key = request.context_key;
    FunctionEntry entry;
    const bool registered = find_function_by_address(request.function, entry);
    plan.function_name = registered ? entry.name : "?";
    plan.function_signature = entry.signature;
    plan.label = label_for(plan.function_name, n);
    check_options(options, n, plan.label);
    if (!registered) throw UsageError(unregistered_message(request.function));
    if (!plan.context_key.empty()) {
        ContextEntry context;
        if (!find_context(plan.context_key, context))
            throw UsageError(
                fmt::format("{}: the context type {} is not registered; add MPIFY_REGISTER_CONTEXT(<type>); next "
                            "to its definition, in the program or library the workers load",
                            plan.label, demangle(plan.context_key.c_str())));
        const ObjectLocation where = locate_object(reinterpret_cast<const void*>(context.run));
        if (where.found && !where.is_main_program) plan.context_library = where.path;
    }
    plan.spawner = effective_spawner(options.spawner);
    return plan;
}

MPIFY_END_DETAIL_NAMESPACE
