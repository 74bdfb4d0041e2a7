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
    // MAP_POPULATE: one pass that maps every page now, instead of a fault per page later.
    data_ = ::mmap(nullptr, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    const int error = errno;
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
