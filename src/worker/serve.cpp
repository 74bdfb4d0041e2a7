#include "worker/serve.hpp"

#include "common/clock.hpp"
#include "common/demangle.hpp"
#include "common/object_locator.hpp"
#include "contract/process_contract.hpp"
#include "registry/function_table.hpp"
#include "registry/rank_memory.hpp"
#include "wire/frames.hpp"
#include "wire/in_place_bytes.hpp"
#include "wire/messages.hpp"
#include "wire/shared_arguments.hpp"
#include "worker/started_by_mpify.hpp"

#include <mpify/abi.hpp>
#include <mpify/version.hpp>

#include <dlfcn.h>
#include <limits.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

bool worker_process = false;

// The function registered under the call's name in the object the caller named (the
// program itself, or the library): the same name may be registered in several objects.
FunctionEntry find_function(const CallMeta& call) {
    std::vector<FunctionEntry> found = find_functions_by_name(call.function);
    const std::string where = call.library.empty() ? "this program" : call.library;
    found.erase(std::remove_if(found.begin(), found.end(),
                               [&](const FunctionEntry& e) {
                                   const ObjectLocation object = locate_object(e.address);
                                   return call.library.empty() ? !object.is_main_program : object.path != call.library;
                               }),
                found.end());
    if (found.size() == 1) {
        // Same name, other type: the caller and this object were built from different
        // versions. Decoding the arguments or the result would go silently wrong.
        if (!call.signature.empty() && found.front().signature != call.signature)
            throw std::runtime_error(fmt::format(
                "mpify worker: '{}' is {} in {} but the caller calls it as {}: they were built from different "
                "versions of it; rebuild both from the same source",
                call.function, demangle(found.front().signature.c_str()), where, demangle(call.signature.c_str())));
        return found.front();
    }
    if (found.empty())
        throw std::runtime_error(
            fmt::format("mpify worker: no function named '{}' is registered in {} (was the file rebuilt "
                        "without its MPIFY_REGISTER?)",
                        call.function, where));
    throw std::runtime_error(
        fmt::format("mpify worker: {} functions are registered as '{}' in {}; register them with their "
                    "qualified names (MPIFY_REGISTER(ns::f)) or rename one",
                    found.size(), call.function, where));
}

// A call from a caller of another mpify version: its layout, its functions' ABI and the
// worker's may differ, so it is refused by name before anything else is read.
void check_call_version(const std::string& caller_version) {
    if (caller_version == MPIFY_VERSION_STRING) return;
    throw std::runtime_error(fmt::format(
        "mpify worker: the caller runs mpify {} and this worker mpify {} ({}); the processes of a call must run "
        "one version of mpify: rebuild the program against one installation, or set MPIFY_WORKER_PROGRAM to the "
        "mpify-worker of the caller's",
        caller_version, MPIFY_VERSION_STRING, libmpify_path()));
}

// The failure report goes out where fn threw, inside its context: the context's
// destructor (a DdpGuard's) breaks the other ranks' collectives, and the caller, failing
// in turn, stops this worker; by then this rank's report, the root cause, must be sent.
int channel = -1;
bool failure_sent = false;

// Inside a catch block: sends the exception being handled as this worker's failure.
// What fn wrote and the streams still hold. Flushed before its result or failure goes out:
// once the caller has every rank's answer it may stop the worker at once, and output still
// in this process's buffers then would be lost (a last line without a newline, say).
void flush_everything() {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
}

void send_failure() noexcept {
    if (failure_sent) return;
    failure_sent = true;
    flush_everything();
    try {
        const FailureInfo failure{current_exception_type(), current_exception_message(), monotonic_ns()};
        write_frame(channel, FrameType::failure, encode_failure(failure));
    } catch (...) {
    }
}

// Loads a shared object the call names (`holding`: what it holds, for the message). A
// library built against another mpify fails here (its version node is not found): the
// message names this worker's version beside the loader's words.
//
// A library this process loaded already (the program's own dependency, or one the
// template loaded before forking) is not opened again: its functions are registered, and
// dlopen of a library first loaded as a dependency walks and sorts the whole dependency
// graph (LibTorch's is large): milliseconds in every worker of an in_ddp, whose context
// lives in libmpify_torch.
void load_library(const std::string& path, const char* holding) {
    if (path.empty() || is_loaded(path) || ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr) return;
    const char* why = ::dlerror();
    throw std::runtime_error(fmt::format("mpify worker: cannot load {}, which holds {}: {} (this worker runs mpify {}, "
                                         "{})",
                                         path, holding, why ? why : "?", MPIFY_VERSION_STRING, libmpify_path()));
}

