"""The input filter shared by recall and the side judge, without leaving the standard library
(this module is on the hook path).

``classify_input``: is this prompt the user's own words, and which part of it is worth recalling
or judging? Continuations the plugin or a host feeds back as a "prompt", slash commands and
client-injected tags are skipped; fenced code, runs of pasted code and log lines are cut out; what
is left must be 6..500 characters. ``prepare_for_judge`` chains it with redaction
(``memself.text.redact``). All heuristics are line-shape based and deliberately
conservative about ordinary Chinese prose: dropping a user's sentence loses a memory, while
letting one stray code line through only adds a little noise to an embedding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memself.text.messages import CONFIRM_MARKER, NOTICE_HEADER
from memself.text.redact import redact

MIN_CHARS = 6
MAX_CHARS = 500

SKIP_EMPTY = "empty"
SKIP_PLUGIN_CONTINUATION = "plugin-continuation"
SKIP_PLUGIN_NOTICE = "plugin-notice"
SKIP_QUESTION_ANSWER = "question-answer"
SKIP_STOP_HOOK = "stop-hook"
SKIP_SLASH_COMMAND = "slash-command"
SKIP_LEADING_TAG = "leading-tag"
SKIP_TOO_SHORT = "too-short"
SKIP_TOO_LONG = "too-long-paste"


@dataclass(frozen=True)
class FilterResult:
    """``recall_text`` is the cleaned, whitespace-collapsed text ("" when skipped)."""

    recall_text: str
    skip_reason: str

    @property
    def skipped(self) -> bool:
        return bool(self.skip_reason)


# --------------------------------------------------------------------------------------------
# Not the user's own words
# --------------------------------------------------------------------------------------------

# A Stop continuation comes back as a user prompt "Stop hook: <reason>" from some hosts, and as
# "Stop hook feedback:" in the model request from others.
_STOP_HOOK = re.compile(r"Stop hook(?: feedback)?:(?:\s|$)")
_QUESTION_ANSWER_TAG = "<question_answer>"

# "/" + a command word, then the end or whitespace: "/compact", "/review 123", "/plugin:cmd".
# A path continues with another "/" ("/usr/local/bin") and is never a command.
_SLASH_COMMAND = re.compile(r"/([A-Za-z0-9][A-Za-z0-9_:-]*)(?:\s|$)")
# Root folders people name in prose ("/tmp 满了"); no client ships commands with these names.
_ROOT_DIRS = frozenset(
    {
        "tmp",
        "etc",
        "usr",
        "var",
        "home",
        "opt",
        "bin",
        "sbin",
        "dev",
        "proc",
        "sys",
        "root",
        "mnt",
        "srv",
        "lib",
        "lib64",
        "boot",
        "data",
        "media",
        "run",
        "private",
        "Users",
        "Applications",
        "Volumes",
        "Library",
        "System",
    }
)

# A lowercase tag opening the input, as clients inject them: <task-notification>,
# <system-reminder data-role="hook">, <command-name>, <local-command-stdout>.
_LEADING_TAG = re.compile(r"<([a-z][a-z0-9]*(?:[-_:][a-z0-9]+)*)(?:\s[^<>]*)?/?>")
# A user asking about markup ("<div> 怎么居中") is still the user; clients do not inject these.
_HTML_TAGS = frozenset(
    {
        "a",
        "b",
        "i",
        "p",
        "br",
        "hr",
        "div",
        "span",
        "img",
        "ul",
        "ol",
        "li",
        "table",
        "tr",
        "td",
        "th",
        "form",
        "input",
        "button",
        "select",
        "option",
        "textarea",
        "label",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "code",
        "pre",
        "em",
        "strong",
        "html",
        "head",
        "body",
        "script",
        "style",
        "link",
        "meta",
        "svg",
        "canvas",
        "video",
        "audio",
        "iframe",
        "nav",
        "header",
        "footer",
        "section",
        "article",
        "main",
        "template",
        "slot",
    }
)
# Client context blocks that can also appear later in the text; they are never the user's words.
_EMBEDDED_CLIENT_BLOCK = re.compile(
    r"<(system-reminder|task-notification|local-command-stdout|local-command-stderr|"
    r"local-command-caveat|command-name|command-message|command-args)\b[^>]*>.*?</\1>",
    re.DOTALL,
)


def _source_skip_reason(text: str) -> str:
    """Reason why ``text`` (left-stripped, non-empty) is not the user's own words, or ""."""
    if CONFIRM_MARKER in text:
        return SKIP_PLUGIN_CONTINUATION
    if text.startswith(NOTICE_HEADER):
        return SKIP_PLUGIN_NOTICE
    if _QUESTION_ANSWER_TAG in text:
        return SKIP_QUESTION_ANSWER
    if _STOP_HOOK.match(text):
        return SKIP_STOP_HOOK
    if text.startswith("/"):
        m = _SLASH_COMMAND.match(text)
        if m and m.group(1) not in _ROOT_DIRS:
            return SKIP_SLASH_COMMAND
    if text.startswith("<"):
        m = _LEADING_TAG.match(text)
        if m and m.group(1) not in _HTML_TAGS:
            return SKIP_LEADING_TAG
    return ""


