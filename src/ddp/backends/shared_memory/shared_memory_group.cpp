#include "ddp/backends/shared_memory/shared_memory_group.hpp"

#include "common/clock.hpp"
#include "common/signal_free_thread.hpp"
#include "ddp/future_end.hpp"

#include <mpify/error.hpp>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Which collective a rank calls, as SegmentCall::kind.
enum class Kind : std::uint32_t { allreduce = 1, broadcast, allgather, barrier };

const char* kind_name(std::uint32_t kind) {
    switch (static_cast<Kind>(kind)) {
        case Kind::allreduce: return "allreduce";
        case Kind::broadcast: return "broadcast";
        case Kind::allgather: return "allgather";
        case Kind::barrier: return "barrier";
    }
    return "an unknown collective";
}

std::string describe(const SegmentCall& c) {
    const auto kind = static_cast<Kind>(c.kind);
    if (kind == Kind::barrier) return "barrier";
    std::string text = fmt::format("{} of {} bytes of {}", kind_name(c.kind), c.bytes,
                                   c10::toString(static_cast<c10::ScalarType>(c.dtype)));
    if (kind == Kind::broadcast) text += fmt::format(" from rank {}", c.root);
    if (kind == Kind::allreduce) text += fmt::format(" (reduce op {})", c.reduce);
    return text;
}

// The Work of one collective: its future, completed by the group's thread.
class SharedMemoryWork final : public c10d::Work {
public:
    SharedMemoryWork(int rank, c10d::OpType type, c10::intrusive_ptr<c10::ivalue::Future> future)
        : Work(rank, type), future_(std::move(future)) {}

    bool isCompleted() override { return future_->completed(); }
    bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
    std::exception_ptr exception() const override { return future_->exception_ptr(); }
    std::vector<at::Tensor> result() override { return future_->value().toTensorVector(); }
    bool wait(std::chrono::milliseconds timeout) override {
        if (timeout != kNoTimeout) {
            if (!FutureEnd(*future_).wait_for(timeout))
                throw Error(fmt::format("a collective of mpify's shared-memory group did not end within {} ms",
                                        timeout.count()));
        }
        future_->wait();
        if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
        return true;
    }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

private:
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// An all-reduce goes through the segment in chunks of this size: a chunk's copies, its
// reduction and the peers' reads of it stay in the cores' caches, where a whole slot's
// would not (benchmarks/README.md, "The all-reduce against the machine's limit").
constexpr std::size_t allreduce_chunk_bytes = std::size_t{1} << 20;

// Whether the group itself serves a collective on `tensor` (else the fallback does).
bool served(const at::Tensor& tensor) {
    return tensor.defined() && tensor.device().is_cpu() && tensor.layout() == at::kStrided;
}

// A tensor over `bytes` of shared memory at `at`, of `tensor`'s type, one dimension.
at::Tensor view_of(std::byte* at, std::int64_t elements, const at::Tensor& like) {
    return at::from_blob(at, {elements}, at::TensorOptions().dtype(like.scalar_type()));
}

// out[i] = a[i] + b[i] for n elements; `out` may be `a`. A vector of 64 bytes at a time
// (the compiler's vector extension: whatever the target's registers are).
template <class T>
void add_elements(T* out, const T* a, const T* b, std::int64_t n) {
    using Vector [[gnu::vector_size(64)]] = T;
    constexpr std::int64_t lanes = sizeof(Vector) / sizeof(T);
    std::int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        Vector x, y;
        std::memcpy(&x, a + i, sizeof x);
        std::memcpy(&y, b + i, sizeof y);
        x += y;
        std::memcpy(out + i, &x, sizeof x);
    }
    for (; i < n; ++i) out[i] = a[i] + b[i];
}

// out = a `op` b (AVG sums here; the average is taken after). `out` may be `a`: one
// pass over memory either way, so the first two ranks' values go straight into the
// results rather than through a copy first. The sums of float and double (gradients)
// are a loop of this thread's own: ATen's add would split them across its thread pool,
// whose threads then compete for the cores with the peers' (and spin with them at the
// group's barriers).
void fold(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, c10d::ReduceOp op) {
    const bool sum = op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG;
    if (sum && out.scalar_type() == at::kFloat)
        return add_elements(out.data_ptr<float>(), a.data_ptr<float>(), b.data_ptr<float>(), out.numel());
    if (sum && out.scalar_type() == at::kDouble)
        return add_elements(out.data_ptr<double>(), a.data_ptr<double>(), b.data_ptr<double>(), out.numel());
    switch (op) {
        case c10d::ReduceOp::SUM:
        case c10d::ReduceOp::AVG: at::add_out(out, a, b); return;
        case c10d::ReduceOp::PRODUCT: at::mul_out(out, a, b); return;
        case c10d::ReduceOp::MIN: at::minimum_out(out, a, b); return;
        case c10d::ReduceOp::MAX: at::maximum_out(out, a, b); return;
        case c10d::ReduceOp::BAND: at::bitwise_and_out(out, a, b); return;
        case c10d::ReduceOp::BOR: at::bitwise_or_out(out, a, b); return;
        case c10d::ReduceOp::BXOR: at::bitwise_xor_out(out, a, b); return;
        default: break;
    }
    throw Error(fmt::format("mpify's shared-memory group cannot reduce with op {}", static_cast<int>(op.op_)));
}

