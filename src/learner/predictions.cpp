// Learner::get_preds: predictions for a whole data set, gathered over the ranks.
#include <mpify/learner/learner.hpp>

#include "learner/rank_rows.hpp"

#include <mpify/ddp.hpp>

#include <torch/torch.h>

MPIFY_BEGIN_NAMESPACE
namespace learner {

Predictions Learner::get_preds() { return get_preds(data_.valid); }

Predictions Learner::get_preds(const DataSet& data) {
    torch::NoGradGuard no_grad;
    model_->eval();
    const std::int64_t size = data.size();
    Predictions out;
    out.targets = data.targets;
    if (size == 0) {
        out.outputs = torch::empty({0});
        out.losses = torch::empty({0});
        return out;
    }
    // No item twice, none left out, no padding to drop.
    const at::Tensor rows = rank_rows(rank_, world_size_, size);
    // A rank with no item (more ranks than items) still learns the outputs' shape.
    const at::Tensor shape_probe = rows.numel() > 0 ? at::Tensor()
                                                    : model_->forward(batch_of(data, rows.new_zeros({1})).first).cpu();
    std::vector<at::Tensor> outputs, losses;
    for (std::int64_t start = 0; start < rows.size(0); start += data_.batch_size) {
        const at::Tensor some = rows.narrow(0, start, std::min(data_.batch_size, rows.size(0) - start));
        const auto [inputs, on_device_target] = batch_of(data, some);
        // On the host, item by item: on a GPU each item's loss would be a round trip.
        const at::Tensor output = model_->forward(inputs).cpu(), target = on_device_target.cpu();
        at::Tensor item_losses = torch::empty({some.size(0)}, torch::kFloat);
        for (std::int64_t i = 0; i < some.size(0); ++i)
            item_losses[i] = loss_(output.narrow(0, i, 1), target.narrow(0, i, 1)).item<float>();
        outputs.push_back(output);
        losses.push_back(item_losses);
    }
    const at::Tensor mine = outputs.empty() ? shape_probe.narrow(0, 0, 0) : torch::cat(outputs);
    std::vector<std::int64_t> full_shape = mine.sizes().vec();
    full_shape[0] = size;
    // Each rank writes its rows into zeros; a sum over the ranks then holds every row.
    out.outputs = torch::zeros(full_shape, mine.options());
    out.losses = torch::zeros({size}, torch::kFloat);
    if (rows.numel() > 0) {
        out.outputs.index_copy_(0, rows, mine);
        out.losses.index_copy_(0, rows, torch::cat(losses));
    }
    if (ddp_model_) {
        mpify::ddp::all_reduce(out.outputs);
        mpify::ddp::all_reduce(out.losses);
    }
    return out;
}

}  // namespace learner
MPIFY_END_NAMESPACE