# --------------------------------------------------------------------------------------------
# Cleaning: fenced code, runs of code lines, log lines
# --------------------------------------------------------------------------------------------

_FENCE_OPEN = re.compile(r"(?:^|(?<=\s))(`{3,}|~{3,})[ \t]*[A-Za-z0-9_+#.-]*[ \t]*$")
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,}|~{3,})(?![`~^\x21-\x7e])(.*)$")
# "行内 ```x = 1``` 也算代码块吗": a one-line span.
_FENCE_SPAN = re.compile(r"```[^`\n]+```")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
# String literals and trailing comments may hold Chinese inside real code.
_STRING_LITERAL = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|`[^`\n]*`")
_TRAILING_COMMENT = re.compile(r"(?:\s//|\s#|^\s*//|^\s*#|/\*).*$")

_CODE_STRONG_START = re.compile(
    r"(?:[})\]]|//|/\*|\*/|#include\b|#define\b|#pragma\b|#!/|@[A-Za-z_][\w.]*(?:\(|$)|"
    r"<[A-Za-z/!?][^>]*>(?:.*>)?$|\$ \S)"
)
_CODE_STRONG_END = re.compile(r"(?:[;{]|\{\s*\}|\}[;,)]?|\);|=>|:=)$")
_CODE_KEYWORD_START = re.compile(
    r"(?:(?:def|class|func|fn|pub|import|package|return|const|let|var|function|async|await|"
    r"export|interface|public|private|protected|static|final|void|struct|enum|impl|use|mod|"
    r"try|except|catch|finally|raise|throw|defer|go|yield|lambda|elif|else|switch|case|"
    r"default|namespace|using|print|println|printf|assert|del|pass|break|continue|type|from|"
    r"if|for|while|with)\b|console\.log\b)"
)
# Upper-case SQL at the start of a line is never prose.
_SQL_START = re.compile(
    r"(?:SELECT|FROM|WHERE|AND|OR|JOIN|LEFT JOIN|INNER JOIN|INSERT|UPDATE|DELETE|CREATE|ALTER|"
    r"DROP|GROUP BY|ORDER BY|LIMIT|VALUES|SET)\b"
)
# "<span>你好</span>", "<div class=\"a\">": markup, whatever text sits between the tags.
_MARKUP_LINE = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>(?:.*>)?$")
# A lone "server:" opening a YAML block.
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*:$")
_YAML_KEY = re.compile(r"-?\s*[\w.-]+:(?:\s|$)")
# Assignments and calls: "x = 1", "data := load()", "self.cache[key] = v", "foo.bar(...)".
_CODE_SHAPE = re.compile(
    r"[\w$.\[\]\"'*&]+\s*(?:[-+*/|&%^]?=(?!=)|:=)|"
    r"[\w$.\[\]]+\(|"
    r"\"[\w.-]+\"\s*:\s*\S"
)
_CODE_PUNCT = re.compile(r"[=(){}\[\];<>]|->|::")


def _code_view(line: str) -> str:
    """The line with literals and comments cut, so Chinese inside them does not count as prose."""
    return _TRAILING_COMMENT.sub("", _STRING_LITERAL.sub('""', line))


def _is_code_line(line: str) -> bool:
    stripped = line.strip()
    if not stripped:
        return False
    indented = line.startswith(("\t", "  "))
    # Comment lines inside an indented block: "    # 先校验参数", "\t// TODO".
    if indented and stripped.startswith(("#", "//", "--", "* ", "/*", "*/")):
        return True
    if _MARKUP_LINE.match(stripped):
        return True
    if _BARE_KEY.match(stripped):
        return True
    if _CODE_STRONG_START.match(stripped) or _CODE_STRONG_END.search(stripped):
        # Prose such as "(见上文)" or "} 这个括号是多余的吗" carries Chinese outside literals.
        return not _CJK.search(_code_view(stripped)) or stripped.endswith((";", "{"))
    if _CJK.search(_code_view(stripped)):
        return False
    if _SQL_START.match(stripped) or _CODE_SHAPE.match(stripped):
        return True
    has_punct = bool(_CODE_PUNCT.search(stripped))
    if _CODE_KEYWORD_START.match(stripped):
        # Keywords double as English words ("use the new API"): want punctuation or brevity.
        return has_punct or stripped.endswith(":") or len(stripped.split()) <= 3
    if stripped.endswith((",", "(", "[", ")", "]", ":")) and has_punct:
        return True
    return indented and (has_punct or bool(_YAML_KEY.match(stripped)))


# Lines that are log output or stack traces on their own.
_LOG_STRONG = re.compile(
    r"(?:"
    # 2026-11-30 08:48:06, [2026-11-30T08:48:06.123Z], 2026/11/30 08:48:06
    r"\[?\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}:\d{2}"
    # 08:48:06.123 or [08:48:06]
    r"|\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s"
    # syslog: Nov 30 08:48:06
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}"
    # glog: E1130 08:48:06.123456
    r"|[IWEF]\d{4}\s+\d{2}:\d{2}:\d{2}"
    # access log: 10.0.0.1 - - [30/Nov/2026:08:48:06 +0000]
    r"|\d{1,3}(?:\.\d{1,3}){3}\s+\S+\s+\S+\s+\[\d{2}/\w{3}/\d{4}:"
    # level first: [ERROR] x, ERROR: x, ERROR [main] x, WARN 1234 --- x, E/Tag: x (logcat)
    r"|\[(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL|PANIC)\]"
    r"|(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL|PANIC)"
    r"(?::[\w.]*:|:\s|\s+\[|\s+\d+\s)"
    r"|[VDIWEF]/[\w.]+(?:\(\s*\d+\))?:\s"
    # logfmt and JSON logs
    r"|(?:time|ts)=\S+\s+level="
    r"|\{.*\"(?:level|severity)\"\s*:"
    # Python tracebacks
    r"|Traceback \(most recent call last\):"
    r"|File \"[^\"]+\", line \d+"
    r"|During handling of the above exception"
    r"|The above exception was the direct cause"
    # Java / JS / Go traces
    r"|at (?:async )?\S[^()\n]*\((?:[^()\n]*:\d+(?::\d+)?|Native Method|Unknown Source|"
    r"index \d+|<anonymous>)\)$"
    r"|at <anonymous>$"
    r"|at (?:async )?(?:file://)?/\S*:\d+:\d+$"
    r"|\.\.\. \d+ more$"
    r"|Caused by: "
    r"|Exception in thread "
    r"|goroutine \d+ \[[\w ]+\]:"
    r"|panic: "
    r"|\S+\.go:\d+(?: \+0x[0-9a-f]+)?$"
    r"|npm (?:ERR|WARN)! "
    r"|(?:error|warning)\[E\d+\]: "
    r"|--> \S+:\d+:\d+$"
    # docker compose: "web-1  | ..."
    r"|[\w.-]+-\d+\s+\|\s"
    r")"
)
# Lines that belong to a trace only when next to one: "ValueError: bad id", "    ^^^^^".
_LOG_WEAK = re.compile(
    r"(?:[A-Za-z_][\w.$]*(?:Error|Exception|Exit|Interrupt|Warning)(?::\s.*)?$"
    r"|[\^~\s]*\^[\^~\s]*$"
    r"|[\w.*()/-]+\([^()]*\)$"
    r"|\d+\s*\|.*$"
    # compiler snippets and Go panics: "  |     ^ value moved", "= note: ...", "exit status 2"
    r"|\|(?:\s.*)?$"
    r"|= (?:note|help): .*$"
    r"|\[signal .*\]$"
    r"|exit status \d+$"
    r")"
)


def _drop_fenced(lines: list[str]) -> list[str]:
    """Remove ``` and ~~~ blocks.

    A fence is the marker plus at most an info word ("```go"). At the start of a line it opens
    a block even when never closed (a paste cut short runs to the end); in the middle of a line
    ("看下这段 ```go") only if a closing fence follows. A closing fence may carry the user's
    next words ("``` 为什么不对"); a Python caret line ("~~~~^~~~") is not a fence.
    """
    out: list[str] = []
    fence = ""
    for idx, line in enumerate(lines):
        if fence:
            m = _FENCE_CLOSE.match(line)
            if m and m.group(1).startswith(fence):
                fence = ""
                if m.group(2).strip():
                    out.append(m.group(2))
            continue
        line = _FENCE_SPAN.sub(" ", line)
        m = _FENCE_OPEN.search(line)
        if m is None:
            out.append(line)
            continue
        before, marker = line[: m.start()], m.group(1)
        if before.strip():
            closes = any(
                (c := _FENCE_CLOSE.match(later)) and c.group(1).startswith(marker)
                for later in lines[idx + 1 :]
            )
            if not closes:
                out.append(line)
                continue
            out.append(before)
        fence = marker
    return out


def _drop_logs(lines: list[str]) -> list[str]:
    n = len(lines)
    is_log = [bool(_LOG_STRONG.match(line.strip())) for line in lines]
    weak = [bool(_LOG_WEAK.match(line.strip())) and bool(line.strip()) for line in lines]
    for i in range(1, n):
        # The source line a Python traceback shows under each `File "...", line N`.
        if is_log[i - 1] and lines[i - 1].strip().startswith('File "') and lines[i].strip():
            is_log[i] = True
    # Weak lines join an adjacent trace; forward then backward covers headers and footers.
    for i in range(1, n):
        if weak[i] and not is_log[i] and is_log[i - 1]:
            is_log[i] = True
    for i in range(n - 2, -1, -1):
        if weak[i] and not is_log[i] and is_log[i + 1]:
            is_log[i] = True
    return [line for line, log in zip(lines, is_log, strict=True) if not log]


_MIN_CODE_RUN = 3


def _drop_code_runs(lines: list[str]) -> list[str]:
    """Remove runs of >= 3 code-looking lines (blank lines and one comment line may bridge)."""
    kinds = ["blank" if not line.strip() else "code" if _is_code_line(line) else "text" for line in lines]
    # One unrecognised line between two code lines is part of the code (a "# 注释" line, a
    # docstring); prose between snippets is rarely a single line squeezed without a blank.
    for i in range(1, len(lines) - 1):
        if kinds[i] == "text" and kinds[i - 1] == "code" and kinds[i + 1] == "code":
            stripped = lines[i].strip()
            if stripped.startswith(("#", "--", "*", '"""', "'''")) or not _CJK.search(stripped):
                kinds[i] = "code"
    out: list[str] = []
    i = 0
    n = len(lines)
    while i < n:
        if kinds[i] != "code":
            out.append(lines[i])
            i += 1
            continue
        j = i
        count = 0
        last_code = i
        while j < n and kinds[j] != "text":
            if kinds[j] == "code":
                count += 1
                last_code = j
            j += 1
        if count >= _MIN_CODE_RUN:
            out.extend(lines[last_code + 1 : j])
        else:
            out.extend(lines[i:j])
        i = j
    return out


def _collapse(text: str) -> str:
    return " ".join(text.split())


def clean_text(text: str) -> str:
    """Cut fenced code, code runs, log lines and client context blocks; collapse whitespace."""
    text = _EMBEDDED_CLIENT_BLOCK.sub("\n", text)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = _drop_fenced(lines)
    lines = _drop_logs(lines)
    lines = _drop_code_runs(lines)
    return _collapse("\n".join(lines))


def classify_input(text: str) -> FilterResult:
    """Decide whether a prompt is recalled/judged, and return the part that is."""
    head = text.lstrip().lstrip("\ufeff").lstrip()
    if not head:
        return FilterResult("", SKIP_EMPTY)
    reason = _source_skip_reason(head)
    if reason:
        return FilterResult("", reason)
    cleaned = clean_text(head)
    if len(cleaned) < MIN_CHARS:
        return FilterResult("", SKIP_TOO_SHORT)
    if len(cleaned) > MAX_CHARS:
        return FilterResult("", SKIP_TOO_LONG)
    return FilterResult(cleaned, "")


def prepare_for_judge(text: str) -> str:
    """The text the side judge may send off the machine, or "" when nothing may be sent."""
    result = classify_input(text)
    if result.skipped:
        return ""
    safe = _collapse(redact(result.recall_text))
    return safe if MIN_CHARS <= len(safe) <= MAX_CHARS else ""
