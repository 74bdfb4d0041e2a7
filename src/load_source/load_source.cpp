// load_source: compile a file into a shared library the way mpify's users are
// compiled, keep it in a cache keyed by content, load it.
#include "common/object_locator.hpp"
#include "common/posix.hpp"
#include "common/private_cache.hpp"
#include "load_source/build_flags.hpp"
#include "load_source/loaded_libraries.hpp"
#include "load_source/startup_trial.hpp"

#include <mpify/load_source.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

extern char** environ;

MPIFY_BEGIN_NAMESPACE
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// FNV-1a, 64 bits: stable across runs and machines (std::hash is neither promised).
class Fingerprint {
public:
    void add(const std::string& text) {
        for (unsigned char c : text) hash_ = (hash_ ^ c) * 0x100000001b3ULL;
        hash_ = (hash_ ^ 0xff) * 0x100000001b3ULL;  // separator: ("ab","c") != ("a","bc")
    }
    std::string hex() const { return fmt::format("{:016x}", hash_); }

private:
    std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

fs::path cache_folder(const SourceOptions& options) {
    return options.cache_dir.empty() ? detail::user_cache_root() : fs::path(options.cache_dir);
}

// Beside each cached library: the fingerprint of its bytes, checked before it is loaded,
// so a truncated or damaged file is rebuilt instead of crashing the process in dlopen.
fs::path fingerprint_file(const fs::path& library) { return library.string() + ".fingerprint"; }

std::string fingerprint_of_file(const fs::path& path) {
    Fingerprint bytes;
    bytes.add(read_file(path));
    return bytes.hex();
}

// True when `library` is a regular file of this user's, not writable by others, whose
// bytes match the fingerprint recorded when it was compiled.
bool cached_library_intact(const fs::path& library) {
    if (!detail::private_regular_file(library)) return false;
    const std::string recorded = read_file(fingerprint_file(library));
    return !recorded.empty() && recorded == fingerprint_of_file(library);
}

// True if folder `dir` is `tree` or inside it.
bool inside(const std::string& dir, const std::string& tree) {
    const std::string root = fs::weakly_canonical(tree).string();
    return dir == root || dir.rfind(root + "/", 0) == 0;
}

// Installed mpify: the headers next to the library (libdir/../include), and none from
// the trees it was built in (they may have changed or gone since); in the build tree:
// the source tree's.
std::vector<std::string> include_dirs(const fs::path& libmpify) {
    const detail::BuildFlags& flags = detail::build_flags();
    std::vector<std::string> dirs;
    const fs::path installed = libmpify.parent_path() / flags.libdir_to_includedir;
    const bool is_installed = fs::exists(installed / "mpify" / "mpify.hpp");
    if (is_installed) dirs.push_back(fs::weakly_canonical(installed).string());
    // CMake's list repeats folders, and names the system's own (/usr/include) whose -I
    // would reorder the compiler's search: keep each folder once, never the system's.
    for (const std::string& dir : flags.include_dirs) {
        if (dir.empty()) continue;
        const std::string canonical = fs::weakly_canonical(dir).string();
        if (canonical == "/usr/include" || canonical == "/usr/local/include") continue;
        if (is_installed && (inside(canonical, flags.source_dir) || inside(canonical, flags.binary_dir))) continue;
        if (std::find(dirs.begin(), dirs.end(), canonical) == dirs.end()) dirs.push_back(canonical);
    }
    return dirs;
}

// Whether the dynamic loader looks in `folder` by itself: /lib, /usr/lib, their 64-bit and
// multiarch folders (/usr/lib/x86_64-linux-gnu).
bool is_system_library_folder(const std::string& folder) {
    const fs::path path = fs::path(folder).lexically_normal();
    for (const char* system : {"/lib", "/usr/lib", "/lib64", "/usr/lib64"}) {
        if (path == system) return true;
        if (path.parent_path() == system && path.filename().string().find("-linux-") != std::string::npos) return true;
    }
    return false;
}

std::vector<std::string> compile_command(const fs::path& source, const fs::path& output, const fs::path& libmpify,
                                         const SourceOptions& options) {
    const detail::BuildFlags& flags = detail::build_flags();
    std::vector<std::string> cmd{flags.compiler, flags.standard, "-fPIC", "-shared", "-O2"};
    for (const std::string& dir : include_dirs(libmpify)) cmd.push_back("-I" + dir);
    for (const std::string& d : flags.definitions)
        if (!d.empty()) cmd.push_back("-D" + d);
    for (const std::string& o : flags.options)
        if (!o.empty()) cmd.push_back(o);
    cmd.insert(cmd.end(), options.flags.begin(), options.flags.end());
    // -Bsymbolic-functions: the library's own functions are the ones its MPIFY_REGISTER
    // records. Without it, a second version of an edited file registers the first
    // version's functions: the dynamic linker binds `&fn` to the oldest definition loaded.
    cmd.insert(cmd.end(), {"-o", output.string(), source.string(), "-Wl,-rpath," + libmpify.parent_path().string(),
                           "-Wl,-Bsymbolic-functions", "-Wl,--as-needed", libmpify.string()});
    // --as-needed: the torch part and LibTorch are loaded with the library only when its
    // code uses them, so a plain function's worker does not pay LibTorch's start-up.
    const fs::path torch_part = libmpify.parent_path() / "libmpify_torch.so";
    if (fs::exists(torch_part)) cmd.push_back(torch_part.string());
    for (const std::string& file : flags.link_files)
        if (!file.empty()) cmd.push_back(file);
    // Each dependency from where mpify found it, when that is not one of the system's own
    // folders: a LibTorch outside them (a wheel's) would otherwise be looked for there,
    // and the loader would take another LibTorch's library of the same name (Debian's
    // libc10.so) beside this one's.
    std::vector<std::string> folders;
    for (const std::string& file : flags.link_files) {
        const std::string folder = fs::path(file).parent_path().string();
        if (file.empty() || is_system_library_folder(folder)) continue;
        if (std::find(folders.begin(), folders.end(), folder) != folders.end()) continue;
        folders.push_back(folder);
        cmd.push_back("-Wl,-rpath," + folder);
    }
    cmd.push_back("-Wl,--no-as-needed");  // the user's own libraries, as given
    cmd.insert(cmd.end(), options.libraries.begin(), options.libraries.end());
    return cmd;
}

std::string shell_words(const std::vector<std::string>& words) {
    std::string line;
    for (const std::string& w : words) line += (line.empty() ? "" : " ") + w;
    return line;
}

// Runs the compiler with its output into `log`; true if it succeeded.
bool run(const std::vector<std::string>& cmd, const fs::path& log) {
    const detail::UniqueFd devnull = detail::open_dev_null(O_RDONLY);
    // Opened here, not by the child: a folder we cannot write to is named as such.
    const detail::UniqueFd log_fd(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!log_fd)
        throw UsageError(fmt::format("mpify::load_source: cannot write in the cache folder {}: {} (set "
                                     "SourceOptions::cache_dir or MPIFY_CACHE_DIR to a writable folder)",
                                     log.parent_path().string(), std::strerror(errno)));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, log_fd.get(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, log_fd.get(), STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&actions, devnull.get(), STDIN_FILENO);
    detail::CStringArray argv(cmd);
    pid_t pid = -1;
    const int error = posix_spawnp(&pid, cmd[0].c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0)
        throw CompileError(fmt::format("mpify::load_source: cannot start the compiler {}: {}", cmd[0],
                                       std::strerror(error)));
    siginfo_t status{};
    return detail::wait_for_child(pid, &status) && status.si_code == CLD_EXITED && status.si_status == 0;
}

}  // namespace

