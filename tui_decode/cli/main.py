"""The command line: `tui-decode` opens the app; `tui-decode run` decodes headless; `tui-decode bench`
measures methods side by side with transformers.

Every user error ends as one line on stderr and exit code 2, never a traceback. Anything else
(a bug) ends as one line naming a crash report file that holds the traceback, and exit code 1;
ctrl+c exits 130 and SIGTERM 143.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from decoders import __version__
from decoders.core.declarations import COMMON_PARAMS, default_method
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams, method_param_specs
from tui_decode.cli.datastore import add_memory_mb_arg
from tui_decode.cli.model_args import add_model_args, add_remeasure_arg, family_spec  # noqa: F401 (also imported here)
from tui_decode.cli.parser import OneLineParser
from tui_decode.cli.signals import Handlers, Terminated
from tui_decode.cli.views import AppArgs, DecodeFlags, PromptFlags
from tui_decode.state.crash_report import report_crash

if TYPE_CHECKING:
    from decoders.methods.shared.suffix_memory import MemoryFile

MAX_THREADS = 1024  # torch threads a user can ask for


def stdout_console(**kwargs):
    """A rich Console on stdout whose broken pipe (`tui-decode run | head -1`) is the BrokenPipeError
    `main` turns into exit 141; rich's own handler exits 1 without a word."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    return PipeConsole(**kwargs)


def add_decode_args(p: argparse.ArgumentParser) -> None:
    """The method and every declared parameter (common and each method's), from their `ParamSpec`s."""
    from decoders.core.declarations import all_methods

    g = p.add_argument_group("decoding")
    methods = all_methods()
    g.add_argument("--method", choices=[m.name for m in methods], default=default_method().name,
                   help="; ".join(f"{m.name}: {m.summary or m.label}" for m in methods))
    for spec in COMMON_PARAMS:
        spec.add_argument(g)
    g.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    by_method = p.add_argument_group("method parameters")
    for spec in method_param_specs().values():
        spec.add_argument(by_method)


def add_threads_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help=f"torch CPU threads (1..{MAX_THREADS}; default: torch's own choice); on a machine shared "
                        "with other busy processes, 1 avoids threads spinning against each other")


def check_threads(threads: int | None) -> None:
    """Refuse a thread count out of range, before any model time is spent."""
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        raise DecodeError(f"--threads must be 1..{MAX_THREADS}, got {threads}; give 1 on a busy machine, or leave "
                          "it out for torch's own choice")


def set_threads(threads: int | None) -> None:
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="tui-decode", description="Watch parallel LLM decoding happen, token by token, "
                                                          "and measure what it buys.")
    parser.add_argument("--version", action="version", version=f"tui-decode {__version__}")
    parser.add_argument("--open", metavar="RUN.json", help="open a saved run in the app (no models needed)")
    first = parser.add_mutually_exclusive_group()
    first.add_argument("--prompt", help="the app's first prompt (default: a sample sentence)")
    first.add_argument("--prompt-file", metavar="PATH", help="read the app's first prompt from a file")
    add_model_args(parser)
    add_remeasure_arg(parser)
    add_threads_arg(parser)
    add_decode_args(parser)  # the app's starting parameters
    parser.add_argument("--suffix-memory", metavar="PATH",
                        help="suffix decoding: keep the session's memory of responses in PATH (per model and "
                             "tokenizer): read when the model loads, rewritten after each run")
    add_memory_mb_arg(parser)
    sub = parser.add_subparsers(dest="command", parser_class=OneLineParser)

    from tui_decode.cli.run import add_run_parser

    add_run_parser(sub)
    sub.add_parser("families", help="list the model families (built-in and from the config file)")

    from tui_decode.cli.bench import add_bench_parser

    add_bench_parser(sub)
    from tui_decode.cli.train_head import add_train_parser

    add_train_parser(sub)
    from tui_decode.cli.calibrate import add_calibrate_parser

    add_calibrate_parser(sub)
    from tui_decode.cli.datastore import add_datastore_parser

    add_datastore_parser(sub)
    from tui_decode.cli.replay import add_replay_parser

    add_replay_parser(sub)
    return parser


def decode_params(flags: DecodeFlags, method: str | None = None) -> DecodeParams:
    """The parameters the flags ask for, validated (bounds and cross-parameter rules)."""
    return DecodeParams(method=method or flags.method, chat_template=not flags.raw, **dict(flags.values)).validated()


def read_prompt(args: PromptFlags) -> str:
    """The prompt text: from --prompt-file (read up to a bound, UTF-8) or --prompt (valid UTF-8)."""
    from decoders.records.inputs import MAX_PROMPT_BYTES, check_text, read_text

    if args.prompt_file is not None and not args.prompt_file.strip():
        raise DecodeError("--prompt-file is empty; give the path of a UTF-8 text file")
    if args.prompt_file:
        return read_text(args.prompt_file, "the prompt file", MAX_PROMPT_BYTES,
                         "give a readable UTF-8 text file to --prompt-file")
    if args.prompt is None:
        raise DecodeError("no prompt given; pass --prompt TEXT or --prompt-file PATH")
    return check_text(args.prompt, "the --prompt text",
                      "pass UTF-8 text (or put the prompt in a UTF-8 file and use --prompt-file)")


def load_with_progress(spec, console):
    """Load a family, showing the loader's progress on stderr."""
    from decoders.models.family import load_family

    with console.status(f"loading {spec.label or spec.main} ...") as status:
        def progress(message: str, fraction: float | None = None) -> None:
            pct = "" if fraction is None else f" {100 * fraction:.0f}%"
            status.update(f"{message}{pct}")

        return load_family(spec, progress=progress)


