// The engine of DistributedDataParallel: bucketed gradient all-reduce that overlaps
// the backward pass.
//
// Parameters are grouped into buckets in reverse registration order (their gradients
// tend to become ready in that order), each bucket holding one dtype and about
// bucket_bytes. A hook on every parameter copies its gradient into the bucket's flat
// buffer; when a bucket is full its all-reduce starts at once, while autograd computes
// the remaining gradients. Buckets start strictly in order, so every rank issues the
// same sequence of collectives. When backward ends (an engine callback), the buckets not
// yet started (parameters without a gradient this step contribute zeros) are started, a
// small "which parameters had a gradient anywhere" map is summed, everything is waited
// for, and each used parameter's .grad becomes the average.
#include "ddp/active_group.hpp"
#include "ddp/collective_wait.hpp"

#include <mpify/distributed_data_parallel.hpp>
#include <mpify/error.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>

MPIFY_BEGIN_DETAIL_NAMESPACE

namespace {

constexpr const char* reducer_site = "mpify::DistributedDataParallel";

// The bucket's sum that a communication hook's future ended with: a tensor, or a list
// whose first tensor it is, shaped as `flat`.
at::Tensor hooked_sum(const c10::IValue& value, const at::Tensor& flat) {
    at::Tensor sum;
    if (value.isTensor()) sum = value.toTensor();
    else if (value.isTensorList() && !value.toTensorList().empty()) sum = value.toTensorList().get(0);
    if (!sum.defined() || sum.numel() != flat.numel())
        throw UsageError(fmt::format("{}: a communication hook's future must end with the bucket's sum, a tensor of "
                                     "{} elements (or a list whose first tensor it is); it ended with {}",
                                     reducer_site, flat.numel(),
                                     sum.defined() ? std::to_string(sum.numel()) + " elements" : value.tagKind()));
    return sum.reshape(flat.sizes());
}

// The reducer's state; shared with the autograd callbacks it queues (which may outlive
// a step), weakly with the gradient hooks.
struct ReducerState : std::enable_shared_from_this<ReducerState> {
    struct Bucket {
        std::vector<std::size_t> members;  // parameter indices
        at::Tensor flat;
        std::vector<at::Tensor> views;     // views[k]: members[k]'s slice, shaped like it
        std::size_t pending = 0;           // members without a gradient yet this step
        c10::intrusive_ptr<c10d::Work> work;
        std::uint64_t sequence = 0;  // of its all-reduce in the record
        c10::intrusive_ptr<c10::ivalue::Future> hooked;  // with a communication hook: its future
    };

    std::vector<at::Tensor> parameters;
    std::vector<unsigned> hook_handles;
    std::vector<std::size_t> bucket_of, slot_of;
    std::vector<Bucket> buckets;
    std::vector<bool> ready;
    std::size_t next_bucket = 0;
    bool in_step = false;
    bool sync = true;
    std::size_t sent_during = 0, sent_after = 0;
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    int world_size = 1;
    CommunicationHook hook;  // empty: each bucket all-reduced as it is
    std::mutex mutex;

    void build_buckets(std::size_t bucket_bytes) {
        bucket_of.assign(parameters.size(), 0);
        slot_of.assign(parameters.size(), 0);
        std::map<at::ScalarType, std::size_t> open;  // dtype -> bucket being filled
        std::map<at::ScalarType, std::size_t> bytes;
        for (std::size_t i = parameters.size(); i-- > 0;) {
            const at::Tensor& p = parameters[i];
            const at::ScalarType type = p.scalar_type();
            if (open.count(type) == 0 || bytes[type] >= bucket_bytes) {
                open[type] = buckets.size();
                bytes[type] = 0;
                buckets.emplace_back();
            }
            Bucket& b = buckets[open[type]];
            bucket_of[i] = open[type];
            slot_of[i] = b.members.size();
            b.members.push_back(i);
            bytes[type] += static_cast<std::size_t>(p.numel()) * p.element_size();
        }
        for (Bucket& b : buckets) {
            std::int64_t total = 0;
            for (std::size_t i : b.members) total += parameters[i].numel();
            b.flat = at::zeros({total}, parameters[b.members.front()].options().requires_grad(false));
            std::int64_t offset = 0;
            for (std::size_t i : b.members) {
                const std::int64_t n = parameters[i].numel();
                b.views.push_back(b.flat.narrow(0, offset, n).view(parameters[i].sizes()));
                offset += n;
            }
        }
    }

