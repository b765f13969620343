"""The most telling line of a failed step's output: what a cell's record and the views show as its error."""

from __future__ import annotations

import re

__all__ = ["summarize_log"]

_NOISE = re.compile(r"^(\s*(hint|help|note):|\s*\[(stdout|stderr)\]|\s*\$ |\s*\[exit code)", re.IGNORECASE)
_ERRORISH = re.compile(
    r"(error|exception|failed|fatal|not found|no such|cannot|could not|unsatisfiable|traceback)", re.IGNORECASE
)
_BUILD_DETAIL = re.compile(r"(\berror\b|Error:|ERROR|fatal)", re.IGNORECASE)
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")


def _clean(line: str) -> str:
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    line = re.sub(r"^[\s│├╰─▶×|]+", "", line).strip()
    return re.sub(r"^(cause|caused by|error|warning):\s+(?=\S)", "", line, flags=re.IGNORECASE)


def _resolver_sentence(lines: list[str]) -> str | None:
    """uv's resolver explains itself in 'Because … And because …' sentences: the whole sentence."""
    for i, line in enumerate(lines):
        if line.startswith("Because ") or "requirements are unsatisfiable" in line:
            sentence = [line]
            for more in lines[i + 1 : i + 6]:
                if sentence[-1].endswith("unsatisfiable.") or not more.lower().startswith(("and ", "because")):
                    break
                sentence.append(more)
            return " ".join(sentence)
    return None


def _failed_build(lines: list[str]) -> str | None:
    """``Failed to build X`` with the build's last error line."""
    failed_build = next((line for line in lines if line.startswith("Failed to build")), None)
    if failed_build is None:
        return None
    skipped = ("Failed to build", "Call to", "The build backend", "error: subprocess-exited-with-error")
    detail = [line for line in lines if _BUILD_DETAIL.search(line) and not line.startswith(skipped)]
    return failed_build + (f": {detail[-1]}" if detail else "")


def summarize_log(text: str, limit: int = 240) -> str:
    """The most telling line of a failed step's output (uv's reason, a build error, the exception)."""
    lines = [_clean(line) for line in text.splitlines()]
    lines = [line for line in lines if line and not _NOISE.match(line)]
    if not lines:
        return "no output"
    pick = _resolver_sentence(lines)
    if pick is not None:
        limit = max(limit, 420)
    else:
        pick = _failed_build(lines)
    if pick is None:  # a traceback ends with the exception
        pick = next((line for line in reversed(lines) if _EXCEPTION.match(line)), None)
    if pick is None:
        pick = next((line for line in reversed(lines) if _ERRORISH.search(line)), lines[-1])
    pick = re.sub(r"\s+", " ", pick)
    return pick if len(pick) <= limit else pick[: limit - 1] + "…"
