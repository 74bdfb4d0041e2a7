#!/usr/bin/env python3
"""What a xeus-cling user reaches for: a cell's value as Out[n], %timeit, !command, ?name
and Shift-Tab, std::cin, clear_output, libraries by name, the standard headers at hand.

  features_test.py --jupyter-path BUILD/share/jupyter --include-dir SRC/include
                   --lib-dir BUILD/bin [unittest options]
"""
import re

import kernel_client
from kernel_client import KernelTest, errors, results, stream_text


class Values(KernelTest):
    def assert_shows(self, code, text):
        messages = self.assert_ok(code)
        self.assertEqual(results(messages), [{"text/plain": text}], messages)

    def test_numbers_bool_and_characters(self):
        self.assert_shows("int answer = 41;\nanswer + 1", "42")
        self.assert_shows("7u * 6", "42")
        self.assert_shows("2.5 * 2", "5.0000000")
        self.assert_shows("1.5f", "1.50000f")
        self.assert_shows("123.456", "123.45600")
        self.assert_shows("int* no_pointer = nullptr;\nno_pointer", "nullptr")
        self.assert_shows("3 > 2", "true")
        self.assert_shows("'x'", "'x'")

    def test_strings_are_quoted(self):
        self.assert_shows('std::string greeting = "hi";\ngreeting + " there"', '"hi there"')
        self.assert_shows('"plain"', '"plain"')

    def test_containers_pairs_and_tuples(self):
        self.assert_shows("std::vector<int>{1, 2, 3}", "{ 1, 2, 3 }")
        self.assert_shows("std::vector<int>{}", "{}")
        self.assert_shows('std::map<std::string, int>{{"a", 1}, {"b", 2}}', '{ "a" => 1, "b" => 2 }')
        self.assert_shows('std::make_pair(1, std::string("one"))', '{ 1, "one" }')
        self.assert_shows("#include <tuple>\nstd::make_tuple(1, 'a', true)", "{ 1, 'a', true }")
        self.assert_shows("std::vector<std::vector<int>>{{1}, {2, 3}}", "{ { 1 }, { 2, 3 } }")

    def test_other_types_by_their_stream_operator_or_their_name(self):
        self.assert_ok("struct Money { int cents; };\n"
                       "std::ostream& operator<<(std::ostream& out, const Money& m) { return out << m.cents / 100.0 << \" EUR\"; }")
        self.assert_shows("Money{250}", "2.5 EUR")
        self.assert_ok("struct Opaque { int hidden = 1; };\nOpaque opaque;")
        messages = self.assert_ok("opaque")
        self.assertRegex(results(messages)[0]["text/plain"], r"^Opaque @0x[0-9a-f]+$")

    def test_a_type_with_a_mime_bundle_is_shown_rich(self):
        self.assert_ok("#include <xcpp/xdisplay.hpp>\nstruct Swatch { std::string color; };\n"
                       "nl::json mime_bundle_repr(const Swatch& s) {\n"
                       "    return {{\"text/html\", \"<b style='color:\" + s.color + \"'>\" + s.color + \"</b>\"},\n"
                       "            {\"text/plain\", s.color}};\n}")
        messages = self.assert_ok('Swatch{"red"}')
        self.assertEqual(results(messages), [{"text/html": "<b style='color:red'>red</b>", "text/plain": "red"}])

    def test_a_void_expression_runs_and_shows_nothing(self):
        self.assert_ok('void say_hello() { std::cout << "hello" << std::endl; }')
        messages = self.assert_ok("say_hello()")
        self.assertEqual(stream_text(messages), "hello\n")
        self.assertEqual(results(messages), [])

    def test_a_statement_ending_in_a_semicolon_shows_nothing(self):
        self.assertEqual(results(self.assert_ok("int quiet = 3;\nquiet + 1;")), [])

    def test_a_declaration_without_its_semicolon_is_made(self):
        self.assertEqual(results(self.assert_ok("int made_without_semicolon = 9")), [])
        self.assert_shows("made_without_semicolon", "9")

    def test_the_result_carries_the_execution_count(self):
        msg_id = self.kernel.start("6 * 7")
        messages, reply = self.kernel.collect(msg_id)
        counts = [c["execution_count"] for _, t, c in messages if t == "execute_result"]
        self.assertEqual(counts, [reply["execution_count"]])


