"""Server instructions and tool descriptions (each kept under 1,800 characters).

Hosts cut these at 2,048 characters and may not show the instructions to the
model at all, so every description is self-sufficient.
"""

from __future__ import annotations

__all__ = ["DESCRIPTIONS", "INSTRUCTIONS", "MAX_DOC_CHARS"]

MAX_DOC_CHARS = 1_800

INSTRUCTIONS = """\
personae mind server: the persona's mind contract, memory and cognition journal.

Session start: call bootstrap_session() once, before the first substantive answer or any \
external tool call. It returns one packet (schema v1): mind_contract (the persona's operating \
contract), mind_contract_available, available_mind_tools, cognition_protocol, active context, \
memory_catalog (counts, never file names), degraded_mode and host_limitations. Treat the \
packet as live context for the session.

If bootstrap_session is unavailable, fall back in this order: get_system_prompt(), context(), \
list_memory_files().

If mind_contract_available is false (or get_system_prompt() returns text starting with \
"ERROR:"), say the mind is degraded and do not impersonate the persona. If this server is \
unreachable, say you are running in degraded body-only mode.

Per turn: observe(tool_name, args) before and observe(tool_name, args, result) after external \
tool calls unless the host wraps them; reflect(observation, kind) for user_said, time_passed, \
ambient and internal signals; recall(query, k, facet) when an excerpt is not enough. \
Surface cautionary_flags before acting. When observe returns surprise above 0.7, stop and \
surface the result to the user before continuing. After the mind contract's files change, \
call refresh_persona() and follow the contract it returns.

Routing: the body (the host, its settings and hooks) wins for security and tool use; the \
mind (this contract) wins for continuity and voice where it does not conflict with body \
safety.

These instructions may never reach the model: hosts should also carry the bootstrap rule in \
CLAUDE.md / AGENTS.md / .github/copilot-instructions.md (see `personae hosts render`).
"""

DESCRIPTIONS: dict[str, str] = {
    "bootstrap_session": """\
Call this FIRST in every session, before the first substantive answer or any external tool \
call. Returns the bootstrap packet (schema v1) as structured JSON: schema_version, \
required_first_call, session_id, mind_contract (the persona's assembled operating contract: \
voice, rules, memory discipline), mind_contract_available, available_mind_tools, \
cognition_protocol, context (open commitments, recent carry-forward, recent journal), \
memory_catalog (total_count, index_present, category_counts by type; never file names), \
degraded_mode {mind_contract_available, reasons} and host_limitations.

If mind_contract_available is false, say the mind is degraded and do not impersonate the \
persona. Pass session_id (the host session id) when known: the hook gate uses the recorded \
bootstrap of that session to unlock gated tools. Replaces the older get_system_prompt, \
context, list_memory_files sequence (still available as a fallback).""",
    "get_system_prompt": """\
Fallback when bootstrap_session is unavailable: returns the assembled mind contract as text \
(the same text as bootstrap_session's mind_contract). If it starts with "ERROR:", the contract \
failed to assemble: say the mind is degraded and do not impersonate the persona.""",
    "refresh_persona": """\
Reassemble the persona's mind contract from its files (after the prompt or an @include'd \
file was edited mid-session) and return it: mind_contract, mind_contract_available, \
contract_hash, previous_hash (the one this server last handed out), changed, sources (the \
files that went into it) and reasons. Follow the returned contract from now on. If \
mind_contract_available is false, say the mind is degraded and do not impersonate the \
persona. It does not replace bootstrap_session at session start.""",
    "context": """\
Fallback/refresh: the active context (open_commitments, recent_carry_forward, recent_journal, \
last_bootstrap_at). bootstrap_session already includes it.""",
    "list_memory_files": """\
List memory files (name, title, description, type), sorted by name, paged with offset and \
limit (default 200). Filter by type (e.g. user, project, feedback). Use recall() to search \
by meaning instead of browsing.""",
    "read_memory_file": """\
Read one memory file (Markdown with frontmatter name, description, type) by its file name, \
e.g. 'user_prefs.md'. Names are plain file names inside the memory directory.""",
    "write_memory_file": """\
Create or replace one memory file atomically. name: a plain file name ending in .md \
(letters, digits, '.', '_', '-'). content: Markdown starting with a frontmatter block that \
has name, description and type, e.g.
---
name: Deploy rules
description: how releases are cut
type: project
---
The MEMORY.md index is updated (MEMORY.md itself is reserved and cannot be written), and \
the memory is searchable by recall() at once. Credentials in content are redacted.""",
    "observe": """\
Record an external tool call in the mind's journal (credentials redacted): call it before the tool \
(tool_name, args) and after it (tool_name, args, result) unless the host records tool calls \
mechanically. Returns the journal id, relevant_memories (excerpts), cautionary_flags \
(destructive commands, credentials, failed results, feedback memories that may apply) and, \
after a call, surprise: how far the result departs from the results recorded earlier for \
the same tool with similar arguments (0 as predicted, 1 nothing like it, null when nothing \
predicted it) with surprise_basis (how many it was measured against). Surface flags before \
acting; when surprise is above 0.7, stop and surface the result to the user before \
continuing. Nothing is filtered or dropped; the entry is recallable at once.""",
    "reflect": """\
Record a signal that is not a tool call, verbatim: kind is user_said (behaviour feedback, a \
change of direction, durable personal context, questions about the agent's cognition), \
time_passed, ambient or internal. Returns the journal id, relevant_memories and \
cautionary_flags; the entry is recallable at once.""",
    "recall": """\
Search memory files and the journal (SQLite FTS5, bm25; any word may match; title and \
description weigh more than the body). k: number of results (1-50, default 5). facet: \
optional key:value filter from frontmatter, e.g. type:user, project:portal, kind:user_said. \
Returns excerpts that fit a token budget; read_memory_file() gives the full text.""",
}
