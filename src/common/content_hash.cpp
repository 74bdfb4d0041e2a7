#include "common/content_hash.hpp"

#include "common/posix.hpp"
#include "common/unique_fd.hpp"

#include <sodium.h>

#include <fcntl.h>

#include <cerrno>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

crypto_hash_sha256_state& state_of(unsigned char* storage) {
    return *reinterpret_cast<crypto_hash_sha256_state*>(storage);
}

}  // namespace

static_assert(sizeof(crypto_hash_sha256_state) <= 128, "ContentHash::state_ is too small");
static_assert(crypto_hash_sha256_BYTES == ContentHash::size);

ContentHash::ContentHash() {
    // Idempotent; hashing needs no random source, so its answer does not matter here.
    [[maybe_unused]] const int started = sodium_init();
    crypto_hash_sha256_init(&state_of(state_));
}

void ContentHash::add(std::string_view bytes) {
    crypto_hash_sha256_update(&state_of(state_), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

std::string ContentHash::finish() {
    std::string digest(size, '\0');
    crypto_hash_sha256_final(&state_of(state_), reinterpret_cast<unsigned char*>(digest.data()));
    return digest;
}

std::string content_hash_of_file(const std::string& path) {
    const UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file) throw std::system_error(errno, std::generic_category(), "mpify: cannot read " + path);
    ContentHash hash;
    std::string buffer(std::size_t(1) << 16, '\0');
    for (;;) {
        const ReadResult got = read_some(file.get(), buffer.data(), buffer.size());
        if (got.kind == ReadResult::end_of_file) return hash.finish();
        if (got.kind != ReadResult::bytes)
            throw std::system_error(got.error_number, std::generic_category(), "mpify: cannot read " + path);
        hash.add(std::string_view(buffer.data(), got.size));
    }
}

std::string hex_digits(std::string_view bytes) {
    std::string text(2 * bytes.size() + 1, '\0');
    sodium_bin2hex(text.data(), text.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    text.pop_back();
    return text;
}

MPIFY_END_DETAIL_NAMESPACE