def check_memory_path(path: str | None, lock: bool = True, mb: int | None = None,
                      flag: str = "--suffix-memory") -> MemoryFile | None:
    """``--suffix-memory PATH`` checked before any model loads: a file that can be made, or one
    that is a whole memory file (its digest; whose model it is, once the model has loaded) within
    the size bound ``mb`` (None: the default), and not kept by another process (its lock, held
    from here until this process ends, where ``lock``: the bench reads a memory and never writes
    it): that file as read (None where there is none yet, or it is empty: a new memory).
    ``flag``: the flag the path was given with (`datastore build`: --out), named in what to do."""
    if path is None:
        return None
    if not path.strip():
        raise DecodeError(f"{flag} is empty; give the path of a memory file (it is made when missing)")
    from decoders.methods.shared.suffix_memory import (
        DEFAULT_MB,
        MAX_REQUESTS,
        check_bounds,
        check_memory_file,
        lock_memory_file,
        nodes_for_mb,
    )

    if not Path(path).exists():
        from decoders.records.atomic import check_destination

        check_destination(path, flag, "the suffix memory")
        kept = None
    else:
        kept = check_memory_file(path, flag)
        if kept is not None:  # over the bound: refused now, not after the model's load (issue 40)
            check_bounds(kept, path, MAX_REQUESTS, nodes_for_mb(mb if mb is not None else DEFAULT_MB), flag)
    if lock:
        lock_memory_file(path, flag)
    return kept


def cmd_families(args: argparse.Namespace) -> int:
    from decoders.models.families import all_families, config_path
    from tui_decode.cli.families import families_table

    table = families_table(all_families(), config_path())
    console = stdout_console()
    if not console.is_terminal:  # piped: every id whole on its row, however wide, for grep and cut
        wide = console.measure(table, options=console.options.update_width(1000)).maximum
        console = stdout_console(width=max(console.width, wide))
    console.print(table)
    return 0


def flags_given(flags: DecodeFlags) -> bool:
    """Whether any decoding flag differs from its default (else the app's own start applies)."""
    return flags != DecodeFlags.of(build_parser().parse_args([]))


def cmd_app(namespace: argparse.Namespace) -> int:
    """`tui-decode` without a subcommand: open the app (on a saved run with ``--open``)."""
    from decoders.records.run import RunResult
    from tui_decode.app import run_app  # Textual loads here, not for `run` or `bench`
    from tui_decode.cli.terminal import check_terminal
    from tui_decode.state.settings import DEFAULT_PROMPT, START_PARAMS, Settings

    args = AppArgs.of(namespace)
    check_threads(args.threads)
    check_terminal()  # before Textual loads: without one the app spun reading end-of-file
    if args.open is not None and not args.open.strip():
        raise DecodeError("--open is empty; give the path of a RUN.json saved by tui-decode")
    opened = RunResult.load(args.open) if args.open else None
    check_memory_path(args.suffix_memory, mb=args.suffix_memory_mb)
    # the launch flags: the first run's parameters
    settings = Settings(params=decode_params(args.decode) if flags_given(args.decode) else START_PARAMS)
    return run_app(family_spec(args.model), prompt=read_prompt(args.prompt) if args.prompt.given else DEFAULT_PROMPT,
                   settings=settings, opened=opened, opened_name=Path(args.open).name if args.open and opened else "",
                   opened_path=Path(args.open) if args.open and opened else None, threads=args.threads,
                   suffix_memory=args.suffix_memory, suffix_memory_mb=args.suffix_memory_mb)


def main(argv: Sequence[str] | None = None) -> int:
    """The error boundary: whatever happens, one line on stderr and a meaningful exit code."""
    handlers = Handlers()
    code = _guarded(argv, handlers)
    if handlers.signalled:  # unwound: leave now, before the interpreter's teardown puts the default
        handlers.leave(code)  # handlers back, and one more ctrl+c killed it with -2 (not 130)
    return code


def _guarded(argv: Sequence[str] | None, handlers: Handlers) -> int:
    try:
        handlers.install()
        return _dispatch(argv)
    except DecodeError as exc:
        print(f"tui-decode: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tui-decode: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("tui-decode: terminated", file=sys.stderr)
        return 143
    except SystemExit:
        raise  # --help, --version
    except BrokenPipeError:  # stdout closed early (piped into head): nothing more to say
        _silence_stdout()
        return 141  # as a shell reports a process ended by SIGPIPE
    except Exception as exc:
        from decoders.models.memory import is_allocation_failure

        if is_allocation_failure(exc):  # a run, a bench, a training that did not fit: no bug to report
            print(f"tui-decode: error: {out_of_memory_line(exc)}", file=sys.stderr)
            return 2
        return report_crash(exc, argv)
    finally:
        handlers.restore()


def out_of_memory_line(exc: BaseException) -> str:
    """One line for an allocation that failed outside the model load (which says more itself)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
    return (f"not enough memory ({text}); give --dtype float32 (one copy of the weights), a smaller model, "
            "fewer --max-new-tokens or a shorter prompt")


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _dispatch(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        from tui_decode.cli.run import cmd_run

        return cmd_run(args)
    if args.command == "families":
        return cmd_families(args)
    if args.command == "bench":
        from tui_decode.cli.bench import cmd_bench

        return cmd_bench(args)
    if args.command == "train-head":
        from tui_decode.cli.train_head import cmd_train_head

        return cmd_train_head(args)
    if args.command == "calibrate":
        from tui_decode.cli.calibrate import cmd_calibrate

        return cmd_calibrate(args)
    if args.command == "datastore":
        from tui_decode.cli.datastore import cmd_datastore

        return cmd_datastore(args)
    if args.command == "replay":
        from tui_decode.cli.replay import cmd_replay

        return cmd_replay(args)
    return cmd_app(args)