// Runs the call and returns the result blob; throws whatever fn throws.
std::string run_call(const CallMeta& call, std::string_view args) {
    load_library(call.library, "the function");
    const FunctionEntry function = find_function(call);
    std::string result;
    struct Body {
        const FunctionEntry& function;
        std::string_view args;
        bool want_result;
        std::string& result;
        static void run(void* self) {
            auto* b = static_cast<Body*>(self);
            try {
                // Opened here, after the function's library (and so LibTorch) is loaded.
                const RankMemoryScope memory = open_rank_memory();
                b->result = b->function.invoke(b->args, b->want_result);
            } catch (...) {
                send_failure();
                throw;  // on through the context's destructor
            }
        }
    } body{function, args, call.want_result, result};
    if (call.context_key.empty()) {
        Body::run(&body);
        return result;
    }
    load_library(call.context_library, "the context");
    ContextEntry context;
    if (!find_context(call.context_key, context))
        throw std::runtime_error(
            fmt::format("mpify worker: the context type {} is not registered in this worker; register it "
                        "with MPIFY_REGISTER_CONTEXT in the program or library that defines the function",
                        demangle(call.context_key.c_str())));
    context.run(&Body::run, &body);
    return result;
}

// What `ps` and `top` show for this worker: its program and its rank ("intro r1"), not
// "exe" (the exec spawner starts /proc/self/exe). The kernel keeps 15 characters.
void name_this_worker(int rank) {
    char program[PATH_MAX] = {};
    const ssize_t length = ::readlink("/proc/self/exe", program, sizeof program - 1);
    std::string name = length > 0 ? std::string(program, static_cast<std::size_t>(length)) : "mpify";
    name = name.substr(name.rfind('/') + 1);
    const std::string suffix = " r" + std::to_string(rank);
    name = name.substr(0, 15 - std::min<std::size_t>(15, suffix.size())) + suffix;
    ::prctl(PR_SET_NAME, name.c_str());
}

[[noreturn]] void serve(int fd) {
    channel = fd;
    // Output goes to a pipe: line-buffer it so the caller sees lines as they happen.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::optional<Frame> frame;
    try {
        frame = read_frame(fd);
        if (frame && frame->type != FrameType::call)
            throw std::runtime_error("mpify worker: the caller sent a frame of type " +
                                     std::to_string(static_cast<int>(frame->type)) + " instead of a call");
    } catch (const std::exception& e) {
        // Not what a caller sends: say so, to the caller (if it listens) and on stderr.
        std::fprintf(stderr, "mpify worker: malformed call on its channel: %s\n", e.what());
        send_failure();
        ::_exit(70);
    }
    if (!frame) ::_exit(70);  // the caller is gone

    bool ok = false;
    try {
        check_call_version(call_version(frame->payload));
        std::string_view args;
        const CallMeta call = decode_call(frame->payload, args);
        name_this_worker(call.rank);
        // Shared arguments: mapped, and tensors among them used in place for as long as
        // they live (the function may keep one past the call; the mapping outlives it).
        std::shared_ptr<MappedArguments> shared;
        std::optional<InPlaceRegion> in_place;
        if (call.shared_args_size > 0) {
            shared = std::make_shared<MappedArguments>(worker_args_fd, call.shared_args_size);
            args = shared->bytes();
            in_place.emplace(args.data(), args.size(), shared);
        }
        std::string result = run_call(call, args);
        in_place.reset();
        shared.reset();
        frame.reset();  // the arguments are no longer needed
        flush_everything();
        write_frame(fd, FrameType::result, result);
        ok = true;
    } catch (...) {
        send_failure();  // unless fn's own failure went out already
    }
    flush_everything();
    // _exit, not exit: the result is delivered, and static destructors of a process
    // with library threads still running (OpenMP, Gloo) are a source of crashes at exit.
    ::_exit(ok ? 0 : 1);
}

}  // namespace

void serve_if_worker() {
    if (std::getenv(worker_env_var) == nullptr) return;
    const int fd = channel_from_environment(worker_env_var);
    ::unsetenv(worker_env_var);  // processes this worker starts are not workers
    serve_as_worker(fd);
}

void serve_as_worker(int channel_fd) {
    worker_process = true;
    serve(channel_fd);
}

bool is_worker_process() { return worker_process; }

MPIFY_END_DETAIL_NAMESPACE
