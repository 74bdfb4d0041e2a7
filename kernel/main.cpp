// mpify-kernel: a Jupyter kernel for C++17 or newer (see README, "Notebooks").
//
//   mpify-kernel -f CONNECTION_FILE [-- CLANG_FLAG...]
//
// Jupyter starts it from its kernelspec (kernel.json), one process per notebook. Flags
// after `--` go to clang: the kernelspec passes -I for the folder of xcpp/xdisplay.hpp.
#include "cpp_kernel.hpp"
#include "libtorch_flags.hpp"
#include "recovery.hpp"

#include <xeus/xhelper.hpp>
#include <xeus/xkernel.hpp>
#include <xeus/xkernel_configuration.hpp>
#include <xeus/xserver_zmq.hpp>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <unistd.h>
#include <vector>

#ifndef MPIFY_KERNEL_RESOURCE_DIR
#error "MPIFY_KERNEL_RESOURCE_DIR: clang's resource folder (builtin headers), set by CMake"
#endif

namespace {

std::vector<std::string> compiler_flags(int argc, char* argv[]) {
    std::vector<std::string> flags = {
        "-xc++", "-resource-dir", MPIFY_KERNEL_RESOURCE_DIR,
        // The standard, LibTorch's folders and its ABI flag, as mpify was built.
        MPIFY_KERNEL_LIBTORCH_FLAGS,
        "-DMPIFY_KERNEL=1",  // what cells are compiled by (<mpify/detail/libtorch_generation.hpp>)
    };
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--") != 0) continue;
        flags.insert(flags.end(), argv + i + 1, argv + argc);
        break;
    }
    return flags;
}

}  // namespace

int main(int argc, char* argv[]) {
    // Read before xeus's helpers, which rearrange argv.
    const std::vector<std::string> flags = compiler_flags(argc, argv);
    if (xeus::should_print_version(argc, argv)) {
        std::printf("mpify-kernel %s\n", MPIFY_KERNEL_VERSION);
        return 0;
    }
    const std::string connection_file = xeus::extract_filename(argc, argv);
    if (connection_file.empty()) {
        std::fprintf(stderr, "usage: mpify-kernel -f CONNECTION_FILE [-- CLANG_FLAG...]\n"
                             "(Jupyter starts it from its kernelspec; see README, \"Notebooks\")\n");
        return 2;
    }
    mpify_kernel::install_signal_handlers();  // before any thread exists
    try {
        const xeus::xconfiguration config = xeus::load_configuration(connection_file);
        auto interpreter = std::make_unique<mpify_kernel::CppKernel>(flags);
        // Never destroyed (see below): the kernel lives until the process ends.
        auto& kernel = *new xeus::xkernel(config, xeus::get_user_name(), xeus::make_context<zmq::context_t>(),
                                          std::move(interpreter), xeus::make_xserver_zmq);
        kernel.start();  // returns after a shutdown request
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mpify-kernel: %s\n", e.what());
        std::fflush(nullptr);
        ::_exit(1);
    }
    // Leave without destructors: libraries the cells loaded (LibTorch among them) can
    // crash in theirs once clang's JIT has gone (seen with clang-repl-19).
    std::fflush(nullptr);
    ::_exit(0);
}