class Magics(KernelTest):
    TIMEIT_LINE = (r"^\d[\d.]* (ns|\u00b5s|ms|s) \u00b1 \d[\d.]* (ns|\u00b5s|ms|s) per loop "
                   r"\(mean \u00b1 std\. dev\. of (\d+) runs?, ([\d,]+) loops? each\)\n$")

    def test_timeit_line_chooses_loops_and_runs_seven_times(self):
        self.assert_ok("std::vector<int> growing;")
        text = stream_text(self.assert_ok("%timeit growing.push_back(1)"), "stdout")
        match = re.match(self.TIMEIT_LINE, text)
        self.assertIsNotNone(match, text)
        self.assertEqual(match.group(3), "7")
        self.assertGreater(int(match.group(4).replace(",", "")), 1)

    def test_timeit_cell_with_loops_and_runs(self):
        self.assert_ok("long timed_calls = 0;")
        text = stream_text(self.assert_ok("%%timeit -n 5 -r 3\n++timed_calls;\nstd::vector<int> scratch(100);"),
                           "stdout")
        match = re.match(self.TIMEIT_LINE, text)
        self.assertIsNotNone(match, text)
        self.assertEqual((match.group(3), match.group(4)), ("3", "5"))
        messages = self.assert_ok("timed_calls")
        self.assertEqual(results(messages), [{"text/plain": "15"}])

    def test_timeit_with_a_bad_option_names_it(self):
        error, _ = self.assert_error("%timeit -q 1 + 1")
        self.assertIn("-n LOOPS", error["evalue"])

    def test_shell_command_output_and_status(self):
        messages = self.assert_ok('!echo "from the shell"')
        self.assertEqual(stream_text(messages, "stdout"), "from the shell\n")
        messages = self.assert_ok("int before_shell = 1;\n!exit 3\nint after_shell = 2;")
        self.assertIn("exit status 3", stream_text(messages, "stderr"))
        self.assertEqual(results(self.assert_ok("before_shell + after_shell")), [{"text/plain": "3"}])

    def test_question_mark_shows_a_declaration_and_its_comment(self):
        self.assert_ok("/// Adds one to `x`.\nint plus_one(int x) { return x + 1; }")
        _, reply = self.kernel.run("?plus_one")
        self.assertEqual(reply["status"], "ok")
        page = reply["payload"][0]
        self.assertEqual(page["source"], "page")
        self.assertIn("int plus_one(int x)", page["data"]["text/plain"])
        self.assertIn("Adds one to `x`.", page["data"]["text/plain"])
        _, reply = self.kernel.run("std::vector?")
        self.assertIn("class vector", reply["payload"][0]["data"]["text/plain"])
        self.assertIn("cppreference.com", reply["payload"][0]["data"]["text/html"])
        _, reply = self.kernel.run("?no_such_name_here")
        self.assertIn("nothing named no_such_name_here", reply["payload"][0]["data"]["text/plain"])

    def test_inspect_request_at_the_cursor(self):
        self.assert_ok("/// The number of widgets.\nint widget_count = 3;")
        code = "widget_count + 1"
        reply = self.kernel.request(lambda: self.kernel.client.inspect(code, 3))
        self.assertTrue(reply["found"])
        self.assertIn("int widget_count", reply["data"]["text/plain"])
        self.assertIn("The number of widgets.", reply["data"]["text/plain"])
        reply = self.kernel.request(lambda: self.kernel.client.inspect("unknown_thing", 2))
        self.assertFalse(reply["found"])

    def test_unknown_magic_is_named(self):
        error, _ = self.assert_error("%matplotlib inline")
        self.assertIn("%matplotlib", error["evalue"])


