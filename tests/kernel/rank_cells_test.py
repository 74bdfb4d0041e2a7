#!/usr/bin/env python3
"""%%mpify: a function written in a cell runs on the ranks in one step, and editing the
cell and running it again runs the new code everywhere.

  rank_cells_test.py --jupyter-path BUILD/share/jupyter --include-dir SRC/include
                     --lib-dir BUILD/bin [unittest options]
"""
import os

import kernel_client
from kernel_client import KernelTest, children_of, results, stream_text


class RankCells(KernelTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # load_source's cache inside the test's folder: nothing left in the user's.
        os.environ["MPIFY_CACHE_DIR"] = os.path.join(cls.workdir, "cache")
        messages, reply = cls.kernel.run(
            '#pragma cling add_include_path("{include}")\n'
            '#pragma cling add_library_path("{lib}")\n'
            '#pragma cling load("libmpify")\n#include <mpify/mpify.hpp>'.format(
                include=kernel_client.ARGS.include_dir, lib=kernel_client.ARGS.lib_dir))
        assert reply["status"] == "ok", messages

    def assert_shows(self, code, text):
        messages = self.assert_ok(code)
        self.assertEqual(results(messages), [{"text/plain": text}], messages)

    def test_a_function_defined_in_a_cell_runs_on_every_rank_and_edits_run_new_code(self):
        lasting = None  # the warm template, the kernel's one lasting child, after the first call
        for version in (1, 2, 3):
            messages = self.assert_ok(
                "%%mpify\n#include <mpify/mpify.hpp>\n"
                "int edited_on_ranks(int x) {{ return {} * 100 + x + mpify::local_rank(); }}\n"
                "MPIFY_REGISTER(edited_on_ranks);".format(version))
            self.assertIn("edited_on_ranks", stream_text(messages, "stdout"))
            base = version * 100 + 5
            self.assert_shows("mpify::ranch(3, edited_on_ranks, 5)", "{{ {}, {}, {} }}".format(base, base + 1, base + 2))
            self.assert_shows("edited_on_ranks(0)", str(version * 100))  # called in the kernel itself
            lasting = lasting if lasting is not None else children_of(self.kernel.pid)
            self.assertEqual(children_of(self.kernel.pid), lasting, "a worker outlived its call")

    def test_types_declared_in_the_cell_travel_and_are_usable_after_it(self):
        self.assert_ok(
            "%%mpify\n#include <mpify/mpify.hpp>\n#include <string>\n"
            "struct Shipment {\n  std::string label; int count = 0;\n"
            "  template <class Archive> void serialize(Archive& a, unsigned) { a & label & count; }\n};\n"
            "Shipment stamped(Shipment s) { s.label += \"@\" + std::to_string(mpify::local_rank()); ++s.count; return s; }\n"
            "MPIFY_REGISTER(stamped);\n"
            "int shipments_made = 0;\n")
        self.assert_ok('auto stamped_back = mpify::ranch(2, stamped, Shipment{"box", 1});')
        self.assert_shows("stamped_back[1].label", '"box@1"')
        self.assert_shows("stamped_back[0].count + stamped_back[1].count", "4")
        self.assert_shows("shipments_made", "0")  # the library's variable, declared extern

    def test_a_cell_that_does_not_compile_names_the_line_and_leaves_the_session_as_it_was(self):
        self.assert_ok("%%mpify\n#include <mpify/mpify.hpp>\nint kept_on_ranks(int x) { return x; }\n"
                       "MPIFY_REGISTER(kept_on_ranks);")
        error, _ = self.assert_error("%%mpify\n#include <mpify/mpify.hpp>\n"
                                     "int kept_on_ranks(int x) { return x + not_declared_here; }\n"
                                     "MPIFY_REGISTER(kept_on_ranks);")
        self.assertEqual(error["ename"], "CompileError")
        self.assertIn("not_declared_here", error["evalue"])
        self.assertTrue(any(":3:" in line for line in error["traceback"]), error["traceback"])
        self.assert_shows("mpify::ranch(2, kept_on_ranks, 7)", "{ 7, 7 }")

    def test_a_rank_killed_in_a_cell_function_restarts_and_the_cell_finishes(self):
        self.assert_ok("%%mpify\n#include <mpify/mpify.hpp>\n#include <csignal>\n"
                       "int survives_a_kill(int x) {\n"
                       "  if (mpify::restart_count() == 0 && mpify::local_rank() == 1) std::raise(SIGKILL);\n"
                       "  return 10 * mpify::restart_count() + x + mpify::local_rank();\n}\n"
                       "MPIFY_REGISTER(survives_a_kill);")
        before = children_of(self.kernel.pid)
        self.assert_ok("mpify::Options restarting; restarting.restarts = 1;")
        messages = self.assert_ok("mpify::ranch(restarting, 2, survives_a_kill, 0)")
        self.assertEqual(results(messages), [{"text/plain": "{ 10, 11 }"}], messages)
        self.assertIn("rank 1 was killed by SIGKILL", stream_text(messages, "stderr"))
        self.assertIn("restart 1 of 1 on 2 ranks", stream_text(messages, "stderr"))
        for pid in children_of(self.kernel.pid) - set(before):  # no rank of either attempt is left
            with open("/proc/{}/comm".format(pid)) as comm:
                self.assertEqual(comm.read().strip(), "mpify-template")
        self.assert_shows("mpify::restart_count()", "0")

    def test_flags_after_the_magic_reach_the_compiler(self):
        self.assert_ok("%%mpify -DSCALE=3\n#include <mpify/mpify.hpp>\n"
                       "int scaled_on_ranks(int x) { return SCALE * x; }\nMPIFY_REGISTER(scaled_on_ranks);")
        self.assert_shows("mpify::ranch(2, scaled_on_ranks, 2)", "{ 6, 6 }")


if __name__ == "__main__":
    kernel_client.main()