    // On autograd's thread, before the gradient is accumulated into .grad.
    void on_gradient(std::size_t i, const at::Tensor& gradient) {
        std::lock_guard lock(mutex);
        if (!sync) return;
        if (!in_step) begin_step();
        if (ready[i]) return;  // a second gradient for the same leaf: already counted
        ready[i] = true;
        Bucket& b = buckets[bucket_of[i]];
        at::Tensor& slot = b.views[slot_of[i]];
        at::NoGradGuard no_grad;
        slot.copy_(gradient);
        // What no_sync() steps accumulated so far is part of this step's gradient.
        if (parameters[i].grad().defined()) slot.add_(parameters[i].grad());
        if (--b.pending == 0) send_ready_buckets(true);
    }

    void begin_step() {
        in_step = true;
        next_bucket = 0;
        std::fill(ready.begin(), ready.end(), false);
        for (Bucket& b : buckets) {
            b.pending = b.members.size();
            b.work.reset();
            b.hooked.reset();
        }
        // Runs once the whole backward pass is done.
        torch::autograd::Engine::get_default_engine().queue_callback([self = shared_from_this()] {
            self->finish_step();
        });
    }

    void send_ready_buckets(bool during_backward) {
        while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) {
            Bucket& b = buckets[next_bucket];
            if (hook) {
                GradientBucket given{next_bucket, b.flat};
                b.hooked = hook(given);
                if (!b.hooked)
                    throw UsageError(fmt::format("{}: the communication hook returned no future for bucket {}",
                                                 reducer_site, next_bucket));
            } else {
                std::vector<at::Tensor> tensors{b.flat};
                b.sequence =
                    record_collective("allreduce", &tensors[0], "SUM", reducer_site, static_cast<int>(next_bucket));
                b.work = group->allreduce(tensors);
            }
            ++(during_backward ? sent_during : sent_after);
            ++next_bucket;
        }
    }

    void finish_step() {
        std::lock_guard lock(mutex);
        in_step = false;
        at::NoGradGuard no_grad;
        at::Tensor used = at::zeros({static_cast<std::int64_t>(parameters.size())}, at::kInt);
        auto used_flags = used.accessor<int, 1>();
        for (std::size_t i = 0; i < parameters.size(); ++i) {
            const bool has_gradient = ready[i] || parameters[i].grad().defined();
            used_flags[static_cast<std::int64_t>(i)] = has_gradient ? 1 : 0;
            if (ready[i]) continue;
            Bucket& b = buckets[bucket_of[i]];
            at::Tensor& slot = b.views[slot_of[i]];
            if (parameters[i].grad().defined()) slot.copy_(parameters[i].grad());
            else slot.zero_();
            --b.pending;
        }
        send_ready_buckets(false);
        std::vector<at::Tensor> used_list{used};
        const std::uint64_t used_sequence = record_collective("allreduce", &used, "SUM", "mpify::DDP used parameters");
        run_collective(reducer_site, used_sequence, [&] { return group->allreduce(used_list); });
        for (Bucket& b : buckets) {  // throws if a peer failed
            if (!b.hooked) {
                wait_for_collective(*b.work, reducer_site, b.sequence);
                continue;
            }
            wait_for_future(*b.hooked, reducer_site);
            const at::Tensor sum = hooked_sum(b.hooked->value(), b.flat);
            if (!sum.is_same(b.flat)) b.flat.copy_(sum);
        }
        auto used_anywhere = used.accessor<int, 1>();
        for (std::size_t i = 0; i < parameters.size(); ++i) {
            if (used_anywhere[static_cast<std::int64_t>(i)] == 0) continue;  // untouched, as without DDP
            const at::Tensor average = buckets[bucket_of[i]].views[slot_of[i]].div(world_size);
            at::Tensor& grad = parameters[i].mutable_grad();
            if (grad.defined()) grad.copy_(average);
            else grad = average;
        }
    }
};