class Input(KernelTest):
    def test_cin_asks_the_front_end(self):
        messages, reply, asked = self.kernel.run_answering(
            'int typed = 0;\nstd::cout << "a number: " << std::flush;\nstd::cin >> typed;\ntyped * 2', ["21"])
        self.assertEqual(reply["status"], "ok", errors(messages))
        self.assertEqual(len(asked), 1)
        self.assertIn("prompt", asked[0])
        self.assertEqual(stream_text(messages), "a number: ")
        self.assertEqual(results(messages), [{"text/plain": "42"}])

    def test_cin_without_input_allowed_is_at_end_of_file(self):
        msg_id = self.kernel.client.execute("std::string line = \"unset\";\nbool got = bool(std::getline(std::cin, line));\n"
                                            "got", allow_stdin=False)
        messages, reply = self.kernel.collect(msg_id)
        self.assertEqual(results(messages), [{"text/plain": "false"}])


class Output(KernelTest):
    def test_clear_output(self):
        messages = self.assert_ok("#include <xcpp/xdisplay.hpp>\n"
                                  'std::cout << "old" << std::endl;\nxcpp::clear_output();\nstd::cout << "new" << std::endl;')
        kinds = [(t, c.get("text")) for _, t, c in messages if t in ("stream", "clear_output")]
        self.assertEqual(kinds, [("stream", "old\n"), ("clear_output", None), ("stream", "new\n")])

    def test_standard_headers_without_include(self):
        messages = self.assert_ok('std::vector<std::string> words{"no", "include"};\n'
                                  'std::cout << words.size() << " " << std::sqrt(16.0) << std::endl;')
        self.assertEqual(stream_text(messages), "2 4\n")

    def test_the_standard_library_xeus_cling_notebooks_use_without_include(self):
        messages = self.assert_ok("std::list<int> numbers{3, 1, 2}; std::set<int> seen(numbers.begin(), numbers.end());\n"
                                  "std::vector<int> sorted(numbers.begin(), numbers.end());\n"
                                  "std::sort(sorted.begin(), sorted.end());\n"
                                  "std::unordered_map<std::string, int> counts{{\"a\", 1}}; std::deque<int> d{4};\n"
                                  "std::cout << seen.size() << sorted[0] << std::accumulate(sorted.begin(), sorted.end(), 0)\n"
                                  "          << counts.at(\"a\") << d.front() << std::setw(3) << 7 << std::endl;")
        self.assertEqual(stream_text(messages), "31614  7\n")

    def test_a_lambda_called_where_it_is_written_in_a_top_level_statement(self):
        messages = self.assert_ok('std::cout << [](const std::string& s) { return s.size(); }("Lambda") << std::endl;')
        self.assertEqual(stream_text(messages), "6\n")
        self.assert_ok("auto doubled = [](int x) { return 2 * x; }(21);")
        messages = self.assert_ok("doubled")
        self.assertEqual(results(messages), [{"text/plain": "42"}])
        messages = self.assert_ok("auto twice = [](int x) mutable -> int { return 2 * x; };\ntwice(4)")
        self.assertEqual(results(messages), [{"text/plain": "8"}])

    def test_library_loaded_by_name_from_the_system_folders(self):
        self.assert_ok('#pragma cling load("libz")\nextern "C" const char* zlibVersion();')
        messages = self.assert_ok("std::string(zlibVersion()).empty()")
        self.assertEqual(results(messages), [{"text/plain": "false"}])
        error, _ = self.assert_error('#pragma cling load("no_such_library_anywhere")')
        self.assertIn("system's library folders", error["evalue"])


if __name__ == "__main__":
    kernel_client.main()
