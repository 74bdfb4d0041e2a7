#!/usr/bin/env python3
"""A training cell interrupted in mpify's kernel and run again resumes from its last
checkpoint: in_ddp of the intro example with a checkpoint_dir, the kernel interrupted in
the second epoch, then the same cell again.

  interrupted_cell_test.py --jupyter-path BUILD/share/jupyter --include-dir SRC/include
                           --examples-dir SRC/examples --lib-dir BUILD/bin
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "kernel"))
import kernel_client  # noqa: E402
from kernel_client import KernelTest, children_of, errors, stream_text  # noqa: E402

EXAMPLES = None
FIRST_EPOCH_LINE = re.compile(r"^1\s+\d+\s+\d+\.\d+", re.M)  # epoch 1's row of the progress table


class InterruptedCell(KernelTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()  # the kernel takes MPIFY_LEARNER_MAX_BATCHES (short epochs) from ctest
        messages, reply = cls.kernel.run(
            '#pragma cling add_include_path("{include}")\n#pragma cling add_include_path("{examples}")\n'
            '#pragma cling add_library_path("{lib}")\n#pragma cling load("libmpify_examples")'.format(
                include=kernel_client.ARGS.include_dir, examples=EXAMPLES, lib=kernel_client.ARGS.lib_dir))
        assert reply["status"] == "ok", messages
        messages, reply = cls.kernel.run("#include <mpify/mpify.hpp>\n#include <mpify/ddp_guard.hpp>\n"
                                         "#include <intro/intro.hpp>\nusing namespace mpify_examples;\nusing namespace mpify::learner;")
        assert reply["status"] == "ok", messages

    def test_an_interrupted_training_cell_run_again_resumes(self):
        checkpoints = os.path.join(self.workdir, "checkpoints")
        self.assert_ok('intro::Config config; config.epochs = 4; config.checkpoint_dir = "{}";'.format(checkpoints))
        cell = ("auto trained = mpify::in_ddp(2, intro::train, config);\n"
                'std::printf("epochs in the history: %zu\\n", trained.history.epochs.size());')
        before = children_of(self.kernel.pid)
        msg_id = self.kernel.start(cell)
        self.kernel.collect(msg_id, timeout=120, until=lambda m: FIRST_EPOCH_LINE.search(stream_text(m, "stdout")))
        self.kernel.manager.interrupt_kernel()
        messages, reply = self.kernel.collect(msg_id, timeout=30)
        self.assertEqual(reply["status"], "error", messages)
        self.assertEqual(errors(messages)[0]["ename"], "mpify::Interrupted")
        left = {p for p in children_of(self.kernel.pid) - before if comm(p) != "mpify-template"}
        self.assertEqual(left, set(), "a rank outlived the interrupted call")

        messages = self.assert_ok(cell, timeout=180)
        out = stream_text(messages, "stdout")
        self.assertRegex(out, r"resuming after epoch [1-3] of 4")
        self.assertIn("epochs in the history: 4", out)


def comm(pid):
    try:
        with open("/proc/{}/comm".format(pid)) as f:
            return f.read().strip()
    except OSError:
        return ""


if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--examples-dir", required=True)
    known, rest = parser.parse_known_args()
    EXAMPLES = os.path.abspath(known.examples_dir)
    sys.argv = [sys.argv[0]] + rest
    kernel_client.main()
