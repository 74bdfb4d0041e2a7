// A program that ranches plain functions and links mpify::core only: neither it nor its
// workers (its own copies, or mpify-worker serving a plain library or a load_source'd
// file) load LibTorch, and no LibTorch library is among the dependencies of the program,
// libmpify.so or mpify-worker.
#include "loaded_objects.hpp"

#include <catch2/catch.hpp>
#include <mpify/mpify.hpp>
#include <mpify/version.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> objects_loaded_by_program_rank() { return core_only::loaded_object_names(); }
MPIFY_REGISTER(objects_loaded_by_program_rank);

bool contains(const std::vector<std::string>& names, const std::string& prefix) {
    for (const std::string& name : names)
        if (name.rfind(prefix, 0) == 0) return true;
    return false;
}

// Every rank's loaded objects: libmpify among them (what is looked for is seen), and no
// LibTorch library.
void check_ranks_load_no_torch(const std::vector<std::vector<std::string>>& ranks) {
    for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
        INFO("rank " << rank);
        CHECK(contains(ranks[rank], "libmpify.so"));
        CHECK(core_only::torch_objects_among(ranks[rank]).empty());
    }
}

mpify::Options with_spawner(mpify::Spawner spawner) {
    mpify::Options options;
    options.spawner = spawner;
    return options;
}

// What `readelf <options>` prints about `file`.
std::string readelf(const std::string& options, const std::string& file) {
    const std::string command = "readelf " + options + " '" + file + "'";
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string text;
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
    ::pclose(pipe);
    return text;
}

std::string path_of_libmpify() {
    Dl_info info{};
    REQUIRE(::dladdr(reinterpret_cast<const void*>(&mpify::local_rank), &info) != 0);
    return info.dli_fname;
}

}  // namespace

TEST_CASE("a program linked with mpify::core loads no LibTorch, nor do its workers") {
    check_ranks_load_no_torch({objects_loaded_by_program_rank()});
    for (const mpify::Spawner spawner : {mpify::Spawner::exec, mpify::Spawner::warm_template}) {
        INFO("spawner " << (spawner == mpify::Spawner::exec ? "exec" : "template"));
        check_ranks_load_no_torch(mpify::ranch(with_spawner(spawner), 3, objects_loaded_by_program_rank));
    }
}

TEST_CASE("mpify-worker serving a plain library loads no LibTorch") {
    for (const mpify::Spawner spawner : {mpify::Spawner::exec, mpify::Spawner::warm_template}) {
        INFO("spawner " << (spawner == mpify::Spawner::exec ? "exec" : "template"));
        check_ranks_load_no_torch(mpify::ranch(with_spawner(spawner), 3, core_only::objects_loaded_by_library_rank));
    }
}

TEST_CASE("a plain function compiled by load_source loads no LibTorch") {
    const std::filesystem::path folder =
        std::filesystem::temp_directory_path() / ("mpify_core_only_" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder);
    const std::filesystem::path source = folder / "plain.cpp";
    std::ofstream(source) << "#include <mpify/mpify.hpp>\n"
                             "#include <link.h>\n"
                             "#include <string>\n#include <vector>\n"
                             "extern \"C\" std::vector<std::string> core_only_loaded_here() {\n"
                             "    std::vector<std::string> names;\n"
                             "    dl_iterate_phdr([](dl_phdr_info* i, size_t, void* out) {\n"
                             "        std::string p = i->dlpi_name ? i->dlpi_name : \"\";\n"
                             "        if (!p.empty()) static_cast<std::vector<std::string>*>(out)->push_back(\n"
                             "            p.substr(p.rfind('/') + 1));\n"
                             "        return 0; }, &names);\n"
                             "    return names;\n"
                             "}\n"
                             "MPIFY_REGISTER(core_only_loaded_here);\n";
    mpify::SourceOptions options;
    options.cache_dir = (folder / "cache").string();
    const std::string library = mpify::load_source(source.string(), options);
    using Fn = std::vector<std::string> (*)();
    const auto loaded_here =
        reinterpret_cast<Fn>(::dlsym(::dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD), "core_only_loaded_here"));
    REQUIRE(loaded_here != nullptr);
    check_ranks_load_no_torch({loaded_here()});  // the caller, with the library loaded
    check_ranks_load_no_torch(mpify::ranch(with_spawner(mpify::Spawner::exec), 2, loaded_here));
    std::filesystem::remove_all(folder);
}

