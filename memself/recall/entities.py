"""Names a short lookup prompt shares with a memory: what lets "mongo 连接串" past the
general-question penalty while "mongodb 和 mysql 区别" still pays it.

The general-question detector reads a prompt's vector and length; a short prompt that names a
tool reads like a question about the tool in general ("pg?", "k8s ns", "CI secrets config"), so
the penalty used to cut exactly the lookups a memory exists for. A prompt of at most
``SHORT_WORDS`` words that asks nothing in general (no "what is", "区别", "原理", ...) and names an
identifier a memory also names is a lookup of that memory: the memory pays only part of the
penalty (``ScoringSettings.entity_relief``, calibrated per model). Every other memory, and every
memory for a prompt that asks in general or is longer, pays the full penalty.

Identifiers: ASCII names lower-cased (``redis``, ``irq_lock``, ``version.cmake``) and their parts,
folded through a short table of everyday shorthand (``k8s`` = ``kubernetes``, ``pg`` =
``postgresql``, ``GHA`` = ``github-actions``, ``mongod`` = ``mongodb``, ...) and a plural ``s``, so
that the prompt's spelling and the memory's meet. Standard library only: it runs on every prompt;
the memories' identifiers are computed once per pool (``RecallPool.entity_mask``).
"""

from __future__ import annotations

import re

from memself.recall.shape import is_short

# Everyday shorthand for the same thing; both sides are folded, so only the mapping matters.
ALIASES = {
    "k8s": "kubernetes",
    "kube": "kubernetes",
    "pg": "postgresql",
    "postgres": "postgresql",
    "psql": "postgresql",
    "mongo": "mongodb",
    "mongod": "mongodb",
    "gha": "github-actions",
    "gh": "github",
    "es": "elasticsearch",
    "tf": "terraform",
    "ns": "namespace",
    "js": "javascript",
    "ts": "typescript",
    "py": "python",
    "ck": "clickhouse",
    "rmq": "rabbitmq",
    "wandb": "w&b",
    "cfg": "config",
    "conf": "config",
    "env": "environment",
    "repo": "repository",
    "db": "database",
}
# Names of several words, joined before tokenising.
PHRASES = (
    ("github actions", "github-actions"),
    ("weights & biases", "w&b"),
    ("weights and biases", "w&b"),
)
_STOP = frozenset(
    "a an the to of in on for and or is are be was were do does did i you we it this that my your "
    "our me us how what why when where which who can could should would will with without from by "
    "as at not no yes if then so but just please about into out up here there use used using vs "
    "whats what's it's its".split()
)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_&+#]*(?:[.\-/][A-Za-z0-9_]+)*")
_PARTS = re.compile(r"[.\-/_]+")
# A prompt that asks about a thing in general, not about this project's use of it.
_GENERAL = re.compile(
    r"是什么|什么是|区别|不同|原理|为什么|为啥|对比|比较|哪个好|优缺点|讲讲|讲一下|介绍|解释|科普|怎么理解|新特性|"
    r"\bwhat (?:is|are)\b|\bwhat's an?\b|\bexplain(?:ed)?\b|\bdifferences?\b|\bvs\.?\b|\bversus\b|"
    r"\bcompare\b|\bcomparison\b|\bhow (?:does|do) .+ work\b|\bpros and cons\b|\bwhy (?:is|are|does|do)\b|"
    r"\btell me about\b|\bintroduction\b|\bbest practices?\b",
    re.IGNORECASE,
)


_CANONICAL = frozenset(ALIASES.values())


def _fold(word: str) -> str:
    word = ALIASES.get(word, word)
    if word in _CANONICAL:
        return word
    if len(word) > 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = ALIASES.get(word[:-1], word[:-1])
    return word


def identifiers(text: str) -> frozenset[str]:
    """The ASCII names of ``text`` and their parts, lower-cased and folded (see the module doc)."""
    low = text.lower()
    for phrase, joined in PHRASES:
        low = low.replace(phrase, joined)
    out: set[str] = set()
    for token in _TOKEN.findall(low):
        for word in (token, *_PARTS.split(token)):
            if len(word) >= 2 and word not in _STOP:
                out.add(_fold(word))
    return frozenset(out)


def asks_in_general(text: str) -> bool:
    """The prompt asks about something in general ("X 是什么", "X vs Y", "how does X work")."""
    return bool(_GENERAL.search(text))


def lookup_identifiers(text: str) -> frozenset[str]:
    """The identifiers a short lookup prompt names; empty for a longer prompt or one that asks in
    general (those pay the full penalty on every memory)."""
    if not is_short(text) or asks_in_general(text):
        return frozenset()
    return identifiers(text)
