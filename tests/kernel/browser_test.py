#!/usr/bin/env python3
"""A user's view: the intro notebook opened and run in Jupyter Notebook, in a real browser.

  browser_test.py --source-root SRC --build-dir BUILD --screenshot OUT.png [--notebook intro]
                  [--expect TEXT ...]

Starts Debian's Jupyter Notebook (loopback only, a random token, its own config and
runtime folders) on a copy of the bundled notebooks (see run_notebook.py), with
mpify-kernel's kernelspec as the only C++ kernel, and drives headless Chromium
(python3-selenium, chromium-driver): opens the notebook, checks that Jupyter started
mpify-kernel for it without asking (the notebook names xeus-cling's xcpp17), runs all
cells from the UI, waits for the kernel to go idle, and checks that no cell shows an
error, that the loss plot is drawn at a non-zero size and that every --expect text is
among the cells' outputs. Saves a screenshot of the whole page. Run with /usr/bin/python3.
This is the test that runs the intro notebook: run_notebook.py's checks (no error, an
image, the expected lines) are made here on what the page shows.
"""
import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_notebook import mirror  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, condition, timeout, interval=0.25):
    """Polls `condition` until it returns something true; fails naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)  # polling an outside process's state: there is nothing to wait on
    raise AssertionError("timed out after {} s waiting for {}".format(timeout, what))


def server_answers(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def processes_mentioning(text):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/{}/cmdline".format(entry), "rb") as cmdline:
                    if text.encode() in cmdline.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source-root", type=Path, required=True)
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--screenshot", type=Path, required=True)
    parser.add_argument("--notebook", default="intro")
    parser.add_argument("--expect", action="append", default=[], help="a text some cell's output must contain")
    # Below ctest's 600 s, so that a run that never ends says where it stopped.
    parser.add_argument("--timeout", type=int, default=400)
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="mpify-browser-test-"))
    folder = mirror(scratch / "tree", args.source_root.resolve(), args.build_dir.resolve())
    shutil.copy(args.source_root / "examples" / "notebooks" / (args.notebook + ".ipynb"), folder)
    runtime = scratch / "runtime"
    env = dict(os.environ,
               JUPYTER_PATH=str(args.build_dir.resolve() / "share" / "jupyter"),
               JUPYTER_CONFIG_DIR=str(scratch / "config"), JUPYTER_DATA_DIR=str(scratch / "data"),
               JUPYTER_RUNTIME_DIR=str(runtime), HOME=str(scratch))
    port, token = free_port(), secrets.token_hex(16)
    server = subprocess.Popen(
        ["/usr/bin/python3", "-m", "notebook", "--no-browser", "--ip=127.0.0.1", "--port={}".format(port),
         "--port-retries=0", "--NotebookApp.token=" + token, "--notebook-dir=" + str(folder)]
        + (["--allow-root"] if os.geteuid() == 0 else []),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    base = "http://127.0.0.1:{}".format(port)
    driver = None
    problems = []
    try:
        wait_until("the notebook server", lambda: server.poll() is None and
                   server_answers("{}/api/status?token={}".format(base, token)) or server.poll() is not None, 60)
        if server.poll() is not None:
            raise AssertionError("the notebook server exited with status {}".format(server.returncode))

        options = Options()
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000",
                     "--user-data-dir=" + str(scratch / "chromium")):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        driver.get("{}/notebooks/{}.ipynb?token={}".format(base, args.notebook, token))

        script_ready = "return !!(window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel && " \
                       "Jupyter.notebook.kernel.is_connected())"
        wait_until("the notebook's kernel to connect", lambda: driver.execute_script(script_ready), 120)
        kernel = driver.execute_script("return Jupyter.notebook.kernel.name")
        if kernel != "mpify-cpp17":
            problems.append("Jupyter started kernel {!r}, not mpify-cpp17".format(kernel))
        dialogs = driver.execute_script("return document.querySelectorAll('.modal-dialog').length")
        if dialogs:
            problems.append("a dialog asked something when the notebook opened")

        started = time.monotonic()
        driver.execute_script("Jupyter.notebook.execute_all_cells()")
        all_done = """
            const cells = Jupyter.notebook.get_cells().filter(c => c.cell_type === 'code');
            const done = cells.every(c => c.input_prompt_number !== '*' && c.input_prompt_number !== undefined
                                          && c.input_prompt_number !== null);
            return done && Jupyter.notebook.kernel_busy === false;"""
        # kernel_busy is not in every Notebook 6: fall back on the busy indicator's class.
        all_done = all_done.replace("Jupyter.notebook.kernel_busy === false",
                                    "!document.querySelector('#kernel_indicator_icon.kernel_busy_icon')")
        try:
            wait_until("every cell to run", lambda: driver.execute_script(all_done), args.timeout, interval=1)
        except AssertionError:
            # What the page shows then: each code cell's prompt ('*' running, null never
            # run) and the busy indicator; and a picture of it beside the screenshot.
            states = driver.execute_script("""
                return [Jupyter.notebook.get_cells().filter(c => c.cell_type === 'code')
                            .map(c => String(c.input_prompt_number)),
                        !!document.querySelector('#kernel_indicator_icon.kernel_busy_icon')];""")
            print("browser_test: cell prompts {} ; kernel busy: {}".format(states[0], states[1]))
            for error in driver.execute_script(
                    "return Array.from(document.querySelectorAll('.output_error')).map(e => e.innerText)"):
                print("browser_test: an error output: " + error[:2000])
            args.screenshot.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(args.screenshot.with_name(args.screenshot.stem + "-timeout.png")))
            raise
        print("browser_test: all cells ran in {:.0f} s".format(time.monotonic() - started))

        errors = driver.execute_script(
            "return Array.from(document.querySelectorAll('.output_error')).map(e => e.innerText)")
        problems += ["an error output: " + e[:300] for e in errors]
        pictures = driver.execute_script("""
            return Array.from(document.querySelectorAll('.output_svg svg, .output_png img')).map(e => {
                const r = e.getBoundingClientRect(); return [r.width, r.height]; });""")
        print("browser_test: pictures drawn (width, height): {}".format(pictures))
        if not any(w > 100 and h > 100 for w, h in pictures):
            problems.append("no picture was drawn at a visible size (the loss plot should be)")
        shown = "\n".join(driver.execute_script(
            "return Array.from(document.querySelectorAll('.output_area')).map(e => e.innerText)"))
        for text in args.expect:
            if text not in shown:
                problems.append("no output shows {!r}".format(text))
        progress = driver.execute_script("return document.querySelectorAll('.output_html progress').length")
        print("browser_test: progress bars: {}".format(progress))
        if progress == 0:
            problems.append("no progress bar was shown")

        height = driver.execute_script("return document.getElementById('notebook').scrollHeight + 200")
        driver.set_window_size(1280, min(max(1000, height), 16000))
        args.screenshot.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(args.screenshot))
        print("browser_test: screenshot: {}".format(args.screenshot))
    finally:
        if driver is not None:
            driver.quit()
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)  # the server shuts its kernels down on the way out
        try:
            output, _ = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            output, _ = server.communicate()
            problems.append("the notebook server did not stop on SIGTERM")
        left = processes_mentioning(str(runtime))
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        if left:
            problems.append("kernel processes outlived the server: {}".format(left))
        if problems:
            print(output.decode(errors="replace")[-4000:])
        shutil.rmtree(scratch, ignore_errors=True)

    for problem in problems:
        print("browser_test: " + problem)
    print("browser_test: {}".format("FAILED" if problems else "passed"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
