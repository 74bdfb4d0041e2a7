#!/usr/bin/env python3
"""mpify-kernel through the real Jupyter protocol: cells, requests, interrupts, restart.

  protocol_test.py --jupyter-path BUILD/share/jupyter --include-dir SRC/include
                   --lib-dir BUILD/bin [unittest options]
"""
import os
import time

import kernel_client
from kernel_client import KernelTest, ONE_PIXEL_PNG, children_of, errors, results, stream_text


class Cells(KernelTest):
    def test_compile_error_is_an_error_reply_and_the_next_cell_works(self):
        error, _ = self.assert_error("int broken = not_declared_anywhere;")
        self.assertEqual(error["ename"], "CompileError")
        self.assertIn("not_declared_anywhere", error["evalue"])
        self.assertTrue(any("error:" in line for line in error["traceback"]), error["traceback"])
        messages = self.assert_ok('#include <cstdio>\nint after_error = 7;\nstd::printf("after %d\\n", after_error);')
        self.assertEqual(stream_text(messages, "stdout"), "after 7\n")

    def test_exception_is_an_error_reply_with_type_and_what(self):
        error, _ = self.assert_error('#include <stdexcept>\nthrow std::out_of_range("index 12 of 3");')
        self.assertEqual(error["ename"], "std::out_of_range")
        self.assertEqual(error["evalue"], "index 12 of 3")
        messages = self.assert_ok('#include <cstdio>\nstd::printf("still here\\n");')
        self.assertEqual(stream_text(messages), "still here\n")

    def test_cells_mix_declarations_and_statements_and_see_earlier_cells(self):
        self.assert_ok("#include <iostream>\nint twice(int x) { return 2 * x; }\nint base = 20;\nbase += 1;")
        messages = self.assert_ok('std::cout << "twice " << twice(base) << std::endl;\n'
                                  'std::fprintf(stderr, "on stderr\\n");')
        self.assertEqual(stream_text(messages, "stdout"), "twice 42\n")
        self.assertEqual(stream_text(messages, "stderr"), "on stderr\n")

    def test_output_arrives_while_the_cell_runs(self):
        code = ('#include <cstdio>\n#include <unistd.h>\n'
                'for (int i = 0; i < 10; ++i) { std::printf("tick %d\\n", i); ::usleep(100000); }')
        messages, reply = self.kernel.run(code)
        self.assertEqual(reply["status"], "ok")
        ticks = [(at, c["text"]) for at, t, c in messages if t == "stream"]
        self.assertEqual("".join(text for _, text in ticks), "".join("tick {}\n".format(i) for i in range(10)))
        idle_at = messages[-1][0]
        self.assertGreaterEqual(len(ticks), 5, "output came in too few messages: {}".format(ticks))
        self.assertGreater(idle_at - ticks[0][0], 0.5, "the first line came only at the end of the cell")

    def test_file_magic_writes_the_file(self):
        messages = self.assert_ok("%%file written_by_cell.hpp\ninline int from_file() { return 5; }")
        self.assertIn("written_by_cell.hpp", stream_text(messages))
        with open(os.path.join(self.workdir, "written_by_cell.hpp")) as written:
            self.assertEqual(written.read(), "inline int from_file() { return 5; }\n")
        messages = self.assert_ok('#include "written_by_cell.hpp"\n#include <cstdio>\nstd::printf("%d\\n", from_file());')
        self.assertEqual(stream_text(messages), "5\n")

    def test_loading_a_missing_library_names_it_and_the_folders_searched(self):
        error, _ = self.assert_error('#pragma cling add_library_path("{}")\n#pragma cling load("libno_such_lib")'
                                     .format(kernel_client.ARGS.lib_dir))
        self.assertIn("libno_such_lib", error["evalue"])
        self.assertIn(os.path.realpath(kernel_client.ARGS.lib_dir), error["evalue"])

    def test_unknown_cling_pragma_is_an_error(self):
        error, _ = self.assert_error('#pragma cling optimize(2)')
        self.assertIn("optimize", error["evalue"])

    def test_display_and_update_in_place(self):
        code = ('#include <xcpp/xdisplay.hpp>\n'
                'struct Badge { std::string label; };\n'
                'nl::json mime_bundle_repr(const Badge& b) {\n'
                '    return {{"text/html", "<b>" + b.label + "</b>"}, {"text/plain", b.label},\n'
                '            {"image/svg+xml", "<svg xmlns=\'http://www.w3.org/2000/svg\' width=\'4\' height=\'4\'/>"}};\n'
                '}\n'
                'std::printf("before\\n");\n'
                'xcpp::display(Badge{"first"}, "badge");\n'
                'xcpp::display(Badge{"second"}, "badge", true);\n'
                'struct Dot {};\n'
                'nl::json mime_bundle_repr(const Dot&) { return {{"image/png", "%s"}}; }\n'
                'xcpp::display(Dot{});\n'
                'xcpp::display(42);' % ONE_PIXEL_PNG)
        messages = self.assert_ok(code)
        kinds = [(t, c) for _, t, c in messages if t in ("stream", "display_data", "update_display_data")]
        self.assertEqual([t for t, _ in kinds],
                         ["stream", "display_data", "update_display_data", "display_data", "display_data"])
        self.assertEqual(kinds[1][1]["data"]["text/html"], "<b>first</b>")
        self.assertIn("image/svg+xml", kinds[1][1]["data"])
        self.assertEqual(kinds[1][1]["transient"]["display_id"], "badge")
        self.assertEqual(kinds[2][1]["data"]["text/plain"], "second")
        self.assertEqual(kinds[3][1]["data"], {"image/png": ONE_PIXEL_PNG})
        self.assertEqual(kinds[4][1]["data"], {"text/plain": "42"})


