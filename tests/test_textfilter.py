"""Table-driven tests of the input filter and redaction (memself.text.input_filter).

Every secret below is made up for these tests (random characters in the provider's shape, or the
provider's own documented example values); none is real.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memself.text import input_filter as tf
from memself.text.input_filter import (
    CONFIRM_MARKER,
    NOTICE_HEADER,
    FilterResult,
    classify_input,
    prepare_for_judge,
)
from memself.text.redact import REDACTED, redact

REPO_ROOT = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------------------------
# Not the user's own words -> skipped, with the reason
# --------------------------------------------------------------------------------------------

SKIPPED = [
    # The plugin's own continuations and notices.
    (
        "confirm-block",
        f"{CONFIRM_MARKER}\n本轮已结束，有 1 条记忆待确认。请调用 AskUserQuestion……",
        "plugin-continuation",
    ),
    (
        "confirm-block-inside-stop-hook",
        f"Stop hook: 建议新增记忆「回答用中文」。\n\n{CONFIRM_MARKER}\n第 1 条\nsessionID：abc",
        "plugin-continuation",
    ),
    (
        "notice-header",
        f'{NOTICE_HEADER}\n结果：\n记忆插件memory-self-evolution新增了一条记忆："回答用中文"。',
        "plugin-notice",
    ),
    ("notice-header-leading-space", f"  \n{NOTICE_HEADER}\n结果：……", "plugin-notice"),
    # CodeBuddy.
    (
        "question-answer",
        "<question_answer>\n落成，使用推荐标签 rule「回答用中文」\n</question_answer>",
        "question-answer",
    ),
    (
        "question-answer-after-text",
        "我的选择如下 <question_answer>不落成</question_answer>",
        "question-answer",
    ),
    ("stop-hook-payload", "Stop hook: MARKER-STOP show popup", "stop-hook"),
    ("stop-hook-chinese", "Stop hook: 建议新增记忆「改完不要自动 commit」。", "stop-hook"),
    ("stop-hook-feedback", "Stop hook feedback: 插件已直接写入记忆。", "stop-hook"),
    # Slash commands.
    ("slash-compact", "/compact", "slash-command"),
    ("slash-with-args", "/review 1234 重点看并发", "slash-command"),
    ("slash-plugin-namespaced", "/memself:status", "slash-command"),
    ("slash-dash-and-newline", "/pr-comments\n看一下", "slash-command"),
    ("slash-leading-whitespace", "   /init", "slash-command"),
    # Client-injected tags at the start.
    (
        "task-notification",
        "<task-notification>\n<task-id>b7x2</task-id>\n<status>completed</status>"
        '\n<summary>Agent "Explore" completed</summary>\n</task-notification>',
        "leading-tag",
    ),
    (
        "system-reminder-after-blank",
        "\n\n  <system-reminder>\nPlan mode is active.\n</system-reminder>",
        "leading-tag",
    ),
    (
        "command-name",
        "<command-name>/review</command-name>\n<command-message>review</command-message>"
        "\n<command-args>42</command-args>",
        "leading-tag",
    ),
    (
        "local-command-stdout",
        "<local-command-stdout>Compacted (ctrl+o to see full summary)</local-command-stdout>",
        "leading-tag",
    ),
    (
        "tag-with-attributes",
        '<system-reminder data-role="hook">记忆由插件在后台判断。</system-reminder>',
        "leading-tag",
    ),
    (
        "unknown-lowercase-tag",
        "<pr-instructions>\nCreate a pull request for the current branch. "
        "Follow the repository template…\n</pr-instructions>",
        "leading-tag",
    ),
    # Empty and short.
    ("empty", "", "empty"),
    ("whitespace-only", " \n\t\u3000 ", "empty"),
    ("five-chars", "回答用中文", "too-short"),
    ("ok", "好的", "too-short"),
    ("short-after-collapse", "  好的 \n 继续  ", "too-short"),
    ("only-code", "```python\nprint('hello')\n```", "too-short"),
    ("only-log", "2026-11-30 08:48:06,123 ERROR [main] Application run failed", "too-short"),
    # Too long after cleaning: a pasted document, not a request.
    (
        "long-prose-paste",
        "需求背景：" + "支付页需要支持分期付款，并在灰度期间只对白名单用户开放。" * 20,
        "too-long-paste",
    ),
    ("long-english-paste", "Create a pull request. " * 30, "too-long-paste"),
]


@pytest.mark.parametrize(("text", "reason"), [c[1:] for c in SKIPPED], ids=[c[0] for c in SKIPPED])
def test_skipped_inputs(text: str, reason: str) -> None:
    result = classify_input(text)
    assert result == FilterResult(recall_text="", skip_reason=reason)
    assert result.skipped
    assert prepare_for_judge(text) == ""


# --------------------------------------------------------------------------------------------
# The user's own words -> kept, cleaned of code and logs, whitespace collapsed
# --------------------------------------------------------------------------------------------

GO_HANDLER = """func (s *Server) Handle(w http.ResponseWriter, r *http.Request) {
\tif err := s.db.Ping(); err != nil {
\t\thttp.Error(w, err.Error(), 500)
\t\treturn
\t}
}"""

KEPT = [
    # Ordinary prose survives untouched (apart from whitespace).
    ("rule-chinese", "以后回答都用中文，代码注释也用中文", "以后回答都用中文，代码注释也用中文"),
    ("project-fact-identifier", "记住：支付页灰度开关是 pay_new_flow", "记住：支付页灰度开关是 pay_new_flow"),
    ("six-chars", "不要自动提交", "不要自动提交"),
    (
        "english",
        "Please refactor the payment module and keep the pay_new_flow switch",
        "Please refactor the payment module and keep the pay_new_flow switch",
    ),
    ("inline-code", "把 `fetchUser` 改成带重试的，最多三次", "把 `fetchUser` 改成带重试的，最多三次"),
    (
        "numbered-list",
        "需求：\n1. 登录页加验证码\n2. 密码错误三次锁定\n3. 记住我功能保留 7 天",
        "需求： 1. 登录页加验证码 2. 密码错误三次锁定 3. 记住我功能保留 7 天",
    ),
    (
        "rules-list",
        "1. 不要自动 commit\n2. 改完先跑测试\n3. 提交信息用中文",
        "1. 不要自动 commit 2. 改完先跑测试 3. 提交信息用中文",
    ),
    (
        "git-command-in-prose",
        "先 git pull --rebase 再 push，别用 merge",
        "先 git pull --rebase 再 push，别用 merge",
    ),
    (
        "level-word-in-prose",
        "线上一直报 ERROR 但是不知道原因，帮我排查",
        "线上一直报 ERROR 但是不知道原因，帮我排查",
    ),
    (
        "time-in-prose",
        "2026-11-30 10:00 上线的版本有问题，回滚一下",
        "2026-11-30 10:00 上线的版本有问题，回滚一下",
    ),
    ("keyword-word-in-prose", "import 的顺序按 isort 规范来", "import 的顺序按 isort 规范来"),
    (
        "exception-name-in-prose",
        "遇到 NullPointerException 时先查登录态",
        "遇到 NullPointerException 时先查登录态",
    ),
    # Paths and lookalikes of commands and tags are the user's words.
    (
        "path-not-slash-command",
        "/usr/local/bin 下的脚本报错了，帮我看看权限",
        "/usr/local/bin 下的脚本报错了，帮我看看权限",
    ),
    ("root-dir-not-slash-command", "/tmp 目录满了，清理一下日志", "/tmp 目录满了，清理一下日志"),
    ("slash-glued-to-chinese", "/compact一下上下文再继续", "/compact一下上下文再继续"),
    ("comment-slashes", "// TODO 这里的超时时间改成可配置", "// TODO 这里的超时时间改成可配置"),
    ("html-tag-question", "<div> 里面的内容为什么不能垂直居中", "<div> 里面的内容为什么不能垂直居中"),
    ("generic-angle", "<T> 泛型参数在 TypeScript 里怎么约束", "<T> 泛型参数在 TypeScript 里怎么约束"),
    ("less-than", "< 5 的时候直接返回空数组", "< 5 的时候直接返回空数组"),
    (
        "stop-hook-in-middle",
        "CodeBuddy 的 Stop hook: 续轮会再触发一次提交吗",
        "CodeBuddy 的 Stop hook: 续轮会再触发一次提交吗",
    ),
    (
        "header-not-at-start",
        "为什么会弹出 memory-self-evolution 捕捉到了新的记忆：这个提示",
        "为什么会弹出 memory-self-evolution 捕捉到了新的记忆：这个提示",
    ),
    # Fenced code blocks.
    (
        "fenced-go",
        f"下单接口偶尔超时，帮我看看这段代码\n```go\n{GO_HANDLER}\n```\n是不是连接池配置的问题",
        "下单接口偶尔超时，帮我看看这段代码 是不是连接池配置的问题",
    ),
    (
        "fenced-tilde",
        "~~~python\nprint('x')\nraise SystemExit(1)\n~~~\n退出码要用常量，不要写死数字",
        "退出码要用常量，不要写死数字",
    ),
    (
        "fence-mid-line",
        "看下这段 ```python\nimport os\nprint(os.getcwd())\n``` 为什么输出不对",
        "看下这段 为什么输出不对",
    ),
    (
        "fence-unclosed",
        "没闭合的代码块也要去掉\n```js\nconst a = 1;\nconsole.log(a)\n",
        "没闭合的代码块也要去掉",
    ),
    ("fence-one-line", "行内 ```x = 1``` 也算代码块吗，这个要处理", "行内 也算代码块吗，这个要处理"),
    ("fence-word-in-prose", "用 ~~~ 围起来的代码也要去掉", "用 ~~~ 围起来的代码也要去掉"),
    (
        "fence-with-chinese-inside",
        "```\n// 计算总价\ntotal := sum(items)\n```\n总价要按分存整数",
        "总价要按分存整数",
    ),
    # Runs of unfenced code.
    ("go-run", f"这段为什么会 panic\n{GO_HANDLER}\n连接池是 20", "这段为什么会 panic 连接池是 20"),
    (
        "python-run-with-chinese-comment",
        "def load(path):\n    # 先校验参数\n    with open(path) as f:\n        data = json.load(f)\n"
        '    return data["items"]\n这个函数读大文件很慢怎么优化',
        "这个函数读大文件很慢怎么优化",
    ),
    (
        "ts-run-with-chinese-string",
        "export async function fetchUser(id: string): Promise<User> {\n"
        '  const res = await fetch(`/api/users/${id}`);\n  if (!res.ok) throw new Error("请求失败");\n'
        "  return res.json();\n}\nfetch 失败时要重试三次",
        "fetch 失败时要重试三次",
    ),
    (
        "java-run",
        '@Override\npublic void run() {\n    log.info("开始同步");\n    sync();\n}\n同步任务不要在主线程跑',
        "同步任务不要在主线程跑",
    ),
    (
        "sql-run",
        "SELECT o.id, o.amount\nFROM orders o\nLEFT JOIN users u ON u.id = o.user_id\n"
        "WHERE o.status = 'paid'\nORDER BY o.created_at DESC;\n这个查询很慢，加什么索引",
        "这个查询很慢，加什么索引",
    ),
    (
        "json-run",
        '{\n  "name": "web",\n  "version": "1.0.0",\n  "scripts": {"build": "vite"}\n}'
        "\npackage.json 里的 build 脚本要加 typecheck",
        "package.json 里的 build 脚本要加 typecheck",
    ),
    (
        "yaml-run",
        "server:\n  port: 8080\n  host: 0.0.0.0\n  tls:\n    enabled: true\n配置里端口改成 9090",
        "配置里端口改成 9090",
    ),
    ("html-run", '<div class="a">\n  <span>你好</span>\n</div>\n为什么 span 不居中', "为什么 span 不居中"),
    (
        "code-with-blank-lines",
        "import os\n\nimport sys\n\n\ndef main():\n    pass\n以后脚本入口都叫 main",
        "以后脚本入口都叫 main",
    ),
    ("two-code-lines-kept", "改成\nx = load()\ny = parse(x)\n可以吗", "改成 x = load() y = parse(x) 可以吗"),
    # Logs and stack traces.
    (
        "python-traceback",
        "跑测试的时候报错了：\nTraceback (most recent call last):\n"
        '  File "/app/svc/order.py", line 42, in create\n    total = compute(items)\n'
        '  File "/app/svc/price.py", line 7, in compute\n'
        "    return sum(i.price for i in items) / len(items)\n"
        "           ~~~~~~~~~~~~~~~~~~~~~~~~~~~~^~~~~~~~~~~\n"
        "ZeroDivisionError: division by zero\n空购物车应该返回 0",
        "跑测试的时候报错了： 空购物车应该返回 0",
    ),
    (
        "java-log-and-trace",
        "线上一直报错，日志如下\n"
        "2026-11-30 08:48:06.123 ERROR [http-nio-8080-exec-3] c.e.order.OrderService - 下单失败 id=123\n"
        "2026-11-30 08:48:06.125 WARN  [http-nio-8080-exec-3] c.e.order.Retry - retry 1/3\n"
        'java.lang.NullPointerException: Cannot invoke "User.getId()" because "user" is null\n'
        "\tat com.example.order.OrderService.create(OrderService.java:88)\n"
        "\tat com.example.order.OrderController.post(OrderController.java:41)\n"
        "Caused by: java.lang.IllegalStateException: session expired\n"
        "\tat com.example.auth.Session.get(Session.java:19)\n\t... 23 more\n看起来是 user 没登录",
        "线上一直报错，日志如下 看起来是 user 没登录",
    ),
    (
        "node-trace",
        "TypeError: Cannot read properties of undefined (reading 'map')\n"
        "    at UserList (webpack-internal:///./src/components/UserList.tsx:12:23)\n"
        "    at renderWithHooks (/app/node_modules/react-dom/cjs/react-dom.development.js:16305:18)\n"
        "    at async Promise.all (index 0)\n    at /app/server.js:7:3\n列表为空时不要渲染",
        "列表为空时不要渲染",
    ),
    (
        "go-panic",
        "panic: runtime error: invalid memory address or nil pointer dereference\n"
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a2b3c]\n\n"
        "goroutine 1 [running]:\nmain.(*Server).Handle(0x0, {0x5c1e20, 0xc0000a4000})\n"
        "\t/home/dev/project/server.go:42 +0x1d\nmain.main()\n\t/home/dev/project/main.go:12 +0x25\n"
        "exit status 2\nserver 没初始化就用了",
        "server 没初始化就用了",
    ),
    (
        "rust-compiler",
        "error[E0382]: borrow of moved value: `v`\n --> src/main.rs:4:20\n  |\n"
        "2 |     let v = vec![1, 2, 3];\n  |         - move occurs because `v` has type `Vec<i32>`\n"
        '4 |     println!("{:?}", v);\n  |                    ^ value borrowed here after move\n'
        "rust 的所有权规则我总是搞混，解释一下",
        "rust 的所有权规则我总是搞混，解释一下",
    ),
    (
        "python-logging",
        "ERROR:root:connection refused\nWARNING:urllib3.connectionpool:Retrying\n重试逻辑要加指数退避",
        "重试逻辑要加指数退避",
    ),
    (
        "logfmt",
        'time="2026-11-30T08:48:06Z" level=error msg="dial tcp 10.0.0.3:6379: refused"\n'
        "redis 连不上，检查一下",
        "redis 连不上，检查一下",
    ),
    (
        "json-log",
        '{"level":"error","ts":1764492486.1,"msg":"upstream timeout"}\n支付接口超时了',
        "支付接口超时了",
    ),
    (
        "nginx-access",
        '10.0.0.1 - - [30/Nov/2026:08:48:06 +0000] "GET /api/pay HTTP/1.1" 502 157\nnginx 一直返回 502',
        "nginx 一直返回 502",
    ),
    (
        "syslog",
        "Nov 30 08:48:06 web01 kernel: Out of memory: Killed process 1234 (java)\n机器内存不够了吗",
        "机器内存不够了吗",
    ),
    (
        "bracket-level",
        "[ERROR] Failed to execute goal on project order-service\n[INFO] BUILD FAILURE\nmaven 构建失败了",
        "maven 构建失败了",
    ),
    (
        "glog",
        "E1130 08:48:06.123456    1234 controller.go:114] sync failed\n控制器同步失败",
        "控制器同步失败",
    ),
    (
        "npm-err",
        "npm ERR! code ELIFECYCLE\nnpm ERR! errno 1\n构建失败了，node 版本是 18",
        "构建失败了，node 版本是 18",
    ),
    (
        "docker-compose",
        "web-1  | 2026-11-30 08:48:06 ERROR boom\nweb-1  | retrying\ncompose 起不来",
        "compose 起不来",
    ),
    (
        "chinese-log-message",
        "2026-11-30 08:48:06 INFO 订单 123 支付成功\n这条日志要降到 DEBUG",
        "这条日志要降到 DEBUG",
    ),
    # Client blocks that trail the user's words, and Windows line endings.
    (
        "embedded-system-reminder",
        "接口名叫 createOrder，不要改\n<system-reminder>hook context</system-reminder>",
        "接口名叫 createOrder，不要改",
    ),
    ("crlf", "第一行说明\r\n第二行说明", "第一行说明 第二行说明"),
    ("bom", "\ufeff以后都用 pnpm 安装依赖", "以后都用 pnpm 安装依赖"),
    ("exactly-500", "长" * 500, "长" * 500),
    (
        "long-paste-mostly-code",
        "这个服务启动慢\n```python\n" + "x = compute(1)\n" * 200 + "```",
        "这个服务启动慢",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in KEPT], ids=[c[0] for c in KEPT])
def test_kept_inputs(text: str, expected: str) -> None:
    result = classify_input(text)
    assert result == FilterResult(recall_text=expected, skip_reason="")
    assert not result.skipped


def test_length_bounds_count_characters_after_collapsing() -> None:
    assert classify_input("长" * 501).skip_reason == "too-long-paste"
    # 500 characters of prose spread over many lines with wide gaps still fit.
    assert classify_input("\n\n".join(["长" * 49] * 10)).recall_text == " ".join(["长" * 49] * 10)
    assert classify_input("\n\n".join(["长" * 50] * 10)).skip_reason == "too-long-paste"  # 509
    assert classify_input("a b c").skip_reason == "too-short"  # 5 after collapsing
    assert classify_input("a  b   c\n\nd").recall_text == "a b c d"  # 7


# --------------------------------------------------------------------------------------------
# Redaction
# --------------------------------------------------------------------------------------------

R = REDACTED
FAKE_OPENAI = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f"
FAKE_ANTHROPIC = "sk-ant-api03-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HgFeDcBa-AbCdEfGh"
FAKE_DEEPSEEK = "sk-4f9a8c1e2b3d4e5f6a7b8c9d0e1f2a3b"
FAKE_GHP = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
FAKE_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
FAKE_PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDxq9ZfakeFAKEfakeFAKEfakeFAKEfakeFAKEfakeFAKE0\n"
    "-----END OPENSSH PRIVATE KEY-----"
)

REDACTIONS = [
    ("openai-env", f"OPENAI_API_KEY={FAKE_OPENAI}", f"OPENAI_API_KEY={R}"),
    ("anthropic-key", f"用这个 key：{FAKE_ANTHROPIC} 调试", f"用这个 key：{R} 调试"),
    ("deepseek-key", f"deepseek 的 key 是 {FAKE_DEEPSEEK}", f"deepseek 的 key 是 {R}"),
    ("github-pat-classic", f"git remote 用 {FAKE_GHP} 推送", f"git remote 用 {R} 推送"),
    ("github-oauth", "gho_Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa98 过期了", f"{R} 过期了"),
    (
        "github-pat-fine",
        "token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV12",
        f"token {R}",
    ),
    ("aws-access-key", "AKIAIOSFODNN7EXAMPLE 是测试账号的", f"{R} 是测试账号的"),
    ("aws-secret-bare", "secret 是 wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", f"secret 是 {R}"),
    ("slack-bot", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx 发到群里", f"{R} 发到群里"),
    ("gitlab", "CI 里用 glpat-Ab12Cd34Ef56Gh78Ij90Kl", f"CI 里用 {R}"),
    ("google-api", "地图 key AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", f"地图 key {R}"),
    ("huggingface", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 下载模型", f"{R} 下载模型"),
    ("stripe", "sk_test_4eC39HqLyjWDarjtT1zdp7dc 只在测试环境", f"{R} 只在测试环境"),
    ("bearer-jwt", f"curl -H 'Authorization: Bearer {FAKE_JWT}'", f"curl -H 'Authorization: Bearer {R}'"),
    ("bearer-opaque", "Authorization: Bearer 9f8e7d6c5b4a3928", f"Authorization: Bearer {R}"),
    ("basic-auth", "Authorization: Basic YWRtaW46aHVudGVyMg==", f"Authorization: Basic {R}"),
    ("jwt-bare", f"这个 jwt {FAKE_JWT} 解出来 sub 不对", f"这个 jwt {R} 解出来 sub 不对"),
    ("env-password", "数据库 DB_PASSWORD=Tr0ub4dor&3 别提交", f"数据库 DB_PASSWORD={R} 别提交"),
    ("json-password", '{"password": "hunter2", "user": "admin"}', f'{{"password": "{R}", "user": "admin"}}'),
    ("yaml-secret", "client_secret: 8Kq2mZx7Lp", f"client_secret: {R}"),
    ("fullwidth-colon", "access_token：abc123def456", f"access_token：{R}"),
    (
        "query-token",
        "回调地址 https://api.example.com/cb?access_token=abc123XYZ&page=2",
        f"回调地址 https://api.example.com/cb?access_token={R}&page=2",
    ),
    ("token-shi", "token 是 abc123def456", f"token 是 {R}"),
    ("chinese-password-shi", "redis 密码是 r3d1s-Pa55 记一下", f"redis 密码是 {R} 记一下"),
    ("chinese-password-colon", "测试库密码：123456", f"测试库密码：{R}"),
    ("chinese-koling-bare", "测试环境口令 Zx9!kq27", f"测试环境口令 {R}"),
    ("chinese-key-wei", "签名密钥为 s3cr3tKey", f"签名密钥为 {R}"),
    (
        "url-credentials",
        "postgres://admin:S3cr3t!pw@db.internal:5432/app",
        f"postgres://admin:{R}@db.internal:5432/app",
    ),
    (
        "url-credentials-https",
        "git clone https://deploy:tok3nValue@git.example.com/team/app.git",
        f"git clone https://deploy:{R}@git.example.com/team/app.git",
    ),
    ("pem-block", f"{FAKE_PEM}\n这个是跳板机的", f"{R}\n这个是跳板机的"),
    ("pem-collapsed", " ".join(FAKE_PEM.split()) + " 这个是跳板机的", f"{R} 这个是跳板机的"),
    ("pem-truncated", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1fakefake", R),
    # Hex of no digest length, or after a credential word, is a secret; a digest-shaped one alone is not.
    ("long-hex", "它给的是 9fceb02d0ae598e95dc970b74767f19372d61af8a1b2c3d4", f"它给的是 {R}"),
    (
        "hex-40-after-key",
        "旧的 github token 9fceb02d0ae598e95dc970b74767f19372d61af8",
        f"旧的 github token {R}",
    ),
    ("hex-32", "app secret 3f2a9c8e7d6b5a4f3e2d1c0b9a8f7e6d", f"app secret {R}"),
    ("long-base64", "dGhpcyBpcyBhIHNlY3JldCBrZXkgd2l0aCAxMjM0NTY3ODkwIGRpZ2l0cw==", R),
    # Credential phrases: the key and the link stay, only the value goes.
    ("zh-jiushi", "测试服务器的密码就是 Hunter2024!", f"测试服务器的密码就是 {R}"),
    ("zh-gaicheng-le", "数据库密码改成了 Tr0ub4dor3", f"数据库密码改成了 {R}"),
    ("zh-gap-verb", "跳板机 root 密码我改成 Jump#Host9 了", f"跳板机 root 密码我改成 {R} 了"),
    ("zh-glued", "ssh用户名ubuntu 密码Ubuntu@123", f"ssh用户名ubuntu 密码{R}"),
    ("zh-aside", "smtp 密码（授权码）：xyzwabcdqrstuvmn", f"smtp 密码（授权码）：{R}"),
    ("zh-chinese-chars", "wifi 密码是 我爱北京天安门", f"wifi 密码是 {R}"),
    ("zh-quoted", "密码是“芝麻开门123”，别发群里", f"密码是“{R}”，别发群里"),
    ("pin", "银行卡 PIN 是 4821", f"银行卡 PIN 是 {R}"),
    ("account-pair", "账号 root 密码 toor", f"账号 root 密码 {R}"),
    ("login-pair", "登录用 admin / P@ssw0rd123", f"登录用 admin / {R}"),
    ("en-is", "the staging db password is Tr0ub4dor&3", f"the staging db password is {R}"),
    ("en-changed-to", "the bot token was changed to tkn_4c9e1f2a8b", f"the bot token was changed to {R}"),
    ("en-plain-word", "my wifi password is swordfish.", f"my wifi password is {R}"),
    ("mysql-glued", "mysql -uroot -pS3cretPw0rd", f"mysql -uroot -p{R}"),
    ("mysqldump-quoted", "mysqldump -u root -p'Qw3rty!@#' shop", f"mysqldump -u root -p'{R}' shop"),
    ("flag-space", "mongo --username admin --password M0ngoPass!", f"mongo --username admin --password {R}"),
    ("sshpass", "sshpass -p 'Ssh!2024pw' ssh root@10.0.0.9", f"sshpass -p '{R}' ssh root@10.0.0.9"),
    (
        "curl-user",
        "curl -u admin:Adm1nPass https://api.internal/",
        f"curl -u admin:{R} https://api.internal/",
    ),
    ("export", "export PGPASSWORD=Xy9#kLm2", f"export PGPASSWORD={R}"),
    ("env-short-key", "REDIS_PASS=redis123", f"REDIS_PASS={R}"),
    (
        "url-at-in-password",
        "mongodb://root:p@ss@w0rd@mongo:27017/admin",
        f"mongodb://root:{R}@mongo:27017/admin",
    ),
    ("url-empty-user", "redis://:R3disPass@10.0.0.3:6379/0", f"redis://:{R}@10.0.0.3:6379/0"),
    # Personal numbers.
    ("national-id", "身份证 11010519491231002X 已绑定", f"身份证 {R} 已绑定"),
    ("mobile", "手机号 13812345678 收不到验证码", f"手机号 {R} 收不到验证码"),
    ("mobile-plus86-spaced", "我的手机号是 +86 139 1234 5678", f"我的手机号是 {R}"),
    ("bank-card-grouped", "卡号 6217 0000 1234 5670", f"卡号 {R}"),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in REDACTIONS], ids=[c[0] for c in REDACTIONS])
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


SURVIVES_REDACTION = [
    ("chinese-prose", "以后回答都用中文，改完不要自动 commit"),
    ("identifiers", "pay_new_flow ImageLoader fmt.Errorf 都别改"),
    ("short-sha-7", "commit 9fceb02 修复了这个问题"),
    ("short-sha-12", "回滚到 9fceb02d0ae5 之前"),
    ("uuid-session", "session id 4f4a05f6-f38f-4388-8b49-d5dd0c5cde67 的日志"),
    ("file-path", "文件在 /usr/local/lib/python3.11/site-packages/sentence_transformers/models.py"),
    ("java-path", "src/main/java/com/example/order/service/impl/OrderServiceImpl2024Factory.java"),
    ("password-prose", "密码错误怎么办，要不要锁定账号"),
    ("password-algorithm", "密码 bcrypt 加密存储，不要用 md5"),
    ("password-length-rule", "密码是 6 位数字"),
    ("token-format", "令牌是 JWT 格式，过期时间 2 小时"),
    ("password-md5", "密码是 MD5 加密的，要迁移"),
    ("max-tokens", "max_tokens=4096 就够了"),
    ("tokenizer", "tokenizer=jieba 分词"),
    ("bearer-prose", "Bearer token 怎么传给网关"),
    ("token-empty", "token 为空时报错 401"),
    ("env-placeholder", "DB_PASSWORD=${DB_PASSWORD} 从环境变量读"),
    ("placeholder-value", "password: string 字段要加校验"),
    ("pwd-path", "pwd: /home/dev/project"),
    ("sk-css-class", "sk-button-primary-large-hover-state 样式不要改"),
    ("kebab-with-sk", "risk-management-service-v2 是风控服务"),
    ("http-url", "文档在 https://docs.example.com:8443/guide/install 这里"),
    ("email", "有问题发邮件到 dev-team@example.com"),
    ("ip-port", "redis 在 10.0.0.3:6379"),
    ("version", "升级到 2.1.332 之后 hook 不生效"),
    ("camel-long", "AbstractSingletonProxyFactoryBeanConfigurationBuilder 太长了"),
    ("short-hex-color", "主题色用 #1f6feb"),
    ("password-rule", "密码至少 8 位，必须包含大小写字母和数字"),
    ("password-storage", "密码是用 bcrypt 存的，别改成 md5"),
    ("password-plaintext-question", "密码是明文存的吗？"),
    ("password-en-hashed", "the password is hashed with argon2id before saving"),
    ("pin-length", "PIN 是 6 位数字"),
    ("password-property-key", "PASSWORD_MIN_LENGTH=12"),
    ("mysql-prompt", "mysql -u root -p 然后手动输入密码"),
    ("password-stdin", "用 --password-stdin 代替 -p"),
    ("docker-ports", "docker run -p 8080:80 -u 1000:1000 nginx:1.25"),
    ("compose-project", "docker compose -p myproj up -d"),
    ("login-oauth", "登录用 OAuth / SSO 两种方式都要支持"),
    ("login-path", "登录页面在 src/pages/login/index.tsx"),
    ("id-bad-checksum", "流水号 420106198507123457 对应的记录丢了"),
    ("card-luhn-invalid", "卡号字段示例 6217 0000 1234 5671"),
    ("phone-labelled-order", "订单号 13812345678 查不到"),
    ("timestamps", "时间戳 1718700000 和 1718700000123 对不上"),
    ("snowflake-id", "雪花 id 1541815603606036480 查不到"),
    ("docker-digest", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("commit-full-sha", "git revert 9fceb02d0ae598e95dc970b74767f19372d61af8 之后就好了"),
    ("md5-quoted", "md5 值对不上：本地 e10adc3949ba59abbe56e057f20f883e 服务器不同"),
    ("sha-unlabelled", "完整 sha 是 9fceb02d0ae598e95dc970b74767f19372d61af8"),
    ("container-id", "容器 3f4e8a2b1c9d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f 起不来"),
    ("env-reference", "os.environ['API_KEY'] 和 API_KEY=os.environ['API_KEY'] 都读不到"),
]


@pytest.mark.parametrize("text", [c[1] for c in SURVIVES_REDACTION], ids=[c[0] for c in SURVIVES_REDACTION])
def test_redact_leaves_ordinary_text(text: str) -> None:
    assert redact(text) == text


# --------------------------------------------------------------------------------------------
# prepare_for_judge: classify, redact, 6..500
# --------------------------------------------------------------------------------------------

JUDGE = [
    ("plain-rule", "以后回答都用中文", "以后回答都用中文"),
    ("key-hidden", f"记住：测试环境的 OPENAI_API_KEY={FAKE_OPENAI}", f"记住：测试环境的 OPENAI_API_KEY={R}"),
    (
        "code-and-key",
        f'这段代码里的 key 别提交\n```python\nclient = OpenAI(api_key="{FAKE_OPENAI}")\n```',
        "这段代码里的 key 别提交",
    ),
    ("pem-multiline", f"跳板机私钥如下\n{FAKE_PEM}\n以后用这个登录", f"跳板机私钥如下 {R} 以后用这个登录"),
    # "[已隐去]" alone is 5 characters: below the floor, nothing is sent.
    ("only-secret-left", f"  {FAKE_GHP}  ", ""),
    ("skipped-stays-empty", "/review 123", ""),
    ("notice-stays-empty", f"{NOTICE_HEADER}\n结果：新增了一条记忆", ""),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in JUDGE], ids=[c[0] for c in JUDGE])
def test_prepare_for_judge(text: str, expected: str) -> None:
    assert prepare_for_judge(text) == expected


def test_prepare_for_judge_needs_six_chars_after_redaction() -> None:
    # "[已隐去]" itself is 5 characters: a lone password value is not worth a request.
    assert prepare_for_judge("密码：hunter2") == f"密码：{R}"
    assert prepare_for_judge("a=b c") == ""


@pytest.mark.parametrize(
    "secret",
    [FAKE_OPENAI, FAKE_ANTHROPIC, FAKE_DEEPSEEK, FAKE_GHP, FAKE_JWT, "Tr0ub4dor&3", "S3cr3t!pw"],
)
def test_no_secret_reaches_the_judge(secret: str) -> None:
    text = (
        f"把这些记下来：key {FAKE_OPENAI}，anthropic {FAKE_ANTHROPIC}，ds {FAKE_DEEPSEEK}，"
        f"gh {FAKE_GHP}，jwt {FAKE_JWT}，DB_PASSWORD=Tr0ub4dor&3，"
        f"dsn mysql://root:S3cr3t!pw@10.0.0.5/app"
    )
    sent = prepare_for_judge(text)
    assert sent.startswith("把这些记下来")
    assert secret not in sent
    assert sent.count(R) == 7


# --------------------------------------------------------------------------------------------
# Module contract
# --------------------------------------------------------------------------------------------


def test_constants() -> None:
    assert tf.NOTICE_HEADER == "memory-self-evolution 捕捉到了新的记忆："
    assert tf.CONFIRM_MARKER == "MEMORY_CONFIRM_V1"
    assert REDACTED == "[已隐去]"
    assert (tf.MIN_CHARS, tf.MAX_CHARS) == (6, 500)


def test_filter_result_is_frozen() -> None:
    result = classify_input("以后回答都用中文")
    with pytest.raises(AttributeError):
        result.recall_text = "x"  # type: ignore[misc]


def test_every_skip_reason_is_exercised() -> None:
    reasons = {getattr(tf, name) for name in dir(tf) if name.startswith("SKIP_")}
    assert reasons == {c[2] for c in SKIPPED}


def test_imports_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(REPO_ROOT)!r})\n"
        "before = set(sys.modules)\n"
        "import memself.text.input_filter\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(new - set(sys.stdlib_module_names) - {'memself'}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert out.stdout.strip() == "[]"


def test_large_paste_is_handled() -> None:
    # A 100 kB log paste must neither hang the hook nor come back as recall text.
    log = "2026-11-30 08:48:06,123 INFO [worker-7] processed batch id=42 in 12ms\n" * 1500
    assert classify_input("帮我看下为什么这么慢\n" + log).recall_text == "帮我看下为什么这么慢"
    assert classify_input("帮我看下为什么这么慢\n" + "普通的一句话。\n" * 1500).skip_reason == (
        "too-long-paste"
    )