// memcpy, for `bytes` that may be 0: an empty tensor's data pointer may be null, which
// memcpy must never be given, even to copy nothing.
void copy_bytes(void* to, const void* from, std::size_t bytes) {
    if (bytes > 0) std::memcpy(to, from, bytes);
}

// The dense, contiguous tensor a collective works on, and copying it back when `tensor`
// was not contiguous (its storage then is not one run of bytes).
struct Contiguous {
    at::Tensor& tensor;
    at::Tensor work;
    explicit Contiguous(at::Tensor& t) : tensor(t), work(t.is_contiguous() ? t : t.contiguous()) {}
    void write_back() {
        if (!work.is_same(tensor)) {
            at::NoGradGuard no_grad;
            tensor.copy_(work);
        }
    }
    std::byte* bytes() const { return static_cast<std::byte*>(work.data_ptr()); }
    std::size_t size() const { return work.numel() * work.element_size(); }
};

}  // namespace

SharedMemoryGroup::SharedMemoryGroup(SharedSegment segment, std::chrono::milliseconds timeout,
                                     FormFallback form_fallback)
    : C10dBackend(segment.rank(), segment.world()), segment_(std::move(segment)), timeout_(timeout),
      form_fallback_(std::move(form_fallback)) {}

SharedMemoryGroup::~SharedMemoryGroup() {
    std::thread ending;
    {
        std::lock_guard lock(queue_mutex_);
        stopping_ = true;
        ending = std::move(thread_);
    }
    queue_changed_.notify_all();
    if (ending.joinable()) ending.join();
    std::lock_guard lock(fallback_mutex_);
    fallback_.reset();
}

void SharedMemoryGroup::run_collectives() {
    for (;;) {
        std::function<void()> next;
        {
            std::unique_lock lock(queue_mutex_);
            // A collective run on a waiting caller's thread finishes before the next starts.
            queue_changed_.wait(lock, [&] { return !running_ && (stopping_ || !queue_.empty()); });
            if (queue_.empty()) return;  // stopping, and all called have run
            next = std::move(queue_.front());
            queue_.pop_front();
            running_ = true;
        }
        next();
        release_claim();
    }
}

bool SharedMemoryGroup::claim_if_idle() {
    std::lock_guard lock(queue_mutex_);
    if (running_ || !queue_.empty()) return false;
    running_ = true;
    return true;
}

void SharedMemoryGroup::release_claim() {
    {
        std::lock_guard lock(queue_mutex_);
        running_ = false;
    }
    queue_changed_.notify_all();  // the group's thread may wait for it, with a collective queued
}

void SharedMemoryGroup::wait_for_peers(Clock::time_point deadline, const std::string& what) {
    segment_.barrier(deadline, what, waiting_caller_);
}

c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                          std::function<void(Clock::time_point)> collective) {
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    std::function<void()> queued = [this, future, outputs = std::move(outputs),
                                    collective = std::move(collective)]() mutable {
        try {
            collective(Clock::now() + timeout_);
            future->markCompleted(c10::IValue(outputs));
        } catch (...) {
            segment_.fail();  // the peers stop waiting for this rank
            future->setError(std::current_exception());
        }
    };
    auto work = c10::make_intrusive<SharedMemoryWork>(getRank(), type, future);
    if (const WaitingCaller* caller = WaitingCaller::of_this_thread(); caller != nullptr && claim_if_idle()) {
        waiting_caller_ = caller;
        queued();
        waiting_caller_ = nullptr;
        release_claim();
        return work;
    }
    {
        std::lock_guard lock(queue_mutex_);
        if (!thread_.joinable()) thread_ = start_signal_free_thread("mpify-shm-group", [this] { run_collectives(); });
        queue_.push_back(std::move(queued));
    }
    queue_changed_.notify_one();
    return work;
}