class BrokenHeaderChain(KernelTest):
    def test_a_header_of_an_added_folder_failing_halfway_leaves_the_session_working(self):
        # Headers from a folder the notebook adds, a chain of them broken halfway (the
        # standard headers and a template parsed, then a header that is missing): the cell
        # fails, and the cells after it work. (Not a copy of mpify's headers: the kernel's
        # own mpify folder is searched first.)
        folder = os.path.join(self.workdir, "broken_include")
        os.makedirs(os.path.join(folder, "chain"))
        with open(os.path.join(folder, "chain", "top.hpp"), "w") as header:
            header.write("#pragma once\n#include <map>\n#include <string>\n"
                         "template <class T> struct Holder { std::map<std::string, T> items; };\n"
                         "#include <chain/middle.hpp>\n")
        with open(os.path.join(folder, "chain", "middle.hpp"), "w") as header:
            header.write("#pragma once\n#include <vector>\ninline int middle() { return 1; }\n"
                         "#include <chain/missing_piece.hpp>\n")
        self.assert_ok('#pragma cling add_include_path("{}")'.format(folder))
        error, _ = self.assert_error("#include <chain/top.hpp>")
        self.assertIn("missing_piece.hpp", error["evalue"])
        messages = self.assert_ok("1 + 1")
        self.assertEqual(results(messages), [{"text/plain": "2"}], messages)
        messages = self.assert_ok('#include <string>\nstd::string("still") + " here"')
        self.assertEqual(results(messages), [{"text/plain": '"still here"'}], messages)


class Requests(KernelTest):
    def test_kernel_info(self):
        info = self.kernel.request(self.kernel.client.kernel_info)
        self.assertEqual(info["language_info"]["name"], "c++")
        self.assertEqual(info["language_info"]["version"], "17")
        self.assertEqual(info["language_info"]["mimetype"], "text/x-c++src")

    def test_is_complete(self):
        def status(code):
            return self.kernel.request(lambda: self.kernel.client.is_complete(code))["status"]
        self.assertEqual(status("int f() {"), "incomplete")
        self.assertEqual(status("int x = f(1,"), "incomplete")
        self.assertEqual(status("int x = 1;"), "complete")
        self.assertEqual(status('const char* s = "}";'), "complete")
        self.assertEqual(status("}"), "invalid")

    def test_completion_offers_namespace_members_and_names(self):
        self.assert_ok('#pragma cling add_include_path("{}")\n#include <mpify/mpify.hpp>\nint my_counter = 0;'
                       .format(kernel_client.ARGS.include_dir))
        code = "auto r = mpify::ra"
        reply = self.kernel.request(lambda: self.kernel.client.complete(code, len(code)))
        self.assertIn("ranch", reply["matches"])
        self.assertEqual(reply["cursor_start"], len(code) - 2)
        self.assertEqual(reply["cursor_end"], len(code))
        code = "my_cou"
        reply = self.kernel.request(lambda: self.kernel.client.complete(code, len(code)))
        self.assertEqual(reply["matches"], ["my_counter"])


