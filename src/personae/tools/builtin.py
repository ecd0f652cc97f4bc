"""The built-in tools personae provides (file, search, shell and web tools)."""

from __future__ import annotations

from typing import Any

from personae.tools._files import (
    EditFileArgs,
    ReadFileArgs,
    WriteFileArgs,
    edit_file,
    read_file,
    write_file,
)
from personae.tools._search import GlobArgs, GrepArgs, ListDirArgs, glob_files, grep, list_dir
from personae.tools._shell import RunShellArgs, run_shell
from personae.tools._web import WebFetchArgs, web_fetch
from personae.tools.base import Tool

__all__ = ["builtin_tools"]


def builtin_tools() -> list[Tool[Any]]:
    """Fresh instances of every built-in tool (``agent`` and handover tools live elsewhere)."""
    return [
        Tool(
            "read_file",
            "Read a text file from the workspace. Returns lines from `offset` (1-based), at most "
            "`limit` lines, cut at a size cap with a notice saying how to continue.",
            ReadFileArgs,
            read_file,
        ),
        Tool(
            "write_file",
            "Create or overwrite a file in the workspace with the given content (atomic; parent "
            "directories are created).",
            WriteFileArgs,
            write_file,
        ),
        Tool(
            "edit_file",
            "Replace exact text in a file. `old_string` must occur exactly once unless "
            "`replace_all` is set. Pass `edits` to apply several replacements in order; nothing "
            "is written unless all of them apply.",
            EditFileArgs,
            edit_file,
        ),
        Tool(
            "list_dir",
            "List a directory of the workspace (directories end in '/').",
            ListDirArgs,
            list_dir,
        ),
        Tool(
            "glob",
            "Find files by glob pattern (e.g. '**/*.py'), relative to the workspace root, sorted.",
            GlobArgs,
            glob_files,
        ),
        Tool(
            "grep",
            "Search file contents with a regular expression; returns 'path:line: text' lines. "
            "Filter files with `glob` (e.g. '*.py').",
            GrepArgs,
            grep,
        ),
        Tool(
            "run_shell",
            "Run a command in the workspace: a string is run by /bin/sh -c, a list is run as "
            "argv. Output (stdout and stderr) is capped; the command is killed on timeout. A "
            "non-zero exit is reported as an error with the output.",
            RunShellArgs,
            run_shell,
        ),
        Tool(
            "web_fetch",
            "HTTP GET an http(s) URL and return the status and text body (size-capped, timed out).",
            WebFetchArgs,
            web_fetch,
        ),
    ]