void SharedMemoryGroup::meet(const SegmentCall& call, bool first, std::uint64_t sequence, Clock::time_point deadline,
                             const std::string& what) {
    if (!first) return wait_for_peers(deadline, what);
    segment_.call(sequence, getRank()) = call;
    wait_for_peers(deadline, what);
    for (int r = 0; r < getSize(); ++r) {
        const SegmentCall& theirs = segment_.call(sequence, r);
        if (theirs == call) continue;
        // Every rank compares with every other: all of them throw, none waits.
        throw Error(fmt::format("mpify's shared-memory group: ranks called different collectives: rank {} {}, "
                                "rank {} {}. Every rank must make the same collective calls in the same order.",
                                getRank(), describe(call), r, describe(theirs)));
    }
}

void SharedMemoryGroup::run_allreduce(at::Tensor& tensor, c10d::ReduceOp op, std::uint64_t sequence,
                                      Clock::time_point deadline) {
    Contiguous data(tensor);
    const std::string what = "allreduce";
    SegmentCall call;
    call.kind = static_cast<std::uint32_t>(Kind::allreduce);
    call.dtype = static_cast<std::int32_t>(tensor.scalar_type());
    call.bytes = data.size();
    call.reduce = static_cast<std::int32_t>(op.op_);

    const std::size_t element = data.work.element_size();
    const std::size_t chunk_bytes = std::min(segment_.slot_bytes(), allreduce_chunk_bytes);
    const std::int64_t per_chunk = static_cast<std::int64_t>(std::max<std::size_t>(1, chunk_bytes / element));
    const std::int64_t total = data.work.numel();
    const int world = getSize(), rank = getRank();
    std::byte* const results = segment_.slot(world);
    std::int64_t done = 0;
    do {  // at least once: an empty tensor's ranks still meet
        const std::int64_t count = std::min(per_chunk, total - done);
        // Rank r reduces elements [count·r/world, count·(r+1)/world) of the chunk: its share.
        const std::int64_t first = count * rank / world, last = count * (rank + 1) / world;
        std::byte* const local = data.bytes() + done * element;
        // The peers' shares of this rank's values, into its slot at their own offsets; its
        // own share it reads where it is.
        copy_bytes(segment_.slot(rank), local, first * element);
        copy_bytes(segment_.slot(rank) + last * element, local + last * element, (count - last) * element);
        meet(call, done == 0, sequence, deadline, what);
        if (last > first) {
            const at::Tensor mine = view_of(local + first * element, last - first, data.work);
            auto share_of = [&](int r) {
                return r == rank ? mine : view_of(segment_.slot(r) + first * element, last - first, data.work);
            };
            // Over every rank's values in rank order: the same sums whatever the timing.
            at::Tensor result = view_of(results + first * element, last - first, data.work);
            if (world == 1) result.copy_(mine);
            for (int r = 1; r < world; ++r) fold(result, r == 1 ? share_of(0) : result, share_of(r), op);
            if (op == c10d::ReduceOp::AVG) result.div_(world);
        }
        wait_for_peers(deadline, what);
        // Every share from the results' slot, before anyone writes it again: that happens
        // only after the next chunk's first barrier, which this rank reaches after reading.
        copy_bytes(local, results, count * element);
        done += per_chunk;
    } while (done < total);
    data.write_back();
}

void SharedMemoryGroup::run_broadcast(at::Tensor& tensor, int root, std::uint64_t sequence,
                                      Clock::time_point deadline) {
    Contiguous data(tensor);
    const std::string what = fmt::format("broadcast from rank {}", root);
    SegmentCall call;
    call.kind = static_cast<std::uint32_t>(Kind::broadcast);
    call.dtype = static_cast<std::int32_t>(tensor.scalar_type());
    call.bytes = data.size();
    call.root = root;
    const std::size_t total = data.size();
    std::size_t done = 0;
    do {
        const std::size_t count = std::min(segment_.slot_bytes(), total - done);
        if (getRank() == root) copy_bytes(segment_.slot(root), data.bytes() + done, count);
        meet(call, done == 0, sequence, deadline, what);
        if (getRank() != root) copy_bytes(data.bytes() + done, segment_.slot(root), count);
        wait_for_peers(deadline, what);  // all have read before the root writes again
        done += segment_.slot_bytes();
    } while (done < total);
    if (getRank() != root) data.write_back();
}

