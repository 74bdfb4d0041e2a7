#!/usr/bin/env python3
"""mpify::GradScaler against Python's torch.amp.GradScaler, step for step.

Runs grad_scaler_trace (C++) and the same steps here with the Python PyTorch of the same
version, and compares the two prints line by line: whether each step was taken, the
scale, the growth count and every parameter value (9 significant digits: float32 exact).

  grad_scaler_reference_test.py TRACE_PROGRAM

Exits 77 (ctest's skip) with the reason when this Python has no torch of the version the
program was built with.
"""
import subprocess
import sys


def python_trace(torch):
    lines = [f"torch {torch.__version__.split('.')[0]}.{torch.__version__.split('.')[1]}"]
    w1 = (torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.0625 - 0.375).requires_grad_()
    b1 = torch.zeros(3).requires_grad_()
    w2 = torch.tensor([[0.25, -0.125, 0.5]]).requires_grad_()
    x = (torch.arange(32, dtype=torch.float32).remainder(7) - 3).reshape(8, 4) / 4
    y = torch.arange(8, dtype=torch.float32).reshape(8, 1) / 8
    parameters = [w1, b1, w2]
    optimizer = torch.optim.SGD(parameters, lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=16384.0, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=3)
    for step in range(12):
        optimizer.zero_grad()
        out = torch.relu(x.matmul(w1.t()) + b1).matmul(w2.t())
        loss = (out - y).pow(2).mean()
        scaler.scale(loss).backward()
        with torch.no_grad():
            if step == 3:
                w1.grad[0][0] = float("inf")
            if step == 7:
                b1.grad[1] = float("nan")
        if step == 5:
            scaler.unscale_(optimizer)
            with torch.no_grad():
                for parameter in parameters:
                    parameter.grad.mul_(0.5)
        found_before = [p.detach().clone() for p in parameters]
        scaler.step(optimizer)
        # torch's step returns the optimizer's result, not whether it stepped: it stepped
        # when no inf or NaN was found (read from the scaler, as its own update reads it).
        found_inf = sum(v.item() for v in scaler._found_inf_per_device(optimizer).values())
        stepped = found_inf == 0
        if not stepped:
            assert all(torch.equal(a, p.detach()) for a, p in zip(found_before, parameters))
        if step == 9:
            scaler.update(1024.0)
        else:
            scaler.update()
        if step == 10:
            resumed = torch.amp.GradScaler("cpu")
            resumed.load_state_dict(scaler.state_dict())
            scaler = resumed
        values = " ".join(f"{float(v):.9g}" for p in parameters for v in p.detach().flatten().tolist())
        lines.append(f"step {step} stepped {int(stepped)} scale {scaler.get_scale():.9g} "
                     f"tracker {scaler._get_growth_tracker()} params {values}")
    return lines


def main():
    program = sys.argv[1]
    cpp = subprocess.run([program], check=True, capture_output=True, text=True).stdout.splitlines()
    try:
        import torch
    except ImportError:
        print(f"skipped: {sys.executable} has no torch to compare with ({cpp[0]} built the program)")
        return 77
    py_version = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if cpp[0] != f"torch {py_version}":
        print(f"skipped: the program was built with {cpp[0]}, {sys.executable} has torch {torch.__version__}")
        return 77
    torch.set_num_threads(1)
    reference = python_trace(torch)
    for number, (ours, theirs) in enumerate(zip(cpp, reference)):
        if ours != theirs:
            print(f"line {number + 1} differs:\n  mpify:  {ours}\n  Python: {theirs}")
            return 1
    if len(cpp) != len(reference):
        print(f"mpify printed {len(cpp)} lines, Python {len(reference)}")
        return 1
    skipped = sum(1 for line in cpp if " stepped 0 " in line)
    print(f"{len(cpp) - 1} steps equal to torch.amp.GradScaler's ({skipped} skipped, {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
