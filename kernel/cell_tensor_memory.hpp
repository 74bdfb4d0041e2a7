#pragma once
// A cell's LibTorch tensors keep their memory from one training step to the next, as a
// rank's do: while a cell runs, the kernel holds mpify's tensor memory cache (found with
// dlsym once a cell has loaded libmpify_torch; the kernel does not link LibTorch). Without
// it, a training loop in a cell faults the pages of its large temporaries in afresh at
// every step (benchmarks/README.md, "The kernel"). MPIFY_TENSOR_MEMORY_CACHE=0 in the
// kernel's environment (setenv in a cell) turns it off from the next cell on.
namespace mpify_kernel {

class CellTensorMemory {
public:
    CellTensorMemory();
    ~CellTensorMemory();
    CellTensorMemory(const CellTensorMemory&) = delete;
    CellTensorMemory& operator=(const CellTensorMemory&) = delete;

private:
    void* cache_ = nullptr;
    void (*close_)(void*) = nullptr;
};

}  // namespace mpify_kernel
