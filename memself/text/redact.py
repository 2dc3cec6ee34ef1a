"""Redaction: what leaves the machine (every judge request) has its credentials hidden first.

Key-like strings, the values of credential phrases ("密码改成了 X", "password is X", ``-pX``,
``PGPASSWORD=X``) and national ID, mobile and bank-card numbers become ``[已隐去]``. Standard
library only: this module is on the hook path. A security boundary, so it lives apart from the
input filter (``memself.text.input_filter``) that decides what of a prompt is the user's words.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from itertools import pairwise

REDACTED = "[已隐去]"

# --------------------------------------------------------------------------------------------
# --------------------------------------------------------------------------------------------
# Redaction
# --------------------------------------------------------------------------------------------
#
# Rules come in three kinds. Shape rules hide what is a secret on its own (PEM blocks, provider
# keys, JWTs, national ID / phone / bank-card numbers, long random strings). Phrase rules hide the
# value after a credential word and a link ("密码改成了 X", "password is X", "DB_PASS=X",
# "账号 root 密码 X"); the key and the link stay so the sentence still reads. Command rules hide
# the value of password flags in shell commands. A value after a link is judged by how strong the
# link is: after "=" / "：" / "是" / "改成" anything that is not a placeholder or a known word goes;
# after "is" / "用" / a bare space it must look machine-made (a digit, a symbol, mixed case).


# Traditional forms of the simplified characters the rules spell their Chinese words with. Every
# rule is written once, in simplified Chinese; compiling it widens each such character to both forms,
# so 密碼為, 帳號, 驗證碼 and 設定為 match wherever 密码为, 账号, 验证码 and 设定为 do.
_TRADITIONAL = {
    pair[0]: pair[1:]
    for pair in (
        "万萬 个個 临臨 为為 么麼 们們 传傳 储儲 内內 写寫 凭憑 则則 刚剛 别別 动動 "
        "单單 变變 号號 后後 吗嗎 块塊 复復複 学學 实實 对對 岁歲 帐帳 应應 录錄 "
        "径徑 态態 户戶 报報 换換 据據 数數 时時 暂暫 机機 杂雜 权權 来來 样樣 没沒 "
        "环環 现現 码碼 确確 简簡 类類 经經 给給 统統 缀綴 编編 节節 规規 计計 订訂 "
        "认認 记記 设設 证證 词詞 试試 该該 误誤 账賬帳 输輸 过過 运運 还還 里裡裏 "
        "钟鐘 钥鑰 错錯 键鍵 长長 门門 间間 随隨 隐隱 须須 验驗 栏欄 库庫 凑湊 周週 "
        "于於 册冊 陆陸 这這 说說 网網 页頁 银銀 电電 话話 强強 连連 线線 发發 两兩 "
        "务務 员員 项項 问問 处處 总總 绑綁 钱錢 层層 开開 关關 办辦 边邊 档檔 资資 "
        "预預"
    ).split()
}


def _with_traditional(source: str) -> str:
    """``source`` with each simplified character that has a traditional form widened to both."""
    if all(c not in _TRADITIONAL for c in source):
        return source
    out: list[str] = []
    in_class = escaped = False
    for c in source:
        twins = _TRADITIONAL.get(c)
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        elif twins:
            out.append(c + twins if in_class else f"[{c}{twins}]")
            continue
        out.append(c)
    return "".join(out)


class _Lazy:
    """A regular expression compiled on its first use, its Chinese words in both scripts.

    The hook imports this module on every event, but only a prompt bound for the judge is
    redacted; the redaction rules are many and take a noticeable share of the import to compile.
    Each compiles once per process, when first needed.
    """

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(_with_traditional(self._source), self._flags)
        return self._compiled

    def sub(self, repl: str | Callable[[re.Match[str]], str], text: str) -> str:
        return self.compiled.sub(repl, text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(text)

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.compiled.match(text, pos)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self.compiled.fullmatch(text)

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.search(text, pos, endpos)

    def split(self, text: str) -> list[str]:
        return self.compiled.split(text)


_PEM_BLOCK = _Lazy(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,-]*)",
    re.DOTALL,
)
# scheme://user:password@host. The password runs to the last "@" of the authority (hand-typed
# DSNs often carry an unencoded "@"); the user may be empty (redis://:pw@host).
_URL_CREDENTIALS = _Lazy(
    r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,30}://[^\s:/?#@]*:)([^\s/?#]+)(@)(?=[^\s@/?#]*(?:[/?#\s]|$))"
)
_JWT = _Lazy(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
_B = r"(?<![A-Za-z0-9_-])"
_E = r"(?![A-Za-z0-9_-])"
_PROVIDER_KEYS = _Lazy(
    _B + r"(?:"
    r"sk-ant-[A-Za-z0-9_-]{20,}"
    # OpenAI, DeepSeek, Moonshot and friends; a digit keeps "sk-button-primary-..." out.
    r"|sk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    # Alibaba Cloud and Tencent Cloud access key ids.
    r"|LTAI[A-Za-z0-9]{12,30}"
    r"|AKID[A-Za-z0-9]{13,40}"
    r"|xox[abeprs]-[A-Za-z0-9-]{10,}"
    r"|xapp-\d-[A-Za-z0-9-]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|whsec_[A-Za-z0-9+/=]{20,}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|pypi-[A-Za-z0-9_-]{50,}"
    r"|gl(?:dt|ptt|rt|soat|cbt|imt|ffct|agent|oas)-[A-Za-z0-9_-]{20,}"
    r"|gl(?:sa|c)_[A-Za-z0-9_=-]{30,}"
    r"|(?:gsk|r8|lin_api|ntn|shp(?:at|ss|ca|pa)|do[opr]_v1)_[A-Za-z0-9]{30,}"
    r"|dapi[0-9a-f]{32}"
    r"|(?:xai|pplx)-[A-Za-z0-9]{40,}"
    r"|hv[sb]\.[A-Za-z0-9_-]{24,}"
    r"|dp\.(?:pt|st|sa|ct)\.[A-Za-z0-9]{40,}"
    r"|sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"
    r"|PMAK-[0-9a-f]{24}-[0-9a-f]{34}"
    r"|ATATT3[A-Za-z0-9_=-]{50,}"
    # Mailgun (key-..., and hex-hex-hex), Twilio API key secrets.
    r"|key-[0-9A-Za-z]{32}"
    r"|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}"
    r"|SK[0-9a-fA-F]{32}"
    # Telegram bot tokens: the bot's number, a colon and 35 characters starting with AA.
    r"|\d{8,10}:AA[A-Za-z0-9_-]{33}"
    r")" + _E
)
# Three dot-separated base64url parts, as Discord bot tokens (user id, timestamp, HMAC) and SendGrid
# keys (SG., id, secret) are made. A JWT has its own rule; a dotted name or version has no part of
# this length and mix.
_DOTTED_TOKEN = _Lazy(
    r"(?<![A-Za-z0-9_.-])(?:[A-Za-z0-9_-]{2,40})\.[A-Za-z0-9_-]{6,40}\.[A-Za-z0-9_-]{20,}(?![A-Za-z0-9_.-])"
)
# Webhook URLs carry their secret in the path: Slack (/services/T../B../secret), Discord
# (/api/webhooks/id/token), Feishu and Lark (/bot/v2/hook/uuid), DingTalk, Teams and generic
# /hooks/ or /webhooks/ endpoints. The path after the hook word goes when it looks made up.
_WEBHOOK_PATH = _Lazy(
    r"(?i:\bhttps?://[^\s/?#]+(?:/[^\s/?#]+)*?/(?:services|webhooks?|hooks?|triggers|workflows|robot)/"
    r"(?:v\d+/)?)([A-Za-z0-9_/+=.%-]{16,})"
)
_BEARER = _Lazy(r"\b(Bearer|Basic|Token)(\s+)([A-Za-z0-9._~+/-]{8,}=*)", re.IGNORECASE)

# ---- credential words ----------------------------------------------------------------------

# English key names that hold secrets, possibly inside a longer identifier (DB_PASSWORD,
# aws_secret_access_key, "apiKey"). "tokens"/"tokenizer" are excluded: max_tokens is not a secret.
# Session cookies (JSESSIONID, PHPSESSID, session_token), .npmrc's _auth and Azure's AccountKey and
# SharedAccessSignature are credentials under other names.
_SECRET_WORD = (
    r"(?i:password|passwd|passphrase|passcode|pwd|secret[_-]?key|secret|token|api[_-]?key|"
    r"access[_-]?key|private[_-]?key|credentials?|auth[_-]?key|session[_-]?key|cookie|"
    r"sess(?:ion)?[_-]?(?:id|token|cookie)|_auth|account[_-]?key|shared[_-]?access[_-]?(?:key|signature)|"
    r"requirepass|masterauth|mnemonic)(?![a-z])"
)
# Short names match by case so that "bypass", "compass" or "spin" stay words: "pass", "DB_PASS",
# "dbPass", "pw", "PIN", and AK/SK as cloud consoles label an access key pair.
_SHORT_WORD = (
    r"(?:(?<![A-Za-z])(?:pass|Pass|PASS|pw|Pw|PW|PIN|AK|SK)|(?<=[a-z])(?:Pass|PASS|Pw|Pin))(?![a-z])"
)
_IDENT_KEY = (
    r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*?(?:" + _SECRET_WORD + "|" + _SHORT_WORD + r")"
    r"(?:[_.-][A-Za-z0-9]+)*(?:[\"']\]?)?"
)
# "api key", "client secret", "access token": two words in prose.
_SPACED_KEY = (
    r"(?<![A-Za-z])(?i:(?:api|access|secret|private|auth|app|client|session|refresh|bot|"
    r"personal\s+access)\s+(?:key|secret|token)|session\s+(?:id|cookie)|seed\s+phrase|recovery\s+phrase)(?![a-z])"
)
# 密码学 is cryptography; 金钥 and 权杖 are how Taiwan writes key and token.
_ZH_KEY = (
    r"(?:密码(?!学)|口令|密钥|秘钥|私钥|金钥|令牌|权杖|授权码|验证码|暗号|助记词|"
    r"(?:PIN|pin|Pin)\s?(?:码|code|Code))"
)
_KEY = "(?P<key>" + _ZH_KEY + "|" + _SPACED_KEY + "|" + _IDENT_KEY + ")"

# Key names whose last part names a property of the secret, not the secret: PASSWORD_MIN_LENGTH,
# token_url, secret_file, api_key_header.
_PROPERTY_SUFFIX = frozenset(
    {
        "len",
        "length",
        "min",
        "max",
        "ttl",
        "expire",
        "expires",
        "expiry",
        "expiration",
        "timeout",
        "file",
        "path",
        "dir",
        "url",
        "uri",
        "endpoint",
        "name",
        "count",
        "size",
        "age",
        "days",
        "rounds",
        "cost",
        "algorithm",
        "algo",
        "type",
        "mode",
        "policy",
        "header",
        "field",
        "column",
        "env",
        "var",
        "prefix",
        "suffix",
        "format",
        "pattern",
        "regex",
        "hint",
        "label",
        "limit",
        "retries",
        "strength",
        "hash",
        "salt",
        "id",
        "ids",
        "enabled",
        "required",
    }
)
# Keys that name a password: after them a lowercase word closing the clause is the value
# ("my wifi password is swordfish.").
_PASSWORD_FAMILY = _Lazy(r"(?i)密码|口令|暗号|pin|password|passwd|passphrase|passcode|pwd")
# Keys after which a bare space may stand for the link ("口令 Zx9!kq27", "password Gh0stBot!").
_BARE_FAMILY = _Lazy(
    r"(?i)(?:密码|口令|暗号|验证码|授权码|pin\s?(?:码|code)?|password|passwd|passphrase|passcode|pwd|"
    r"requirepass|masterauth)"
)

# ---- links between a key and its value -----------------------------------------------------

# Words that may sit between 密码 and its verb: "密码我已经改成", "密码都是", "密码现在是".
_ZH_GAP = (
    r"(?:已经|已|预设|现在|目前|暂时|临时|默认|统一|一律|都|也|还|又|就|则|仍然|仍|依然|一直|本来|原来|"
    r"之前|以前|刚刚|刚才|刚|最近|昨天|今天|前天|后来|全部|全|分别|我们|我|你们|你|他们|他|她|被|给|"
    r"先|再|应该|好像|估计|大概|可能|一般|通常|其实|确实)"
)
# Verbs whose object is the value. "用", "叫", "输入" also take ordinary objects ("密码用 bcrypt
# 存"), so they count as weak links.
_ZH_VERB = (
    r"(?:(?:设置|设定|配置|设|改|换|填|写|配|用)的是|就是|设置为|设置成|设定为|设定成|设为|设成|改为|改成|重设为|重设成|"
    r"修改为|修改成|更改为|更改成|换成|换为|更新为|更新成|重置为|重置成|变成|变为|等于|是|为|"
    r"(?P<zhweak>叫做|叫|用|试试|试一下|试下|输入|输|填写|填入|填))"
)
_ZH_LINK = r"(?P<zh>\s*(?:" + _ZH_GAP + r"\s*){0,3}" + _ZH_VERB + r"(?:了|过)?\s*[:：]?\s*)"
_SEP_LINK = r"(?P<sep>\s*(?:[:：=]|=>)\s*)"
_EN_LINK = (
    r"(?P<en>(?:\s+(?:for|of|on|in|at)(?:\s+(?!(?:is|was|are|were)\b)[\w.@'-]+){1,3}?)?"
    r"(?:'s\s+|\s+(?:(?:is|was|are|were|has\s+been|have\s+been|will\s+be|became|becomes|remains)"
    r"(?:\s+(?:now|still|currently|temporarily|just|also))?"
    r"(?:\s+(?:changed|set|reset|updated|rotated|switched)\s+to)?"
    r"|(?:changed|set|reset|updated|rotated|switched)\s+to|now)\s*[:=]?\s*"
    # "pass for the vpn: X": after a "for ..." aside a colon links too (with no aside the
    # separator link has already matched).
    r"|\s*[:=]\s*))"
)
# Chinese writers often glue an ASCII value to the word: "密码Ubuntu@123".
_BARE_LINK = r"(?P<bare>[ \t]+|(?<=[^\x00-\x7f])(?=[\x21-\x7e]))"
# "密码（授权码）：x", "password (staging): x": a short aside between the key and the link.
_ASIDE = r"(?:\s*[（(][^（）()\n]{1,12}[）)])?"
_KEY_AND_LINK = _Lazy(
    _KEY + _ASIDE + "(?:" + _ZH_LINK + "|" + _SEP_LINK + "|" + _EN_LINK + "|" + _BARE_LINK + ")"
)
# "reset the intern accounts' password to X", "change the root password to X".
_EN_SET_TO = _Lazy(
    r"(?i:\b(?:set|change|changed|reset|update|updated|rotate|rotated)\s+(?:[\w.'-]+\s+){0,3}?"
    r"(?P<key>password|passwd|passphrase|passcode|pin|token|secret|api\s?key)\s+to\s+)"
)
# "k8s secret 里的 password base64 解出来是 S3cr3tV@l": a few more words between the key and a
# strong verb. Only values with a digit or a symbol count here ("token 过期时间是 3600" is a
# number, "token 字段名是 accessToken" a name).
_KEY_GAP_VERB = _Lazy(
    "(?P<key>" + _ZH_KEY + "|" + _SPACED_KEY + "|" + _IDENT_KEY + r")"
    r"(?P<gap>[^\n，。,；;:：！？!?\"'“”「」]{1,12}?)(?:(?:是|为|等于|改成|改为|设成|设为)了?\s*[:：]?|[:：])\s*"
)
# Words in that gap that make the value a property of the secret ("secret 的名字是 x").
_GAP_PROPERTY = _Lazy(
    r"名|字段|栏位|字元|档案|长度|时间|期|格式|类型|大小|尺寸|前缀|后缀|路径|地址|目录|文件|算法|方式|规则|正则|版本|"
    r"错误|报错|提示|码|号|端口|分支|接口|返回|示例|例子|"
    r"(?i:\b(?:id|name|header|url|path|type|format|length|prefix|version)\b)"
)
# "密码改了，新的是 X": the value follows in the next clause, named as the new one.
_KEY_THEN_NEW = _Lazy(
    "(?P<key>" + _ZH_KEY + "|" + _IDENT_KEY + r")[^\n。；;！？!?，,]{0,10}[，,]\s*"
    r"(?P<gap>)(?:新的|新|现在的?|目前的?|改成了?|换成了?)(?:密码|口令)?(?:用的)?\s*(?:是|为|[:：])?\s*"
)
# A command that asks for a password, then "输 X" / "type X": what was typed at the prompt.
_PROMPT_THEN_TYPE = _Lazy(
    r"(?:\bpsql\b[^\n|;&]{0,200}?\s(?:-W|--password)(?![\w-])|\b(?:mysql|mariadb)\b[^\n|;&]{0,200}?\s-p(?=\s|$)|"
    r"\b(?:sudo|su|ssh|passwd|kinit)\b|登录|登陆|登入|(?i:\blog\s?in\b|\bsign\s?in\b))"
    r"[^\n。；;！？!?]{0,30}?(?:输入|输|敲入|敲|键入|填入|填|(?i:\btype\b|\benter\b))\s*"
)
# A password stated further on in the sentence, past an aside or a comma: "密码的话，我一般用 X",
# "the password for the staging box, which I reset yesterday, is X". The key, up to 60
# characters within the sentence, a link, and a value that is made up beyond doubt.
_KEY_FAR_LINK = _Lazy(
    "(?P<key>"
    + _ZH_KEY
    + r"|(?i:\b(?:password|passphrase|passcode|passwd|pwd|pin|token|secret|api\s?key)s?\b))"
    r"(?P<gap>(?:(?![.。](?:\s|$))[^\n。！？!?；;]){1,60}?)"
    r"(?:是|为|用|输入?|填|设成|改成|设为|改为|换成|[:：]|(?i:\b(?:is|was|use|type|enter|try)\b))\s*[:：]?\s*"
)
# The value first: "Winter#2025 是所有测试账号共用的密码", "Blue42!Sky is the password for ...".
_VALUE_THEN_KEY = _Lazy(
    r"(?<![\x21-\x7e])(?P<value>[\x21\x23-\x26\x28-\x5f\x61-\x7e]{6,64})(?:"
    r"\s*(?:就是|是|为|作为|当作?)\s*(?:[^\n。！？!?，,比]{0,16}?的)?\s*(?:密码|口令)(?!学)"
    r"|\s+(?i:is|was)\s+(?i:the|my|our|your|his|her|their)\s+(?:[\w-]+\s+){0,3}?"
    r"(?i:password|passphrase|passcode|pin)\b)"
)
# "账号 root 密码 toor", "user admin password admin", "machine h login bot password x": the word
# before says the next pair is an account and its password.
_ACCOUNT_PAIR = _Lazy(
    r"(?<![A-Za-z])(?:账号|帐号|账户|帐户|用户名|用户|使用者(?:名称)?|登录名|登入名|(?i:user(?:name)?|login))\s*"
    r"(?:是|为|[:：=])?\s*[\"'“「]?[\w.@+-]{1,40}[\"'”」]?\s*[,，;；、/]?\s*(?:和|跟|及)?\s*"
    r"(?P<key>密码|口令|(?i:password|passwd|pwd|pass))\s*(?:是|为|[:：=])?\s*"
)
# "登录用 admin / P@ssw0rd123", "用户名/密码：admin/123456", "basic auth 用 admin:Adm1n": a
# user/password pair shortly after a word about logging in.
_LOGIN_PAIR = _Lazy(
    r"(?:登录|登陆|登入|账号|帐号|账户|用户名|凭据|凭证|(?i:log\s?in|sign\s?in|basic\s?auth|credentials?|creds))"
    r"[^\n。！？!?]{0,16}?(?<![A-Za-z0-9_./:@-])[A-Za-z0-9_.@+-]{2,40}(?P<pairsep>\s*/\s*|:)"
)

# "root:Root@123@192.168.1.10": user:password@host without a scheme (a URL scheme or mailto:
# is no user).
_USER_PASS_AT_HOST = _Lazy(
    r"(?<![\w/.:@-])(?!(?i:mailto|sips?|tel|xmpp|https?|ftp|ssh|git|file):)[A-Za-z_][\w.-]{0,39}:"
    r"(?P<pw>[^\s@/:]+(?:@[^\s@/:]+)*?)@(?=(?:\d{1,3}(?:\.\d{1,3}){3}|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)"
    r"(?::\d+)?(?![\w.-]))"
)
# "mq_admin / Mq@2024", "root/Root@123": a user name, a slash, and a value with letters, digits
# and a symbol or mixed case, which paths and "Python3.11 / Node20" do not have.
_MADE_UP_PAIR = _Lazy(
    r"(?<![A-Za-z0-9_./:@-])(?!(?:feature|feat|fix|bugfix|hotfix|release|chore|refactor|src|lib|docs?|"
    r"tests?|app|apps|api|pkg|cmd|internal|origin|upstream)\s*/)[a-z][a-z0-9_.-]{1,39}\s*/\s*"
    r"(?P<pw>(?=[^\s/]*[A-Za-z])(?=[^\s/]*\d)(?=[^\s/]*(?:[!@#$%^&*+=?~]|[a-z][^\s/]*[A-Z]|[A-Z][^\s/]*[a-z]))"
    r"[\x21\x23-\x26\x28-\x2e\x30-\x5f\x61-\x7e]{6,64})(?![^\s，。,;；)）])"
)


def _pw_group(m: re.Match[str]) -> str:
    value = m.group("pw")
    if _is_placeholder(value) or ("." in value and _VERSION.search(value)):
        return m.group(0)
    start, end = m.span("pw")
    return m.group(0)[: start - m.start()] + REDACTED + m.group(0)[end - m.start() :]


# ---- values --------------------------------------------------------------------------------

_QUOTES = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "「": "」", "『": "』"}
_ASCII_VALUE = _Lazy(r"[\x21\x23-\x26\x28-\x5f\x61-\x7e]+")
_MAX_CJK_VALUE = 20
_MAX_QUOTED = 100

_PLACEHOLDER_VALUES = frozenset(
    {
        "true",
        "false",
        "null",
        "none",
        "nil",
        "undefined",
        "string",
        "str",
        "int",
        "number",
        "bool",
        "required",
        "optional",
        "xxx",
        "xxxx",
        "xxxxxx",
        "***",
        "******",
        "...",
        "changeme",
        "changeit",
        "example",
        "placeholder",
        "dummy",
        "todo",
        "tbd",
    }
)
_PLACEHOLDER_SHAPE = _Lazy(r"(?i)(?:your|my|the)[_-]\w*|x{3,}|\*{3,}|\.{3,}|<[^<>]*>|\?{3,}")
# Words that follow a credential word in prose about it: how it is stored, whether it is right,
# what type it has. After any link they are not the value.
_STOP_WORDS = frozenset(
    {
        # algorithms and encodings
        "md5",
        "sha",
        "sha1",
        "sha-1",
        "sha2",
        "sha256",
        "sha-256",
        "sha512",
        "sha-512",
        "bcrypt",
        "scrypt",
        "argon2",
        "argon2i",
        "argon2id",
        "pbkdf2",
        "hmac",
        "aes",
        "aes256",
        "aes-256",
        "rsa",
        "des",
        "3des",
        "sm3",
        "sm4",
        "base64",
        "hex",
        "utf8",
        "utf-8",
        "ascii",
        "jwt",
        "uuid",
        "guid",
        "bearer",
        "basic",
        "digest",
        "opaque",
        "plaintext",
        "plain",
        "cleartext",
        "hash",
        "hashed",
        "hashing",
        "salt",
        "salted",
        "encrypted",
        "encoded",
        "random",
        "generated",
        # state and quality
        "correct",
        "incorrect",
        "wrong",
        "invalid",
        "valid",
        "expired",
        "missing",
        "empty",
        "blank",
        "same",
        "different",
        "weak",
        "strong",
        "short",
        "long",
        "secure",
        "insecure",
        "ok",
        "okay",
        "fine",
        "good",
        "bad",
        "stale",
        "revoked",
        "disabled",
        "enabled",
        "set",
        "unset",
        "changed",
        "reset",
        "updated",
        "stored",
        "saved",
        "rotated",
        "leaked",
        "exposed",
        "visible",
        "hidden",
        "masked",
        "default",
        "unknown",
        "needed",
        "mandatory",
        "case",
        # function words
        "the",
        "a",
        "an",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "its",
        "this",
        "that",
        "these",
        "those",
        "it",
        "not",
        "no",
        "also",
        "only",
        "still",
        "now",
        "then",
        "what",
        "which",
        "where",
        "how",
        "why",
        "when",
        "who",
        "there",
        "here",
        "too",
        "very",
        "always",
        "never",
        "from",
        "with",
        "without",
        "and",
        "or",
        "but",
        "for",
        "in",
        "on",
        "at",
        "to",
        "of",
        "by",
        # types and places
        "text",
        "integer",
        "boolean",
        "varchar",
        "char",
        "bytes",
        "object",
        "array",
        "list",
        "dict",
        "map",
        "env",
        "vault",
        "config",
        "file",
        "files",
        "secret",
        "secrets",
        "keychain",
        "kms",
    }
)
# Chinese words that describe a password instead of being one ("密码是 六位数字", "口令为 空").
_ZH_PROSE = _Lazy(
    r"位|数字|字母|字符|大小写|加密|解密|明文|密文|哈希|生成|随机|默认|多少|什么|怎么|为什么|是否|不|没|"
    r"错|对|空|过期|有效|正确|一样|相同|修改|重置|设置|登录|登入|注册|用户|使用者|账号|保存|存储|环境变量|配置|"
    r"字元|预设|杂凑|栏位|档案|"
    r"长度|格式|规则|强度|复杂|简单|必填|必须|自动|固定|动态|哪|啥|吗|呢|吧"
)
_VERSION = _Lazy(r"v?\d+(?:\.\d+){1,3}(?:[-+][\w.]+)?")
# Sizes and quantities: "120x40", "16GB", "200ms", "1.5rem".
_QUANTITY = _Lazy(r"\d+(?:\.\d+)?(?:[x×*]\d+(?:\.\d+)?|(?i:[kmgtp]i?b|px|rem|em|ms|s|h|d|m|%))")
_ACRONYM = _Lazy(r"[A-Z][A-Z0-9-]{1,7}")
_NUMERIC = _Lazy(r"[\d~+-]+")
# A number followed by a unit is a rule about the secret ("PIN 是 6 位", "token 有效期为 3600 秒").
_UNIT_AFTER = _Lazy(
    r"\s*(?:位|个|字符|字元|字节|次|天|小时|分钟|秒|周|个月|月|年|岁|以上|以下|以内|之内|左右|到|至|~|"
    r"(?i:chars?|characters|digits?|bytes?|bits?|letters?|times|days?|hours?|minutes?|mins?|"
    r"seconds?|secs?|ms|or\s+more|or\s+less)\b)"
)
_MACHINE_SYMBOL = _Lazy(r"[0-9!@#$%^&*+=?~]|[a-z][A-Z]|[A-Z]{2}[a-z]")
_PROSE_SUFFIX = _Lazy(r"(?:ed|ing|ly|able|ible|ous|ful|less|ive|tion|sion|ment)$")
_CLAUSE_END = _Lazy(r"\s*(?:$|[,.;!?，。；！？)\]）])")


# Code that reads a secret from somewhere is no secret: os.environ[...], os.getenv(...), env(...),
# process.env.X, settings.X, config.apiKey. A call or a subscript on a name, or a dotted name
# on a known holder of settings.
_CODE_REFERENCE = _Lazy(
    r"(?:[A-Za-z_$][\w$]*\.)*[A-Za-z_][\w$]*[\[(]"
    r"|(?:os|process|settings|config|conf|cfg|env|ENV|System|secrets|vars|self|this|app|options|opts|"
    r"args|params|props|import\.meta|window|globalThis|context|ctx|request|req)(?:\.[A-Za-z_$][\w$]*)+"
)


def _machine_made(value: str) -> bool:
    """A digit, a symbol or mixed case: what people pick for passwords and machines for keys."""
    return bool(_MACHINE_SYMBOL.search(value))


def _value_span(text: str, i: int) -> tuple[int, int, str] | None:
    """Where the value starting at ``i`` lies, and its kind: "quoted", "ascii" or "cjk"."""
    if i >= len(text):
        return None
    close = _QUOTES.get(text[i])
    if close is not None:
        end = text.find(close, i + 1, i + 2 + _MAX_QUOTED)
        if end > i + 1 and "\n" not in text[i + 1 : end]:
            return i + 1, end, "quoted"
        return None
    m = _ASCII_VALUE.match(text, i)
    if m:
        return i, m.end(), "ascii"
    # A run of Chinese characters (maybe ending in letters or digits), as a password: "我爱北京天安门".
    # Scanned by hand: a regex class over the CJK block costs milliseconds to compile at import.
    if not _is_cjk(text[i]):
        return None
    end = i + 1
    while end < len(text) and (_is_cjk(text[end]) or (text[end].isascii() and text[end].isalnum())):
        end += 1
    return (i, end, "cjk") if end - i <= _MAX_CJK_VALUE else None


def _is_cjk(c: str) -> bool:
    return "\u4e00" <= c <= "\u9fff"


def _is_placeholder(value: str) -> bool:
    low = value.lower()
    return (
        low in _PLACEHOLDER_VALUES
        or bool(_PLACEHOLDER_SHAPE.fullmatch(value))
        or value.startswith(("$", "<", "{", "%", "[", "/", "~"))
        or REDACTED in value
    )


def _is_secret_value(
    text: str, start: int, end: int, kind: str, strength: str, password_key: bool, delimited: bool
) -> bool:
    """Whether ``text[start:end]`` after a key and a link of ``strength`` is a secret.

    ``strength`` is "strong" (=, ：, 是, 改成), "weak" (is, 用, a verb before the key) or "bare"
    (a space only). ``delimited``: a space, colon or quote set the value off from the link.
    """
    value = text[start:end]
    if len(value) < 3 or _is_placeholder(value):
        return False
    if kind == "quoted":
        return True
    if kind == "cjk":
        # A password in Chinese characters: only after 密码/口令 and set off ("wifi 密码是 我爱
        # 北京天安门"); "密码是明文存的吗" runs on without a break.
        return password_key and delimited and not _ZH_PROSE.search(value)
    bare = value.rstrip(".,;:!?)")
    if (
        _CODE_REFERENCE.fullmatch(bare)
        or bare.lower() in _STOP_WORDS
        or _ACRONYM.fullmatch(bare)
        or _VERSION.fullmatch(bare)
        or _QUANTITY.fullmatch(bare)
        or value.startswith("-")
    ):
        return False
    if _NUMERIC.fullmatch(value) and _UNIT_AFTER.match(text, end):
        return False
    if strength == "strong":
        return True
    if _machine_made(value):
        return strength == "weak" or len(value) >= 4
    # "my wifi password is swordfish." — one lowercase word closing the clause.
    return (
        strength == "weak"
        and password_key
        and bare.isalpha()
        and bare.islower()
        and len(bare) >= 4
        and not _PROSE_SUFFIX.search(bare)
        and bool(_CLAUSE_END.match(text, start + len(bare)))
    )


def _key_is_property(key: str) -> bool:
    parts = re.split(r"[_.-]", key.strip("\"']").lower())
    return len(parts) > 1 and parts[-1] in _PROPERTY_SUFFIX


# Keys whose value is several words: "passphrase 是 my secret phrase 42", "助记词: apple ...".
_PHRASE_KEY = _Lazy(r"(?i)passphrase|mnemonic|seed\s+phrase|recovery\s+phrase|助记词")
_MORE_WORDS = _Lazy(r"(?:[ \t]+[\x21\x23-\x26\x28-\x7e]+){1,24}")


def _phrase_value(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    key = m.group("key")
    if _key_is_property(key):
        return None
    span = _value_span(text, m.end())
    if span is None:
        return None
    start, end, kind = span
    strong_link = m.group("sep") is not None or (m.group("zh") is not None and not m.group("zhweak"))
    if kind == "ascii" and strong_link and _PHRASE_KEY.search(key):
        more = _MORE_WORDS.match(text, end)
        if more and not _is_placeholder(text[start:end]):
            return start, more.end()
    password_key = bool(_PASSWORD_FAMILY.search(key))
    link = m.group(0)[len(key) :]
    delimited = bool(link) and (link[-1].isspace() or link.rstrip()[-1:] in (":", "："))
    if m.group("bare") is not None:
        if kind != "ascii" or not _BARE_FAMILY.fullmatch(key):
            return None
        if not m.group("bare") and not _machine_made(text[start:end]):
            return None
        strength = "bare"
    elif m.group("zh") is not None:
        strength = "weak" if m.group("zhweak") else "strong"
    elif m.group("sep") is not None:
        strength = "strong"
    else:
        strength = "weak"
    if _is_secret_value(text, start, end, kind, strength, password_key, delimited):
        return start, end
    return None


def _set_to_value(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    span = _value_span(text, m.end())
    if span is None:
        return None
    start, end, kind = span
    password_key = bool(_PASSWORD_FAMILY.search(m.group("key")))
    return (start, end) if _is_secret_value(text, start, end, kind, "weak", password_key, True) else None


_DIGIT_OR_SYMBOL = _Lazy(r"[0-9!@#$%^&*+=?~]")
_HAS_LETTER = _Lazy(r"[A-Za-z]")


def _gap_verb_value(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    if _key_is_property(m.group("key")) or _GAP_PROPERTY.search(m.group("gap")):
        return None
    span = _value_span(text, m.end())
    if span is None or span[2] != "ascii":
        return None
    start, end, _ = span
    value = text[start:end]
    if not (_DIGIT_OR_SYMBOL.search(value) and _HAS_LETTER.search(value)) or value.startswith("^"):
        return None
    return (start, end) if _is_secret_value(text, start, end, "ascii", "weak", False, True) else None


_EMAIL = _Lazy(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_SYMBOL = _Lazy(r"[!@#$%^&*+=?~]")


def _made_up(value: str) -> bool:
    """Beyond doubt not a word, a name or a version: letters, digits and a symbol, or both cases
    and digits; what a password rule asks for."""
    bare = value.rstrip(".,;:!?)")
    if len(bare) < 6 or _is_placeholder(bare) or bare.lower() in _STOP_WORDS:
        return False
    if _VERSION.fullmatch(bare) or _CODE_REFERENCE.fullmatch(bare) or _EMAIL.fullmatch(bare) or "/" in bare:
        return False
    has_digit = any(c.isdigit() for c in bare)
    if not has_digit or not _HAS_LETTER.search(bare):
        return False
    mixed_case = any(c.isupper() for c in bare) and any(c.islower() for c in bare)
    return bool(_SYMBOL.search(bare)) or mixed_case


def _far_value(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    if _GAP_PROPERTY.search(m.group("gap")):
        return None
    span = _value_span(text, m.end())
    if span is None or span[2] == "cjk":
        return None
    start, end, _ = span
    value = text[start:end]
    # So far from its key, a value without a symbol is as likely a name ("用 Python3 重写").
    if not _made_up(value) or not (_SYMBOL.search(value) or _looks_random(value)):
        return None
    return start, end


def _value_then_key(m: re.Match[str]) -> str:
    if not _made_up(m.group("value")):
        return m.group(0)
    return REDACTED + m.group(0)[m.end("value") - m.start() :]


def _typed_value(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    span = _value_span(text, m.end())
    if span is None or span[2] != "ascii":
        return None
    start, end, _ = span
    # Only a lone machine-made word ending the clause: "输 python3 manage.py" is a command line.
    if not _machine_made(text[start:end]) or (
        end < len(text) and text[end] == " " and end + 1 < len(text) and text[end + 1].isascii()
    ):
        return None
    return (start, end) if _is_secret_value(text, start, end, "ascii", "weak", False, True) else None


def _account_value(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    span = _value_span(text, m.end())
    if span is None or span[2] == "cjk":
        return None
    start, end, kind = span
    return (start, end) if _is_secret_value(text, start, end, kind, "strong", True, True) else None


def _login_pair_value(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    span = _value_span(text, m.end())
    if span is None or span[2] != "ascii":
        return None
    start, end, _ = span
    value = text[start:end]
    # Paths and file names ("src/pages/login/index.tsx") and host:port are not pairs.
    if "/" in value or re.search(r"\.[A-Za-z]{1,5}$", value):
        return None
    if m.group("pairsep") == ":" and value.isdigit() and len(value) <= 5:
        return None
    # "admin / admin" spaced out is a pair; "home/index" glued is a path unless it looks made up;
    # "Google / GitHub" are names.
    spaced = m.group("pairsep").strip() != m.group("pairsep")
    if not _DIGIT_OR_SYMBOL.search(value) and not value.islower():
        return None
    strength = "strong" if spaced else "weak"
    return (start, end) if _is_secret_value(text, start, end, "ascii", strength, spaced, True) else None


def _sub_values(
    pattern: _Lazy, text: str, value_of: Callable[[str, re.Match[str]], tuple[int, int] | None]
) -> str:
    """Replace, for each match of ``pattern``, the value ``value_of`` finds after it."""
    out: list[str] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() < pos:
            continue
        span = value_of(text, m)
        if span is None:
            continue
        out.append(text[pos : span[0]])
        out.append(REDACTED)
        pos = span[1]
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


# ---- shell commands ------------------------------------------------------------------------

_FLAG_VALUE = r"(?:'(?P<sq>[^'\n]+)'|\"(?P<dq>[^\"\n]+)\"|(?P<bare>[\x21\x23-\x26\x28-\x7e]+))"
# The rest of one command: stops at a pipe, a separator or a line end (bounded, so that a long
# paste of commands stays linear).
_CMD_REST = r"[^\n|;&]{0,200}?\s"
_COMMAND_SECRETS = tuple(
    _Lazy(p)
    for p in (
        # mysql -uroot -pS3cret, mysqldump -p'x': the password is glued to -p.
        r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlsh|mariadb(?:-dump|-admin)?)\b"
        + _CMD_REST
        + r"-p(?=\S)"
        + _FLAG_VALUE,
        r"\bsshpass\s+(?:-[A-Za-z]\S*\s+)*?-p\s*" + _FLAG_VALUE,
        r"\bredis-cli\b" + _CMD_REST + r"(?:-a|--pass)\s+" + _FLAG_VALUE,
        r"\b(?:docker|podman|nerdctl|buildah|skopeo|helm|oras|crane)\s+(?:[\w-]+\s+)?login\b"
        + _CMD_REST
        + r"(?:-p|--password)(?:\s+|=)"
        + _FLAG_VALUE,
        # echo 'pw' | sudo -S ..., the password piped into a command that reads it from stdin.
        r"\becho\s+(?:-\w+\s+)?" + _FLAG_VALUE + r"\s*\|\s*sudo\s+(?:-\w+\s+)*?-\w*S",
        # htpasswd -b[c] file user password
        r"\bhtpasswd\s+(?:-\w+\s+)*?-\w*b\w*\s+(?:-\w+\s+)*\S+\s+\S+\s+" + _FLAG_VALUE,
        # -u user -p pass, as mongo, influx and many admin tools take it.
        r"\s-u\s*\S+\s+-p\s*" + _FLAG_VALUE,
        # --password x, --client-secret x, -storepass x: a flag ending in a credential word.
        r"(?<!\S)--?[A-Za-z0-9-]*?(?i:password|passwd|pass|pwd|secret|token|api-?key|access-?key|"
        r"auth-?key|passphrase)\s+" + _FLAG_VALUE,
    )
)
# curl -u user:pass, http -a user:pass: only the part after the colon.
_HTTP_USER = _Lazy(
    r"\b(?:curl|wget|http|https)\b"
    + _CMD_REST
    + r"(?:-u|--user|-a|--auth|--proxy-user|-U)(?:\s+|=)?['\"]?[^\s:'\"]*:(?P<bare>[^\s'\"]+)"
)
_PORTS = _Lazy(r"\d{1,5}(?::\d{1,5})*(?:/(?:tcp|udp))?")


def _command_value(m: re.Match[str]) -> str:
    groups = m.groupdict()
    name = next(n for n in ("sq", "dq", "bare") if groups.get(n) is not None)
    value = m.group(name)
    if _is_placeholder(value) or value.startswith("-") or _PORTS.fullmatch(value):
        return m.group(0)
    start, end = m.span(name)
    base = m.start()
    return m.group(0)[: start - base] + REDACTED + m.group(0)[end - base :]


# ---- personal numbers ----------------------------------------------------------------------

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
# Mainland resident IDs: 18 characters (area, birth date, sequence, check character) or the 15
# digits of the first generation (area, two-digit year, sequence), written in one run or in groups
# of any length split by single spaces or dashes ("110105-19900307-2475", "1101 0519 9003 0724 75").
# The check character, the date and the province decide; the grouping does not.
_NATIONAL_ID = _Lazy(
    r"(?<![0-9A-Za-z.])[1-9](?:[ -]?\d){13}(?:\d|(?:[ -]?\d){3}[ -]?[\dXx])(?![0-9A-Za-z]|\.\d|[ -]\d)"
)
_ID_PROVINCES = frozenset(
    "11 12 13 14 15 21 22 23 31 32 33 34 35 36 37 41 42 43 44 45 46 50 51 52 53 54 61 62 63 64 65".split()
)
_ID_DATE = _Lazy(r"(?:18|19|20)?\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])")
# Mobile numbers: mainland (1[3-9] and 9 digits, maybe +86 / 0086), Taiwan (09 and 8 digits, maybe
# +886 9...) and Hong Kong (+852, 8 digits), grouped as people write them: 3-4-4, 3-8 or 7-4 split
# by one kind of separator (space, dash or dot), or 4-3-3 for Taiwan.
_MOBILE = _Lazy(
    r"(?<![0-9A-Za-z.+])(?:"
    r"(?:(?:\+|00)86[\s.-]?)?1[3-9]\d(?:([\s.-]?)\d{4}\1\d{4}|[\s.-]\d{8}|\d{4}[\s.-]\d{4})"
    r"|(?:(?:\+|00)886[\s.-]?9|09)\d{2}([\s.-]?)\d{3}\2\d{3}"
    r"|(?:\+|00)852[\s.-]?[4-9]\d{3}[\s.-]?\d{4}"
    r")(?![0-9A-Za-z]|\.\d)"
)
# Card numbers from the major networks' ranges, grouped by 4 (16-19 digits), or as American
# Express (15: 4-6-5) and Diners Club (14: 4-6-4) print them.
_CARD = _Lazy(
    r"(?<![0-9A-Za-z.])(?:"
    r"(?:2[2-7]\d{2}|[3-6]\d{3})(?:[ -]?\d{4}){2,3}(?:[ -]?\d{1,3})?"
    r"|3\d{3}[ -]?\d{6}[ -]?\d{4,5}"
    r")(?![0-9A-Za-z]|\.\d)"
)
# "订单号 13812345678", "#4392268312345672", "构建号 139.2024.1130": a number labelled as an id or a
# version is that.
_ID_LABEL = _Lazy(
    r"(?:订单号?|单号|流水号?|编号|工号|学号|序号|批次号?|运单号?|快递单号|交易号|版本号?|构建号?|"
    r"(?i:order|trace|request|txn|id|no\.?|build|version|ver\.?|v)|#)\s*(?:是|为|[:：=#])?\s*$"
)
# "13800138000 元", "340000000000009 纳秒": an amount or a quantity, not a personal number.
_AMOUNT_AFTER = _Lazy(
    r"\s*(?:元|块|万|亿|纳秒|微秒|毫秒|秒|字节|次|条|行|件|项|(?i:rmb|cny|usd|ns|us|μs|ms|bytes|rows|items)\b)"
)


def _digits(m: re.Match[str]) -> str:
    return "".join(c for c in m.group(0) if c not in " -").upper()


def _quantity_or_label(m: re.Match[str]) -> bool:
    return _labelled_as_id(m.string, m.start()) or bool(_AMOUNT_AFTER.match(m.string, m.end()))


def _national_id(m: re.Match[str]) -> str:
    digits = _digits(m)
    if digits[:2] not in _ID_PROVINCES:
        return m.group(0)
    if len(digits) == 18:
        total = sum(int(d) * w for d, w in zip(digits[:17], _ID_WEIGHTS, strict=True))
        ok = _ID_CHECK[total % 11] == digits[17] and bool(_ID_DATE.fullmatch(digits[6:14]))
    else:
        # No check digit: the date and the province must do, and nothing may say it is something else.
        ok = bool(_ID_DATE.fullmatch(digits[6:12])) and not _quantity_or_label(m)
    return REDACTED if ok else m.group(0)


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _labelled_as_id(text: str, start: int) -> bool:
    return bool(_ID_LABEL.search(text, max(0, start - 12), start))


def _card(m: re.Match[str]) -> str:
    digits = _digits(m)
    if len(digits) == 15:
        network = digits[:2] in ("34", "37")
    elif len(digits) == 14:
        network = digits[:2] in ("30", "36", "38", "39")
    else:
        network = 16 <= len(digits) <= 19
    if not network or not _luhn_ok(digits) or _quantity_or_label(m):
        return m.group(0)
    return REDACTED


def _mobile(m: re.Match[str]) -> str:
    return m.group(0) if _quantity_or_label(m) else REDACTED


# ---- long random strings -------------------------------------------------------------------

_LONG_HEX = _Lazy(r"(?<![0-9A-Za-z])[0-9a-fA-F]{32,}(?![0-9A-Za-z])")
# Commit ids, digests and trace ids quoted as such are not secrets: a word naming one earlier in
# the clause ("git revert 9fceb02...", "md5 值对不上：本地 e10adc...") and no credential word after it.
_HEX_LABEL = _Lazy(
    r"(?i:commit|提交|revert|cherry-pick|checkout|reset|show|rebase|blame|/commit/|/tree/|/blob/|"
    r"digest|checksum|校验和|校验值|哈希|hash|sha-?(?:1|224|256|384|512)|md5|"
    r"(?:trace|span|request)[ _-]?id|etag)"
)
_CLAUSE_BREAK = _Lazy(r"[。；;！？!?\n]")
_CREDENTIAL_WORD = _Lazy(_ZH_KEY + "|" + _SECRET_WORD)
_HEX_LABEL_WINDOW = 40
# Hex of exactly these lengths in one case is what digests and ids are made of (MD5 and dash-less
# UUIDs, SHA-1 commits, SHA-224/256/384/512, container and image ids): unlabelled, with no credential
# word before it, it is taken for one. Secrets of these shapes are nearly always named ("token:",
# "secret 是"), which the phrase rules and the credential check here cover.
_DIGEST_LENGTHS = frozenset({32, 40, 56, 64, 96, 128})
_LONG_B64 = _Lazy(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{40,}={0,2}(?![A-Za-z0-9+/_=-])")
_DIGEST_PREFIX = _Lazy(r"(?i)(?:sha(?:1|256|384|512)|md5)-")
# Random base64 switches character class on most characters; paths and identifiers do not.
_MIN_CLASS_SWITCH_RATIO = 0.4


def _char_class(c: str) -> int:
    if c.isdigit():
        return 0
    if c.isupper():
        return 1
    if c.islower():
        return 2
    return 3


def _looks_random(token: str) -> bool:
    body = token.rstrip("=")
    if not (
        any(c.isdigit() for c in body) and any(c.isupper() for c in body) and any(c.islower() for c in body)
    ):
        return False
    switches = sum(1 for a, b in pairwise(body) if _char_class(a) != _char_class(b))
    return switches >= _MIN_CLASS_SWITCH_RATIO * (len(body) - 1)


def _hex(m: re.Match[str]) -> str:
    clause = _CLAUSE_BREAK.split(m.string[max(0, m.start() - _HEX_LABEL_WINDOW) : m.start()])[-1]
    labels = list(_HEX_LABEL.finditer(clause))
    if labels and not _CREDENTIAL_WORD.search(clause, labels[-1].end()):
        return m.group(0)
    token = m.group(0)
    if (
        len(token) in _DIGEST_LENGTHS
        and (token.islower() or token.isupper() or token.isdigit())
        and not _CREDENTIAL_WORD.search(clause)
    ):
        return token
    return REDACTED


def _b64(m: re.Match[str]) -> str:
    token = m.group(0)
    if _DIGEST_PREFIX.match(token) or not _looks_random(token):
        return token
    return REDACTED


def _dotted_token(m: re.Match[str]) -> str:
    return REDACTED if _looks_random(m.group(0).replace(".", "")) else m.group(0)


_UUID = _Lazy(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_WORD_BREAKS = _Lazy(r"[-_.].*[-_.]")


def _made_up_segment(segment: str) -> bool:
    """A path segment that is a token, not words: random-looking, a UUID, or a long run of letters
    and digits without word breaks ("user-service-v2" and "setup-guide-2024" are words)."""
    if _looks_random(segment) or _UUID.fullmatch(segment):
        return True
    return (
        len(segment) >= 20
        and bool(_HAS_LETTER.search(segment))
        and any(c.isdigit() for c in segment)
        and not _WORD_BREAKS.search(segment)
    )


def _webhook_path(m: re.Match[str]) -> str:
    if not any(_made_up_segment(segment) for segment in m.group(1).split("/")):
        return m.group(0)
    return m.group(0)[: m.start(1) - m.start()] + REDACTED


def _bearer(m: re.Match[str]) -> str:
    value = m.group(3)
    # "Bearer token 怎么传" is prose; a real token is long or has digits.
    if len(value) < 16 and not any(c.isdigit() for c in value):
        return m.group(0)
    return m.group(1) + m.group(2) + REDACTED


# "?access_token=abc&page=2": inside a query string the value ends at "&" or "#".
_KV_QUERY = _Lazy(r"([?&][A-Za-z0-9_.-]*" + _SECRET_WORD + r"[A-Za-z0-9_.-]*=)([^&#\s\"']{3,})")


def _query_value(m: re.Match[str]) -> str:
    value = m.group(2)
    return m.group(0) if _is_placeholder(value) else m.group(1) + REDACTED


# Query parameters that sign or key a URL under a plain name: Azure SAS and signed S3 or GCS URLs
# (sig=, X-Amz-Signature=), webhook keys (key=). Only a made-up value of some length goes.
_SIGNED_QUERY = _Lazy(
    r"([?&](?i:sig|signature|x-amz-signature|x-goog-signature|sign|key|apikey|auth|_auth)=)"
    r"([^&#\s\"']{8,})"
)


def _signed_query_value(m: re.Match[str]) -> str:
    value = m.group(2)
    if _is_placeholder(value) or not (_HAS_LETTER.search(value) and _DIGIT_OR_SYMBOL.search(value)):
        return m.group(0)
    return m.group(1) + REDACTED


# "auth": "base64(user:password)" in a container registry's config.json.
_JSON_AUTH = _Lazy(r"""(?i)(["']auth["']\s*:\s*["'])([A-Za-z0-9+/]{12,}={0,2})(?=["'])""")


def _json_auth(m: re.Match[str]) -> str:
    return m.group(1) + REDACTED if _machine_made(m.group(2)) else m.group(0)


# Words without which no phrase rule can match (every key those rules name contains one): a prompt
# with none of them never compiles or runs them. Compiling every rule costs the first redaction of
# a hook process several milliseconds, and most prompts hold no credential word at all.
_PHRASE_GATE = _Lazy(
    r"(?i:pass|pwd|pw|pin|secret|token|key|credential|cookie|sess|auth|signature|mnemonic|phrase)|AK|SK|"
    r"密码|口令|密钥|秘钥|私钥|金钥|令牌|权杖|授权码|验证码|暗号|助记词"
)
# Fewer digits than this make no ID, card or phone number.
_MIN_NUMBER_DIGITS = 8


def redact(text: str) -> str:
    """Replace secrets with ``[已隐去]``; key names stay so the sentence still reads.

    Each group of rules runs only when the text has what all of them need ("://", "-", "=", a
    credential word, enough digits), so that a plain prompt compiles and runs few of them.
    """
    if "-----BEGIN" in text:
        text = _PEM_BLOCK.sub(REDACTED, text)
    if "://" in text:
        text = _URL_CREDENTIALS.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
        text = _WEBHOOK_PATH.sub(_webhook_path, text)
    if "eyJ" in text:
        text = _JWT.sub(REDACTED, text)
    text = _PROVIDER_KEYS.sub(REDACTED, text)
    if "." in text:
        text = _DOTTED_TOKEN.sub(_dotted_token, text)
    text = _BEARER.sub(_bearer, text)
    if "-" in text:  # every command rule names a flag
        text = _HTTP_USER.sub(_command_value, text)
        for pattern in _COMMAND_SECRETS:
            text = pattern.sub(_command_value, text)
    if "=" in text:
        text = _KV_QUERY.sub(_query_value, text)
        text = _SIGNED_QUERY.sub(_signed_query_value, text)
    if ":" in text:
        text = _JSON_AUTH.sub(_json_auth, text)
    phrases = bool(_PHRASE_GATE.search(text))
    if phrases:
        text = _sub_values(_ACCOUNT_PAIR, text, _account_value)
        text = _sub_values(_EN_SET_TO, text, _set_to_value)
        text = _sub_values(_KEY_AND_LINK, text, _phrase_value)
        text = _sub_values(_KEY_GAP_VERB, text, _gap_verb_value)
        text = _sub_values(_KEY_THEN_NEW, text, _gap_verb_value)
    text = _sub_values(_PROMPT_THEN_TYPE, text, _typed_value)
    if "/" in text or ":" in text:
        text = _sub_values(_LOGIN_PAIR, text, _login_pair_value)
    if phrases:
        text = _sub_values(_KEY_FAR_LINK, text, _far_value)
        text = _VALUE_THEN_KEY.sub(_value_then_key, text)
    if "@" in text:
        text = _USER_PASS_AT_HOST.sub(_pw_group, text)
    if "/" in text:
        text = _MADE_UP_PAIR.sub(_pw_group, text)
    if sum(c.isdigit() for c in text) >= _MIN_NUMBER_DIGITS:
        text = _NATIONAL_ID.sub(_national_id, text)
        text = _CARD.sub(_card, text)
        text = _MOBILE.sub(_mobile, text)
    text = _LONG_HEX.sub(_hex, text)
    return _LONG_B64.sub(_b64, text)
