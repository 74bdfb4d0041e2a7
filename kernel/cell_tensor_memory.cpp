#include "cell_tensor_memory.hpp"

#include <dlfcn.h>

namespace mpify_kernel {

CellTensorMemory::CellTensorMemory() {
    using Open = void* (*)();
    auto open = reinterpret_cast<Open>(::dlsym(RTLD_DEFAULT, "mpify_open_tensor_memory_cache"));
    close_ = reinterpret_cast<void (*)(void*)>(::dlsym(RTLD_DEFAULT, "mpify_close_tensor_memory_cache"));
    if (open != nullptr && close_ != nullptr) cache_ = open();
}

CellTensorMemory::~CellTensorMemory() {
    if (cache_ != nullptr) close_(cache_);
}

}  // namespace mpify_kernel
