#include "spawn/worker_host.hpp"

#include "common/object_locator.hpp"
#include "contract/init_ran.hpp"

#include <mpify/error.hpp>

#include <unistd.h>

#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <optional>

#ifndef MPIFY_INSTALL_BINDIR
#define MPIFY_INSTALL_BINDIR ""
#endif

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// The caller's own command line, so a worker's `ps` line reads like its caller's.
std::vector<std::string> own_command_line() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    const std::string all{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::vector<std::string> args;
    for (std::size_t start = 0; start < all.size();) {
        const std::size_t end = all.find('\0', start);
        args.push_back(all.substr(start, end - start));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    if (args.empty()) args.push_back("mpify-worker");
    return args;
}

std::string directory_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

std::optional<std::string> find_mpify_program(const std::string& name) {
    const std::string libdir = directory_of(libmpify_path());
    const std::string candidates[] = {
        libdir + "/" + name,            // build tree: next to libmpify.so
        libdir + "/../bin/" + name,     // installed: <prefix>/lib and <prefix>/bin
        libdir + "/../../bin/" + name,  // installed under lib/<multiarch>
        std::string(MPIFY_INSTALL_BINDIR) + "/" + name,
    };
    for (const std::string& candidate : candidates)
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    return std::nullopt;
}

std::string find_mpify_worker() {
    if (const char* over = std::getenv("MPIFY_WORKER_PROGRAM"); over && *over) {
        if (::access(over, X_OK) == 0) return over;
        throw SpawnError(fmt::format("mpify: MPIFY_WORKER_PROGRAM is '{}', which is not an executable file; "
                                     "point it at mpify-worker or unset it",
                                     over));
    }
    if (std::optional<std::string> found = find_mpify_program("mpify-worker")) return *found;
    throw SpawnError(fmt::format("mpify: cannot find the mpify-worker program (looked next to {} and in {}); "
                                 "install mpify completely or set MPIFY_WORKER_PROGRAM to its path",
                                 libmpify_path(), MPIFY_INSTALL_BINDIR));
}

WorkerHost choose_worker_host(const void* address, const std::string& name) {
    const ObjectLocation where = locate_object(address);
    if (!where.found) {
        throw UsageError(fmt::format("mpify: function '{}' lives in no program or shared library file (was it compiled "
                                     "by an interpreter?). Other processes cannot run code that exists only in this "
                                     "process's memory: compile it into a shared library (mpify::load_source, or your "
                                     "build) and load that library.",
                                     name));
    }
    WorkerHost host;
    if (where.is_main_program) {
        if (!init_ran()) {
            throw UsageError(
                fmt::format("mpify: function '{}' is defined in this program, but the program never called "
                            "mpify::init(argc, argv). Call it first thing in main(): a worker is this same "
                            "program restarted, and mpify::init is where it serves its call.",
                            name));
        }
        host.executable = "/proc/self/exe";
        host.argv = own_command_line();
    } else {
        host.executable = find_mpify_worker();
        host.argv = {host.executable};
        host.library = where.path;
    }
    return host;
}

MPIFY_END_DETAIL_NAMESPACE