// The reducer itself: registers the hooks, and removes them when it goes.
class BucketedReducer final : public GradientReducer {
public:
    BucketedReducer(std::vector<at::Tensor> parameters, std::size_t bucket_bytes, CommunicationHook hook)
        : state_(std::make_shared<ReducerState>()) {
        const ProcessGroupState& active = active_group("mpify::DistributedDataParallel");
        state_->group = active.group();
        state_->world_size = active.world_size;
        state_->hook = std::move(hook);
        for (at::Tensor& p : parameters)
            if (p.requires_grad()) state_->parameters.push_back(p);
        if (state_->parameters.empty()) return;
        state_->ready.assign(state_->parameters.size(), false);
        state_->build_buckets(std::max<std::size_t>(bucket_bytes, 1));
        std::weak_ptr<ReducerState> weak = state_;
        for (std::size_t i = 0; i < state_->parameters.size(); ++i) {
            state_->hook_handles.push_back(state_->parameters[i].register_hook([weak, i](const at::Tensor& gradient) {
                if (auto self = weak.lock()) self->on_gradient(i, gradient);
            }));
        }
    }

    ~BucketedReducer() override {
        for (std::size_t i = 0; i < state_->hook_handles.size(); ++i)
            state_->parameters[i].remove_hook(state_->hook_handles[i]);
    }

    void set_sync(bool sync) override {
        std::lock_guard lock(state_->mutex);
        state_->sync = sync;
    }

    bool sync() const override {
        std::lock_guard lock(state_->mutex);
        return state_->sync;
    }

    std::size_t bucket_count() const override { return state_->buckets.size(); }

    std::size_t buckets_sent_during_backward() const override {
        std::lock_guard lock(state_->mutex);
        return state_->sent_during;
    }

    std::size_t buckets_sent_after_backward() const override {
        std::lock_guard lock(state_->mutex);
        return state_->sent_after;
    }

private:
    std::shared_ptr<ReducerState> state_;
};

}  // namespace

GradientReducer::~GradientReducer() = default;

std::unique_ptr<GradientReducer> make_gradient_reducer(std::vector<at::Tensor> parameters, std::size_t bucket_bytes,
                                                       CommunicationHook hook) {
    return std::make_unique<BucketedReducer>(std::move(parameters), bucket_bytes, std::move(hook));
}

void broadcast_from_rank0(const std::vector<at::Tensor>& tensors) {
    const ProcessGroupState& active = active_group("mpify::DistributedDataParallel");
    at::NoGradGuard no_grad;
    std::map<at::ScalarType, std::vector<at::Tensor>> by_type;
    for (const at::Tensor& t : tensors) by_type[t.scalar_type()].push_back(t);
    for (auto& [type, group] : by_type) {
        std::vector<at::Tensor> flat_pieces;
        for (const at::Tensor& t : group) flat_pieces.push_back(t.detach().reshape({-1}));
        std::vector<at::Tensor> flat{at::cat(flat_pieces)};
        c10d::BroadcastOptions options;
        options.rootRank = 0;
        const std::uint64_t sequence = record_collective("broadcast", &flat[0], "from rank 0", reducer_site);
        run_collective(reducer_site, sequence, [&] { return active.group()->broadcast(flat, options); });
        std::int64_t offset = 0;
        for (const at::Tensor& t : group) {
            t.detach().copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
            offset += t.numel();
        }
    }
}

MPIFY_END_DETAIL_NAMESPACE