TEST_CASE("no LibTorch library is a dependency of the program, libmpify.so or mpify-worker") {
    const std::string program = std::filesystem::read_symlink("/proc/self/exe").string();
    for (const std::string& file : {program, path_of_libmpify(), std::string(MPIFY_TEST_WORKER)}) {
        INFO(file);
        // The (NEEDED) lines only: the run path names folders, which may say "torch".
        std::string needed;
        std::istringstream dynamic(readelf("-d", file));
        for (std::string line; std::getline(dynamic, line);)
            if (line.find("(NEEDED)") != std::string::npos) needed += line + "\n";
        const bool names_libmpify = needed.find("libmpify.so") != std::string::npos;
        CHECK((names_libmpify || file == path_of_libmpify()));
        CHECK(needed.find("libc.so") != std::string::npos);  // readelf answered
        CHECK(needed.find("torch") == std::string::npos);
        CHECK(needed.find("libc10") == std::string::npos);
    }
}

// The lines of readelf's symbol table that define one of mpify's own symbols: a function
// or object in namespace mpify (_ZN5mpify), or the typeinfo (_ZTI), typeinfo name (_ZTS)
// or vtable (_ZTV) of one of its classes.
std::vector<std::string> mpify_definitions(const std::string& symbol_table) {
    std::vector<std::string> found;
    std::istringstream lines(symbol_table);
    for (std::string line; std::getline(lines, line);) {
        if (line.find(" UND ") != std::string::npos) continue;
        for (const char* prefix : {" _ZN5mpify", " _ZTIN5mpify", " _ZTSN5mpify", " _ZTVN5mpify"})
            if (line.find(prefix) != std::string::npos) found.push_back(line);
    }
    return found;
}

TEST_CASE("mpify's symbols carry its version node, and what links them needs that node") {
    const std::string node = "MPIFY_" + std::to_string(MPIFY_VERSION_MAJOR) + "." + std::to_string(MPIFY_VERSION_MINOR);
    const std::string abi_namespace = MPIFY_ABI_NAMESPACE_STRING;
    const std::string versioned = "5mpify" + std::to_string(abi_namespace.size()) + abi_namespace;
    const std::string exported = readelf("--dyn-syms -W", path_of_libmpify());
    CHECK_THAT(exported, Catch::Contains("_ZN" + versioned + "10local_rankEv@@" + node));  // mpify::local_rank()
    CHECK_THAT(exported, Catch::Contains("_ZTIN" + versioned + "5ErrorE@@" + node));  // typeid(mpify::Error)
    CHECK_THAT(exported, Catch::Contains("_ZTVN" + versioned + "5ErrorE@@" + node));  // its vtable
    CHECK_THAT(exported, Catch::Contains("mpify_source_generation@@" + node));
    const std::string torch_library =
        (std::filesystem::path(path_of_libmpify()).parent_path() / "libmpify_torch.so").string();
    for (const std::string& library : {path_of_libmpify(), torch_library}) {
        INFO(library);
        const std::vector<std::string> definitions = mpify_definitions(readelf("--dyn-syms -W", library));
        CHECK(definitions.size() > 10);
        for (const std::string& line : definitions) {
            INFO(line);
            CHECK(line.find(versioned) != std::string::npos);  // in the versioned inline namespace
            CHECK(line.find("@@" + node) != std::string::npos);
        }
    }
    const std::string program = std::filesystem::read_symlink("/proc/self/exe").string();
    CHECK_THAT(readelf("-V -W", program), Catch::Contains("Name: " + node));
    CHECK_THAT(readelf("-V -W", MPIFY_TEST_WORKER), Catch::Contains("Name: " + node));
}
