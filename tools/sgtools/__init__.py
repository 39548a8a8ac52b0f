"""Shared pieces of stepgraph's Python data tools (tools/train_tokenizer.py, tools/preprocess_data.py).

corpus            reading .jsonl / .txt inputs into documents, with file:line errors
progress          the progress line and number formatting
tokenizer_files   the tokenizer folder: what train_tokenizer writes and preprocess_data reads
indexed_dataset   the Megatron MMIDIDX .bin/.idx writer
"""


class ToolError(Exception):
    """A problem the user can fix; the tools print it as `error: MESSAGE` and exit 1 (no traceback)."""


def run_tool(main, interrupted: str = "interrupted") -> None:
    """Runs a tool's main() and exits: its return code, 1 after printing a ToolError, 130 on Ctrl-C."""
    import sys
    try:
        code = main()
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print(f"\n{interrupted}", file=sys.stderr)
        code = 130
    sys.exit(code)
