"""Shared pieces of stepgraph's Python data tools (tools/train_tokenizer.py, tools/convert_tokenizer.py,
tools/preprocess_data.py).

corpus            reading .jsonl / .txt inputs into documents, with file:line errors
progress          the progress line and number formatting
tokenizer_files   the tokenizer folder: what train_tokenizer writes and preprocess_data reads
indexed_dataset   the Megatron MMIDIDX .bin/.idx writer
stop              stopping on SIGINT/SIGTERM while a library thread, not Python, runs the work
"""
import signal


class ToolError(Exception):
    """A problem the user can fix; the tools print it as `error: MESSAGE` and exit 1 (no traceback)."""


class Stopped(KeyboardInterrupt):
    """A stop signal as an exception, raised in the main thread: SIGINT (Ctrl-C, raised by Python as
    KeyboardInterrupt) or SIGTERM. A KeyboardInterrupt, so every `except BaseException` clean-up runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def signal_name(signum: int) -> str:
    return "interrupted" if signum == signal.SIGINT else "terminated" if signum == signal.SIGTERM \
        else f"stopped by {signal.Signals(signum).name}"


def raise_stopped(signum, frame) -> None:
    raise Stopped(signum)


def run_tool(main, outcome: str = "no output written") -> None:
    """Runs a tool's main() and exits: its return code, 1 after printing a ToolError, 128 + N on signal N
    (130 on Ctrl-C, 143 on SIGTERM: both clean up as Ctrl-C does, then print `interrupted: OUTCOME`)."""
    import sys
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:  # ignored (nohup) stays ignored
        signal.signal(signal.SIGTERM, raise_stopped)
    try:
        code = main()
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"\n{signal_name(signum)}: {outcome}", file=sys.stderr)
        code = 128 + signum
    sys.exit(code)
