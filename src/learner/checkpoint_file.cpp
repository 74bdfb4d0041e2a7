#include "learner/checkpoint_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

MPIFY_BEGIN_NAMESPACE
namespace learner {
namespace {

namespace fs = std::filesystem;

std::runtime_error write_error(const fs::path& folder, const std::string& what, int error) {
    return std::runtime_error(
        "cannot write checkpoints in " + folder.string() + ": " + what + ": " + std::strerror(error) +
        (error == ENOSPC ? " (the disk is full: free space or choose another folder)"
         : error == EROFS || error == EACCES || error == EPERM ? " (choose a folder this user can write)"
                                                               : ""));
}

// What a file that is not a regular one is, for messages.
const char* kind_of(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO (a named pipe)";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISDIR(mode)) return "a folder";
    return "not a regular file";
}

// Removes the temporaries `target`'s writers left when they died mid-write (their process
// is gone from this machine); a live writer's, and this process's, stay.
void remove_dead_writers_partials(const fs::path& folder, const fs::path& target) {
    const std::string prefix = "." + target.filename().string() + ".partial-";
    std::error_code error;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(prefix, 0) != 0) continue;
        const std::string digits = name.substr(prefix.size());
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9)
            continue;
        const pid_t writer = static_cast<pid_t>(std::stol(digits));
        if (writer == ::getpid() || ::kill(writer, 0) == 0 || errno != ESRCH) continue;
        fs::remove(entry.path(), error);
    }
}

// So that the rename itself survives a power cut.
void sync_folder(const fs::path& folder) {
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

}  // namespace

namespace {

// Replaces `path` with what `fill` writes to the temporary's fd (throwing std::system_error
// on a failed write), as write_file_atomically says.
void replace_atomically(const std::string& path, const std::function<void(int fd)>& fill) {
    const fs::path target(path);
    const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
    remove_dead_writers_partials(folder, target);
    const fs::path temporary = folder / ("." + target.filename().string() + ".partial-" + std::to_string(::getpid()));
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw write_error(folder, "creating " + temporary.filename().string(), errno);
    int error = 0;
    try {
        fill(fd);
        if (::fsync(fd) != 0) error = errno;
    } catch (const std::system_error& e) {
        error = e.code().value();
    } catch (...) {  // the writer's own failure: no temporary stays behind
        ::close(fd);
        ::unlink(temporary.c_str());
        throw;
    }
    ::close(fd);
    if (error != 0) {
        ::unlink(temporary.c_str());
        throw write_error(folder, "writing " + temporary.filename().string(), error);
    }
    if (::rename(temporary.c_str(), target.c_str()) != 0) {
        error = errno;
        ::unlink(temporary.c_str());
        throw write_error(folder, "renaming the new checkpoint to " + target.filename().string(), error);
    }
    sync_folder(folder);
}

// Writes `n` bytes at `data` at `fd`'s offset (or at `at`, when given); throws
// std::system_error on failure.
void write_all(int fd, const char* data, std::size_t n, std::optional<off_t> at = std::nullopt) {
    std::size_t done = 0;
    while (done < n) {
        const ssize_t wrote = at ? ::pwrite(fd, data + done, n - done, *at + static_cast<off_t>(done))
                                 : ::write(fd, data + done, n - done);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) throw std::system_error(wrote < 0 ? errno : EIO, std::generic_category());
        done += static_cast<std::size_t>(wrote);
    }
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes) {
    replace_atomically(path, [&](int fd) { write_all(fd, bytes.data(), bytes.size()); });
}

void write_framed_file_atomically(const std::string& path, const std::function<void(const ByteSink&)>& write_payload) {
    replace_atomically(path, [&](int fd) {
        // The header's place first; its length and checksum are known once the payload is.
        const std::string placeholder(frame_header_size, '\0');
        write_all(fd, placeholder.data(), placeholder.size());
        FrameBuilder frame;
        write_payload([&](const char* data, std::size_t n) {
            frame.add(data, n);
            write_all(fd, data, n);
        });
        const std::string header = frame.header();
        write_all(fd, header.data(), header.size(), off_t{0});
    });
}

void check_writable_folder(const std::string& folder) {
    std::error_code error;
    fs::create_directories(folder, error);
    if (error) throw write_error(folder, "creating the folder", error.value());
    write_file_atomically((fs::path(folder) / ".write-test").string(), "mpify");
    fs::remove(fs::path(folder) / ".write-test", error);
}

struct CheckpointBytes::Source {
    int fd = -1;  // the file's; -1: in memory
    std::shared_ptr<const void> owner;
    const char* data = nullptr;
    std::optional<PayloadSpan> payload;
    ~Source() {
        if (fd >= 0) ::close(fd);
    }
};

CheckpointBytes CheckpointBytes::open_file(const std::string& path) {
    const auto cannot = [&](const std::string& why) { return std::runtime_error("cannot read " + path + ": " + why); };
    auto source = std::make_shared<Source>();
    // O_NONBLOCK: opening a FIFO without a writer returns at once (it is refused below)
    // instead of waiting for one forever.
    source->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (source->fd < 0) throw cannot(std::strerror(errno));
    struct stat status{};
    if (::fstat(source->fd, &status) != 0) throw cannot(std::strerror(errno));
    if (!S_ISREG(status.st_mode))
        throw cannot(std::string("it is ") + kind_of(status.st_mode) +
                     ", not a file (a checkpoint is a regular file the Learner wrote)");
    CheckpointBytes bytes;
    bytes.path_ = path;
    bytes.size_ = static_cast<std::uint64_t>(status.st_size);
    bytes.source_ = std::move(source);
    return bytes;
}

CheckpointBytes CheckpointBytes::in_memory(const std::string& path, std::shared_ptr<const void> owner, const char* data,
                                           std::uint64_t size) {
    auto source = std::make_shared<Source>();
    source->owner = std::move(owner);
    source->data = data;
    CheckpointBytes bytes;
    bytes.path_ = path;
    bytes.size_ = size;
    bytes.source_ = std::move(source);
    return bytes;
}

CheckpointBytes in_memory(const std::string& path, std::string bytes) {
    auto owner = std::make_shared<const std::string>(std::move(bytes));
    return CheckpointBytes::in_memory(path, owner, owner->data(), owner->size());
}

std::size_t CheckpointBytes::read_at(std::uint64_t offset, char* into, std::size_t n) const {
    if (offset >= size_) return 0;
    n = static_cast<std::size_t>(std::min<std::uint64_t>(n, size_ - offset));
    if (source_->fd < 0) {
        std::memcpy(into, source_->data + offset, n);
        return n;
    }
    std::size_t done = 0;
    while (done < n) {
        const ssize_t got = ::pread(source_->fd, into + done, n - done, static_cast<off_t>(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) throw std::runtime_error("cannot read " + path_ + ": " + std::strerror(errno));
        if (got == 0) break;  // it shrank meanwhile: the frame's length check says so
        done += static_cast<std::size_t>(got);
    }
    return done;
}

const PayloadSpan& CheckpointBytes::payload() const {
    if (!source_->payload)
        source_->payload = checked_payload(path_, size_, [this](std::uint64_t offset, char* into, std::size_t n) {
            return read_at(offset, into, n);
        });
    return *source_->payload;
}

}  // namespace learner
MPIFY_END_NAMESPACE