void SharedMemoryGroup::run_allgather(std::vector<at::Tensor>& outputs, const at::Tensor& input, std::uint64_t sequence,
                                      Clock::time_point deadline) {
    const at::Tensor source = input.contiguous();
    const std::string what = "allgather";
    SegmentCall call;
    call.kind = static_cast<std::uint32_t>(Kind::allgather);
    call.dtype = static_cast<std::int32_t>(input.scalar_type());
    call.bytes = source.numel() * source.element_size();
    std::vector<Contiguous> destinations;
    destinations.reserve(outputs.size());
    for (at::Tensor& out : outputs) destinations.emplace_back(out);
    const auto* from = static_cast<const std::byte*>(source.data_ptr());
    const std::size_t total = call.bytes;
    std::size_t done = 0;
    do {
        const std::size_t count = std::min(segment_.slot_bytes(), total - done);
        copy_bytes(segment_.slot(getRank()), from + done, count);
        meet(call, done == 0, sequence, deadline, what);
        for (int r = 0; r < getSize(); ++r)
            copy_bytes(destinations[static_cast<std::size_t>(r)].bytes() + done, segment_.slot(r), count);
        wait_for_peers(deadline, what);  // all have read before anyone writes again
        done += segment_.slot_bytes();
    } while (done < total);
    for (Contiguous& d : destinations) d.write_back();
}

c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& options) {
    if (tensors.size() != 1 || !served(tensors[0]) || options.reduceOp == c10d::ReduceOp::PREMUL_SUM ||
        options.reduceOp == c10d::ReduceOp::UNUSED)
        return fallback().allreduce(tensors, options);
    at::Tensor tensor = tensors[0];
    const c10d::ReduceOp op = options.reduceOp;
    return enqueue(c10d::OpType::ALLREDUCE, tensors, [this, tensor, op](auto deadline) mutable {
        run_allreduce(tensor, op, next_sequence_++, deadline);
    });
}

c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& options) {
    if (tensors.size() != 1 || !served(tensors[0]) || options.rootTensor != 0)
        return fallback().broadcast(tensors, options);
    if (options.rootRank < 0 || options.rootRank >= getSize())
        throw UsageError(fmt::format("broadcast: root rank {} is not a rank of this group of {}", options.rootRank,
                                     getSize()));
    at::Tensor tensor = tensors[0];
    const int root = static_cast<int>(options.rootRank);
    return enqueue(c10d::OpType::BROADCAST, tensors, [this, tensor, root](auto deadline) mutable {
        run_broadcast(tensor, root, next_sequence_++, deadline);
    });
}

c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& options) {
    bool ours = inputs.size() == 1 && outputs.size() == 1 && served(inputs[0]) &&
                outputs[0].size() == static_cast<std::size_t>(getSize());
    if (ours)
        for (const at::Tensor& out : outputs[0])
            ours = ours && served(out) && out.scalar_type() == inputs[0].scalar_type() &&
                   out.numel() == inputs[0].numel();
    if (!ours) return fallback().allgather(outputs, inputs, options);
    std::vector<at::Tensor> gathered = outputs[0];
    at::Tensor input = inputs[0];
    return enqueue(c10d::OpType::ALLGATHER, gathered, [this, gathered, input](auto deadline) mutable {
        run_allgather(gathered, input, next_sequence_++, deadline);
    });
}

c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::barrier(const c10d::BarrierOptions&) {
    return enqueue(c10d::OpType::BARRIER, {}, [this](auto deadline) {
        SegmentCall call;
        call.kind = static_cast<std::uint32_t>(Kind::barrier);
        meet(call, true, next_sequence_++, deadline, "barrier");
    });
}

C10dBackend& SharedMemoryGroup::fallback() {
    std::lock_guard lock(fallback_mutex_);
    if (!fallback_) fallback_ = form_fallback_();
    return *fallback_;
}

void SharedMemoryGroup::abandon() noexcept {
    segment_.fail();
    std::lock_guard lock(fallback_mutex_);
    (void)fallback_.release();
}

c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& options) {
    return fallback().allreduce_coalesced(tensors, options);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& options) {
    return fallback().reduce(tensors, options);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& options) {
    return fallback()._allgather_base(output, input, options);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                      std::vector<at::Tensor>& inputs,
                                                                      const c10d::AllgatherOptions& options) {
    return fallback().allgather_coalesced(outputs, inputs, options);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& options) {
    return fallback().gather(outputs, inputs, options);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& options) {
    return fallback().scatter(outputs, inputs, options);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& options) {
    return fallback().reduce_scatter(outputs, inputs, options);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& options) {
    return fallback()._reduce_scatter_base(output, input, options);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& output_split_sizes,
                                                                std::vector<int64_t>& input_split_sizes,
                                                                const c10d::AllToAllOptions& options) {
    return fallback().alltoall_base(output, input, output_split_sizes, input_split_sizes, options);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions& options) {
    return fallback().alltoall(outputs, inputs, options);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
    return fallback().send(tensors, dst_rank, tag);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
    return fallback().recv(tensors, src_rank, tag);
}
c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
    return fallback().recvAnysource(tensors, tag);
}

MPIFY_END_DETAIL_NAMESPACE