def load_test_functions(kernel):
    """Loads the kernel tests' functions library into `kernel` and runs a warm-up ranch."""
    messages, reply = kernel.run(
        '#pragma cling add_include_path("{include}")\n'
        '#pragma cling add_library_path("{lib}")\n'
        '#pragma cling load("libmpify_kernel_test_functions")\n'.format(include=kernel_client.ARGS.include_dir, lib=kernel_client.ARGS.lib_dir))
    assert reply["status"] == "ok", messages
    messages, reply = kernel.run(
        '#include <mpify/mpify.hpp>\n#include <mpify/ddp_guard.hpp>\n#include <cstdio>\n'
        'namespace kernel_test { int sleep_seconds(int); long all_reduce_for(int); }\n'
        'std::printf("warm-up %d\\n", mpify::ranch(2, kernel_test::sleep_seconds, 0).at(1));')
    assert reply["status"] == "ok" and "warm-up 1" in stream_text(messages), messages


class LibraryDeclarations(KernelTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        load_test_functions(cls.kernel)

    def test_a_declared_function_of_a_loaded_library_binds_to_its_definition(self):
        self.assert_ok("int kernel_test_square(int);")
        messages = self.assert_ok("kernel_test_square(7)")
        self.assertEqual(results(messages), [{"text/plain": "49"}], messages)
        # declared again, and called in the same cell
        messages = self.assert_ok("int kernel_test_square(int);\nint squared = kernel_test_square(5);\nsquared")
        self.assertEqual(results(messages), [{"text/plain": "25"}], messages)

    def test_a_function_declared_extern_too_binds_without_ambiguity(self):
        self.assert_ok("int kernel_test_square(int);")
        self.assert_ok("extern int kernel_test_square(int);")
        messages = self.assert_ok("kernel_test_square(6)")
        self.assertEqual(results(messages), [{"text/plain": "36"}], messages)
        # extern first, then plain, each called in its own cell
        messages = self.assert_ok("extern int kernel_test_square(int);\nint sq = kernel_test_square(4);\nsq")
        self.assertEqual(results(messages), [{"text/plain": "16"}], messages)
        messages = self.assert_ok("int kernel_test_square(int);\nkernel_test_square(3)")
        self.assertEqual(results(messages), [{"text/plain": "9"}], messages)
        # a pointer to a function declared extern is a variable: it stays as it was
        error, _ = self.assert_error("extern int (*kernel_test_pointer)(int);\nkernel_test_pointer(1)")
        self.assertIn("defined nowhere", error["evalue"])

    def test_cells_run_with_the_tensor_memory_cache_unless_turned_off(self):
        # libmpify_torch is loaded (the test functions' library links it): LibTorch's CPU
        # allocator is mpify's cache while a cell runs, its own again when turned off.
        messages = self.assert_ok("#include <c10/core/CPUAllocator.h>\n"
                                  "c10::GetCPUAllocator() != c10::GetDefaultCPUAllocator()")
        self.assertEqual(results(messages), [{"text/plain": "true"}], messages)
        self.assert_ok('setenv("MPIFY_TENSOR_MEMORY_CACHE", "0", 1);')
        messages = self.assert_ok("c10::GetCPUAllocator() != c10::GetDefaultCPUAllocator()")
        self.assertEqual(results(messages), [{"text/plain": "false"}], messages)
        self.assert_ok('unsetenv("MPIFY_TENSOR_MEMORY_CACHE");')

    def test_a_declared_function_nothing_defines_is_still_an_error(self):
        self.assert_ok("int kernel_test_nowhere(int);")
        error, _ = self.assert_error("kernel_test_nowhere(1)")
        self.assertIn("declared but defined nowhere", error["evalue"])


class Interrupts(KernelTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        load_test_functions(cls.kernel)

    def interrupt_after(self, code, started_text):
        """Runs `code`, interrupts the kernel once `started_text` was printed, and returns
        (seconds from interrupt to idle, error content)."""
        before = children_of(self.kernel.pid)
        msg_id = self.kernel.start(code)
        self.kernel.collect(msg_id, timeout=60, until=lambda m: started_text in stream_text(m))
        self.assertGreater(len(children_of(self.kernel.pid) - before), 0, "no worker was running")
        interrupted_at = time.monotonic()
        self.kernel.manager.interrupt_kernel()
        messages, reply = self.kernel.collect(msg_id, timeout=30)
        took = messages[-1][0] - interrupted_at
        self.assertEqual(reply["status"], "error")
        self.assertEqual(children_of(self.kernel.pid), before, "a worker outlived the interrupted call")
        return took, errors(messages)[0]

    def test_interrupt_stops_a_ranch_and_the_kernel_lives_on(self):
        took, error = self.interrupt_after("auto slept = mpify::ranch(2, kernel_test::sleep_seconds, 60);",
                                           "[rank 1] sleeping")
        self.assertEqual(error["ename"], "mpify::Interrupted")
        self.assertLess(took, 2.0)
        # The first interrupt says where every rank was as it stopped them.
        self.assertIn("where the ranks were:", error["evalue"])
        self.assertIn("- rank 1: kernel_test::sleep_seconds(...) at ", error["evalue"])
        messages = self.assert_ok('std::printf("after %d\\n", mpify::ranch(2, kernel_test::sleep_seconds, 0).at(1));')
        self.assertIn("after 1", stream_text(messages))

    def test_interrupt_stops_in_ddp_training(self):
        took, error = self.interrupt_after("auto rounds = mpify::in_ddp(2, kernel_test::all_reduce_for, 60);",
                                           "[rank 1] first round done")
        self.assertEqual(error["ename"], "mpify::Interrupted")
        self.assertLess(took, 2.0)
        # Its stack names the function, under whatever frames of LibTorch's it was in (an
        # OpenMP barrier of a tensor operation, with the wheels' LibTorch).
        self.assertRegex(error["evalue"], r"- rank 1: (\S+ <- )*kernel_test::all_reduce_for\(\.\.\.\) at ")
        self.assert_ok('std::printf("ok\\n");')


def descendants_of(pid):
    """Every process below `pid` (children, theirs, ...)."""
    found, frontier = set(), {pid}
    while frontier:
        frontier = set().union(*(children_of(p) for p in frontier)) - found
        found |= frontier
    return found


def alive(pid):
    """True while `pid` is a process that is not a zombie."""
    try:
        with open("/proc/{}/stat".format(pid)) as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def command_name(pid):
    with open("/proc/{}/comm".format(pid)) as comm:
        return comm.read().strip()


class RestartDuringARemoteCall(KernelTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        load_test_functions(cls.kernel)

    def test_a_restart_while_a_rank_runs_elsewhere_leaves_nothing_running(self):
        # Rank 1 through the command launcher (%C: its agent here, but started, linked and
        # relayed as on another machine); the kernel, rank 0, is killed as a restart does
        # when the kernel does not answer.
        msg_id = self.kernel.start('mpify::Options elsewhere;\n'
                                   'elsewhere.placement = mpify::Placement::by_command("%C", {"localhost"}, 1);\n'
                                   'auto slept = mpify::ranch(elsewhere, 2, kernel_test::sleep_seconds, 60);')
        self.kernel.collect(msg_id, timeout=60, until=lambda m: "@" in stream_text(m) and
                            "sleeping" in stream_text(m).split("@", 1)[1])
        running = descendants_of(self.kernel.pid)
        names = {pid: command_name(pid) for pid in running if alive(pid)}
        print("running before the restart: {}".format(sorted(names.values())))
        self.assertGreaterEqual(len(names), 4, "the launcher, the agent, its worker and the stand-in: {}".format(names))
        self.kernel.manager.restart_kernel(now=True)
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in running) and time.monotonic() < deadline:
            time.sleep(0.1)  # processes of a killed kernel end on their own: watched, not awaited
        self.assertEqual({pid: names.get(pid) for pid in running if alive(pid)}, {},
                         "processes of the call outlived the kernel's restart")
        self.kernel.client.wait_for_ready(timeout=60)


class Restart(KernelTest):
    def test_restart_forgets_the_session_and_works(self):
        self.assert_ok("int before_restart = 1;")
        old_pid = self.kernel.pid
        self.kernel.manager.restart_kernel(now=False)
        self.kernel.client.wait_for_ready(timeout=60)
        self.assertNotEqual(self.kernel.pid, old_pid)
        error, _ = self.assert_error("int again = before_restart;")
        self.assertEqual(error["ename"], "CompileError")
        self.assert_ok("int after_restart = 2;")


if __name__ == "__main__":
    kernel_client.main()
