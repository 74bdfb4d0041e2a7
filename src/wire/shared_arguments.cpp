#include "wire/shared_arguments.hpp"

#include "common/posix.hpp"

#include <mpify/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <system_error>

#include <sys/resource.h>

namespace mpify::detail {

UniqueFd share_arguments(const std::string& bytes) {
    rlimit file_size{};
    if (::getrlimit(RLIMIT_FSIZE, &file_size) == 0 && file_size.rlim_cur != RLIM_INFINITY &&
        bytes.size() > file_size.rlim_cur)
        return {};
    UniqueFd fd(::memfd_create("mpify-arguments", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd) {
        if (errno == ENOSYS || errno == EPERM || errno == EINVAL) return {};
        throw SpawnError(fmt::format("mpify: cannot create shared memory for the arguments: {}", std::strerror(errno)));
    }
    try {
        write_all(fd.get(), bytes.data(), bytes.size(), "write");
    } catch (const std::system_error& e) {
        if (e.code().value() == EFBIG) return {};  // a limit set since the check above
        throw SpawnError(fmt::format("mpify: cannot write {} bytes of arguments to shared memory: {}",
                                     bytes.size(), e.code().message()));
    }
    // Sealed: no worker can change what the others read.
    ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    return fd;
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

}  // namespace mpify::detail