namespace {

std::string compile_and_load(const std::string& path, const SourceOptions& options) {
    const fs::path source = fs::absolute(path);
    std::error_code ec;
    if (!fs::is_regular_file(source, ec))
        throw UsageError(fmt::format("mpify::load_source: no file {} (relative paths start at {})", source.string(),
                                     fs::current_path().string()));
    const std::string content = read_file(source);

    const fs::path libmpify = detail::libmpify_path();
    const fs::path root = fs::absolute(cache_folder(options));
    const fs::path folder = detail::private_cache_folder(
        root, "load_source", {"mpify::load_source", "SourceOptions::cache_dir or MPIFY_CACHE_DIR"});

    // The key: what is compiled, how, and against which libmpify (a rebuilt one may
    // have another ABI). The command itself names the output, so it is hashed without it.
    Fingerprint key;
    key.add(content);
    for (const std::string& word : compile_command(source, "", libmpify, options)) key.add(word);
    struct stat lib{};
    if (::stat(libmpify.c_str(), &lib) == 0)
        key.add(fmt::format("{}:{}.{}", lib.st_size, lib.st_mtim.tv_sec, lib.st_mtim.tv_nsec));
    const fs::path library = folder / fmt::format("{}-{}.so", source.stem().string(), key.hex());

    // Compile under private names, then rename: a concurrent load_source of the same
    // source (another notebook) sees either no library or a complete one with its
    // fingerprint.
    auto compile = [&] {
        std::error_code ec;
        // Unique per process and per call: two threads may compile the same source at once.
        static std::atomic<unsigned> compilations{0};
        const std::string unique =
            fmt::format("{}.{}.{}", library.filename().string(), ::getpid(), compilations.fetch_add(1));
        const fs::path partial = folder / (unique + ".partial");
        const fs::path log = folder / (unique + ".log");
        const std::vector<std::string> cmd = compile_command(source, partial, libmpify, options);
        if (options.verbose) std::cerr << "mpify::load_source: " << shell_words(cmd) << std::endl;
        const bool compiled = run(cmd, log);
        const std::string output = read_file(log);
        fs::remove(log, ec);
        if (!compiled) {
            fs::remove(partial, ec);
            throw CompileError(fmt::format("mpify::load_source: {} does not compile.\ncommand: {}\n{}", source.string(),
                                           shell_words(cmd), output));
        }
        const fs::path partial_fingerprint = folder / (unique + ".fingerprint");
        std::ofstream(partial_fingerprint) << fingerprint_of_file(partial);
        detail::forget_library_start(library.string());
        fs::rename(partial_fingerprint, fingerprint_file(library));
        fs::rename(partial, library);
    };

    if (!cached_library_intact(library)) compile();
    detail::check_library_starts(library.string(), source.string());
    if (void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
        detail::remember_loaded_source(handle, library.string());
        return library.string();
    }
    // Intact by its fingerprint and still not loadable (a library it needs was rebuilt
    // since): compile again, once.
    const std::string first_error = ::dlerror();
    compile();
    detail::check_library_starts(library.string(), source.string());
    void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr)
        throw Error(fmt::format("mpify::load_source: compiled {} into {} but cannot load it: {} (before compiling "
                                "it again: {})",
                                source.string(), library.string(), ::dlerror(), first_error));
    detail::remember_loaded_source(handle, library.string());
    return library.string();
}

}  // namespace

std::string load_source(const std::string& path, const SourceOptions& options) {
    try {
        return compile_and_load(path, options);
    } catch (const Error&) {
        throw;
    } catch (const std::exception& e) {  // the file system's own (a full disk, a folder removed meanwhile)
        std::throw_with_nested(Error(fmt::format("mpify::load_source({}): {}", path, e.what())));
    }
}

MPIFY_END_NAMESPACE

extern "C" void* mpify_newest_source_function(const char* linker_name) noexcept {
    return linker_name ? mpify::detail::newest_source_function(linker_name) : nullptr;
}

extern "C" unsigned long mpify_source_generation() noexcept { return mpify::detail::source_generation(); }
