#pragma once
// A test case's folder under the temporary directory, removed when the case ends.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace mpify_examples::testing {

/// A fresh, empty folder <temp>/<test>_<pid>/<name>, removed with all it holds when the
/// test case ends, passed or failed; <temp>/<test>_<pid> goes with the last such folder.
class ScratchFolder {
public:
    ScratchFolder(const std::string& test, const std::string& name)
        : root_(std::filesystem::temp_directory_path() / (test + "_" + std::to_string(::getpid()))),
          path_(root_ / name) {
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~ScratchFolder() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
        std::filesystem::remove(root_, ignored);  // removes only an empty folder
    }
    ScratchFolder(const ScratchFolder&) = delete;
    ScratchFolder& operator=(const ScratchFolder&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path root_;
    std::filesystem::path path_;
};

}  // namespace mpify_examples::testing
