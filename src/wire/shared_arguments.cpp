#include "wire/shared_arguments.hpp"

#include "common/environment_number.hpp"
#include "common/posix.hpp"

#include <mpify/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <mutex>
#include <system_error>
#include <utility>

#include <sys/resource.h>
#include <sys/stat.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

namespace {

// The memfd kept between calls, while no call holds it. Leaked: a call may end while
// the process's statics are destroyed. A child forked from the process inherits the
// fd, but the file is its parent's (both would rewrite it): `owner` tells them apart.
struct KeptMemfd {
    std::mutex lock;
    UniqueFd fd;
    pid_t owner = 0;  // the process that kept it
};
KeptMemfd& kept_memfd() {
    static auto* kept = new KeptMemfd;
    return *kept;
}

std::size_t file_size(int fd) {
    struct stat status{};
    return ::fstat(fd, &status) == 0 ? static_cast<std::size_t>(status.st_size) : 0;
}

// The kept memfd, or a new one (invalid when the kernel offers none).
UniqueFd take_memfd() {
    {
        KeptMemfd& kept = kept_memfd();
        const std::lock_guard<std::mutex> hold(kept.lock);
        if (kept.owner != ::getpid()) kept.fd.reset();  // a forked child's copy: not ours to write
        if (kept.fd) return std::move(kept.fd);
    }
    UniqueFd fd(::memfd_create("mpify-arguments", MFD_CLOEXEC));
    if (!fd && errno != ENOSYS && errno != EPERM && errno != EINVAL)
        throw SpawnError(fmt::format("mpify: cannot create shared memory for the arguments: {}", std::strerror(errno)));
    return fd;
}

// The largest memfd kept between calls: a sixteenth of the machine's memory.
std::size_t kept_bytes_limit() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return 0;
    return static_cast<std::size_t>(pages) / 16 * static_cast<std::size_t>(page_size);
}

bool keep_between_calls(std::size_t bytes) {
    return bytes <= kept_bytes_limit() &&
           environment_number(keep_shared_arguments_var, 1, Malformed::use_fallback, "mpify", 0, 1) != 0;
}

// What a failed write of arguments into the memfd (`total` bytes in all) throws.
SpawnError write_failure(std::size_t total, const std::system_error& e) {
    return SpawnError(fmt::format("mpify: cannot write {} bytes of arguments to shared memory: {}", total,
                                  e.code().message()));
}

}  // namespace

SharedArguments SharedArguments::open(std::size_t size) {
    rlimit file_size_limit{};
    if (::getrlimit(RLIMIT_FSIZE, &file_size_limit) == 0 && file_size_limit.rlim_cur != RLIM_INFINITY &&
        size > file_size_limit.rlim_cur)
        return {};
    SharedArguments shared(take_memfd());
    if (shared.fd_ && ::lseek(shared.fd_.get(), 0, SEEK_SET) != 0)
        throw SpawnError(fmt::format("mpify: cannot rewind the shared memory for the arguments: {}",
                                     std::strerror(errno)));
    return shared;
}

SharedArguments::SharedArguments(const std::string& bytes) {
    SharedArguments opened = open(bytes.size());
    if (opened.fd() < 0) return;
    try {
        write_all(opened.fd(), bytes.data(), bytes.size(), "write");
    } catch (const std::system_error& e) {
        if (e.code().value() == EFBIG) return;  // a limit set since open() looked
        throw write_failure(bytes.size(), e);
    }
    *this = std::move(opened);
    size_ = bytes.size();
    finish();
}

void SharedArguments::append(const char* data, std::size_t size) {
    try {
        write_all(fd_.get(), data, size, "write");
    } catch (const std::system_error& e) {
        throw write_failure(size_ + size, e);
    }
    size_ += size;
}

void SharedArguments::finish() {
    if (file_size(fd_.get()) > 2 * size_) (void)::ftruncate(fd_.get(), static_cast<off_t>(size_));
}

SharedArguments::~SharedArguments() {
    if (!fd_ || !keep_between_calls(file_size(fd_.get()))) return;  // closing frees it
    KeptMemfd& kept = kept_memfd();
    const std::lock_guard<std::mutex> hold(kept.lock);
    if (kept.fd && kept.owner == ::getpid()) return;  // one is kept already: this one is freed
    kept.fd = std::move(fd_);
    kept.owner = ::getpid();
}

SharedArguments::SharedArguments(SharedArguments&& other) noexcept
    : fd_(std::move(other.fd_)), size_(std::exchange(other.size_, 0)) {}

SharedArguments& SharedArguments::operator=(SharedArguments&& other) noexcept {
    if (this != &other) {
        SharedArguments old(std::move(*this));  // given back as it goes
        fd_ = std::move(other.fd_);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

MappedArguments::MappedArguments(int fd, std::size_t size) : size_(size) {
    // Private: a value read in place (wire/in_place_bytes.hpp) that its rank writes to
    // gets its own copies of the pages it writes, and the other ranks never see them.
    // Mapped read-only first so that MAP_POPULATE maps every page now (one pass instead of
    // a fault per page later) without copying any: populating a writable private mapping
    // would copy them all. Writable after, page by page on the first write.
    data_ = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    int error = errno;
    if (data_ != MAP_FAILED && ::mprotect(data_, size, PROT_READ | PROT_WRITE) != 0) {
        error = errno;
        ::munmap(data_, size);
        data_ = MAP_FAILED;
    }
    ::close(fd);
    if (data_ == MAP_FAILED) {
        data_ = nullptr;
        throw std::system_error(error, std::generic_category(), "mpify worker: mapping the shared arguments");
    }
}

MappedArguments::~MappedArguments() {
    if (data_ != nullptr) ::munmap(data_, size_);
}

MPIFY_END_DETAIL_NAMESPACE
