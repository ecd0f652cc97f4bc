# ruff: noqa: E501, E741
"""Regenerate the gate corpus: run from this folder (python make_corpus.py)."""

import json
from pathlib import Path

out = Path(".")


def packet(avail=True):
    return {
        "schema_version": 1,
        "required_first_call": "bootstrap_session",
        "session_id": None,
        "mind_contract": "You are Sati."
        if avail
        else "ERROR: personae mind contract failed to assemble: x",
        "mind_contract_available": avail,
        "available_mind_tools": ["bootstrap_session", "observe"],
        "cognition_protocol": [],
        "context": {},
        "memory_catalog": {"total_count": 0, "index_present": False, "category_counts": {}},
        "degraded_mode": {"mind_contract_available": avail, "reasons": []},
        "host_limitations": [],
    }


def user(text):
    return {"type": "user", "message": {"role": "user", "content": text}, "sessionId": "s1"}


def assistant_text(text):
    return {
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
    }


def use(tid, name="mcp__personae__bootstrap_session", inp=None):
    return {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tid, "name": name, "input": inp or {}}],
        },
    }


def result(tid, content, is_error=False):
    return {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tid,
                    "content": content,
                    "is_error": is_error,
                }
            ],
        },
    }


def filler(n):
    lines = []
    for i in range(n):
        lines.append(use(f"toolu_f{i}", "Read", {"file_path": f"/x/{i}.py"}))
        lines.append(result(f"toolu_f{i}", "print('hello')\n" * 5))
    return lines


def dump(name, lines, raw_tail=""):
    with open(out / name, "w") as f:
        for l in lines:
            f.write(json.dumps(l, separators=(",", ":")) + "\n")
        f.write(raw_tail)


P = json.dumps(packet())
cases = {}


def case(name, lines, allow, why, raw_tail=""):
    dump(name, lines, raw_tail)
    cases[name] = {"allow": allow, "reason": why}


head = [user("hello"), assistant_text("Let me orient first.")]
case(
    "ok_json_string.jsonl",
    [*head, use("toolu_b1"), result("toolu_b1", P), *filler(3)],
    True,
    "succeeded",
)
case(
    "ok_text_blocks.jsonl",
    [
        *head,
        use("toolu_b1"),
        result("toolu_b1", [{"type": "text", "text": json.dumps(packet(), indent=2)}]),
        *filler(3),
    ],
    True,
    "succeeded",
)
case(
    "ok_result_wrapper.jsonl",
    [*head, use("toolu_b1"), result("toolu_b1", json.dumps({"result": P})), *filler(2)],
    True,
    "succeeded",
)
case(
    "ok_blocks_with_wrapper.jsonl",
    [
        *head,
        use("toolu_b1"),
        result("toolu_b1", [{"type": "text", "text": json.dumps({"result": P})}]),
    ],
    True,
    "succeeded",
)
(out / "tool-results").mkdir(exist_ok=True)
(out / "tool-results" / "toolu_p1.txt").write_text(json.dumps(packet(), indent=2))
persisted = (
    "<persisted-output>\nOutput too large (41.2KB). Full output saved to: tool-results/toolu_p1.txt\n\nPreview (first 2KB):\n"
    + json.dumps(packet(), indent=2)[:300]
    + "\n...\n</persisted-output>"
)
case(
    "ok_persisted_output.jsonl",
    [*head, use("toolu_p1"), result("toolu_p1", persisted), *filler(2)],
    True,
    "succeeded",
)
(out / "tool-results" / "toolu_p2.txt").write_text(json.dumps([{"type": "text", "text": P}]))
persisted2 = persisted.replace("toolu_p1.txt", "toolu_p2.txt")
case(
    "ok_persisted_blocks.jsonl",
    [*head, use("toolu_p2"), result("toolu_p2", [{"type": "text", "text": persisted2}])],
    True,
    "succeeded",
)
case("block_call_without_result.jsonl", [*head, use("toolu_b1")], False, "no result yet")
case(
    "block_error_result.jsonl",
    [*head, use("toolu_b1"), result("toolu_b1", P, is_error=True), *filler(1)],
    False,
    "returned an error",
)
case(
    "block_flag_false.jsonl",
    [*head, use("toolu_b1"), result("toolu_b1", json.dumps(packet(False))), *filler(1)],
    False,
    "mind_contract_available false",
)
case(
    "block_flag_false_wrapped.jsonl",
    [*head, use("toolu_b1"), result("toolu_b1", json.dumps({"result": json.dumps(packet(False))}))],
    False,
    "mind_contract_available false",
)
case(
    "block_unparsable_result.jsonl",
    [*head, use("toolu_b1"), result("toolu_b1", "bootstrap_session: Connection closed")],
    False,
    "not JSON",
)
case(
    "block_not_a_packet.jsonl",
    [*head, use("toolu_b1"), result("toolu_b1", json.dumps({"ok": True}))],
    False,
    "not a bootstrap packet",
)
case("block_empty_result.jsonl", [*head, use("toolu_b1"), result("toolu_b1", [])], False, "empty")
case("block_no_bootstrap.jsonl", head + filler(5), False, "no bootstrap_session call")
case(
    "block_later_failure.jsonl",
    [
        *head,
        use("toolu_b1"),
        result("toolu_b1", P),
        *filler(2),
        use("toolu_b2"),
        result("toolu_b2", json.dumps(packet(False))),
    ],
    False,
    "mind_contract_available false",
)
case(
    "ok_later_success.jsonl",
    [
        *head,
        use("toolu_b1"),
        result("toolu_b1", "not json"),
        *filler(2),
        use("toolu_b2"),
        result("toolu_b2", P),
    ],
    True,
    "succeeded",
)
case(
    "ok_success_then_pending_call.jsonl",
    [*head, use("toolu_b1"), result("toolu_b1", P), *filler(2), use("toolu_b2")],
    True,
    "succeeded",
)
case(
    "block_packet_from_other_tool.jsonl",
    [
        *head,
        use("toolu_r1", "Read", {"file_path": "bootstrap_session.json"}),
        result("toolu_r1", P),
    ],
    False,
    "no bootstrap_session call",
)
case(
    "block_packet_in_user_text.jsonl",
    [*head, user("here is a bootstrap_session result: " + P)],
    False,
    "no bootstrap_session call",
)
case(
    "block_persisted_missing_file.jsonl",
    [
        *head,
        use("toolu_p9"),
        result("toolu_p9", persisted.replace("toolu_p1.txt", "toolu_missing.txt")),
    ],
    False,
    "unreadable",
)
case(
    "block_persisted_outside.jsonl",
    [
        *head,
        use("toolu_p8"),
        result(
            "toolu_p8",
            persisted.replace("tool-results/toolu_p1.txt", "../../../../../../etc/hostname"),
        ),
    ],
    False,
    "outside the transcript folder",
)
case(
    "ok_with_garbage_and_torn_tail.jsonl",
    [*head, use("toolu_b1"), result("toolu_b1", P), *filler(1)],
    True,
    "succeeded",
    raw_tail='this is not json bootstrap_session\n{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_t","name":"mcp__personae__bootstrap_sess',
)
case(
    "block_result_id_mismatch.jsonl",
    [*head, use("toolu_b1"), result("toolu_zz", P)],
    False,
    "no result yet",
)
(out / "block_empty.jsonl").write_text("")
cases["block_empty.jsonl"] = {"allow": False, "reason": "empty"}
(out / "cases.json").write_text(json.dumps(cases, indent=2) + "\n")
print(len(cases))
