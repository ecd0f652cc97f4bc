"""The built-in tools personae provides (file, search, shell and web tools)."""

from __future__ import annotations

from typing import Any

from personae.tools import _files, _search, _shell, _web
from personae.tools.base import Tool

__all__ = ["builtin_tools"]


def builtin_tools() -> list[Tool[Any]]:
    """Fresh instances of every built-in tool (``agent`` and handover tools live elsewhere)."""
    return [
        Tool(
            "read_file",
            "Read a text file from the workspace. Returns lines from `offset` (1-based), at most "
            "`limit` lines, cut at a size cap with a notice saying how to continue.",
            _files.ReadFileArgs,
            _files.read_file,
        ),
        Tool(
            "write_file",
            "Create or overwrite a file in the workspace with the given content (atomic; parent "
            "directories are created).",
            _files.WriteFileArgs,
            _files.write_file,
        ),
        Tool(
            "edit_file",
            "Replace exact text in a file. `old_string` must occur exactly once unless "
            "`replace_all` is set. Pass `edits` to apply several replacements in order; nothing "
            "is written unless all of them apply.",
            _files.EditFileArgs,
            _files.edit_file,
        ),
        Tool(
            "list_dir",
            "List a directory of the workspace (directories end in '/').",
            _search.ListDirArgs,
            _search.list_dir,
        ),
        Tool(
            "glob",
            "Find files by glob pattern (e.g. '**/*.py'), relative to the workspace root, sorted.",
            _search.GlobArgs,
            _search.glob_files,
        ),
        Tool(
            "grep",
            "Search file contents with a regular expression; returns 'path:line: text' lines. "
            "Filter files with `glob` (e.g. '*.py').",
            _search.GrepArgs,
            _search.grep,
        ),
        Tool(
            "run_shell",
            "Run a command in the workspace: a string is run by /bin/sh -c, a list is run as "
            "argv. Output (stdout and stderr) is capped; the command is killed on timeout. A "
            "non-zero exit is reported as an error with the output.",
            _shell.RunShellArgs,
            _shell.run_shell,
        ),
        Tool(
            "web_fetch",
            "HTTP GET an http(s) URL and return the status and text body (size-capped, timed out).",
            _web.WebFetchArgs,
            _web.web_fetch,
        ),
    ]
