"""Texts the prepared model is checked on: mixed Chinese and English, short, long, code-like, and
one past 512 tokens (truncated). Shared by preparation, its tests and the benchmarks."""

from __future__ import annotations

PROBES: tuple[str, ...] = (
    "a",
    "",
    "   ",
    "回答用中文",
    "改完代码不要自动 git commit，由我来提交",
    "支付页新流程的灰度开关是 pay_new_flow，在配置中心 payment 命名空间下",
    "支付页新流程的灰度开关叫什么",
    "Go 里面错误怎么包装",
    "Go 的错误要用 fmt.Errorf 加 %w 包装上下文再返回",
    "讲讲 TCP 的拥塞控制算法 and mixed English words, numbers 12345 and emoji 🙂",
    "Please answer in English and keep the explanation short.",
    "def handler(event: dict) -> None:\n    if not event.get('ok'):\n        raise ValueError(event)",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days' ORDER BY id;",
    "`npm run build && npm test -- --watch=false` 失败时先看 CI 日志",
    "  前后都有空格的句子  ",
    "全角字符：ＡＢＣ１２３，～～；日本語のテキストも少し。",
    "司机端 App 的热修复用 Shorebird，补丁脚本是 driver-app 仓库的 scripts/patch.sh",
    "C:\\Users\\dev\\project\\src\\main.rs 里的 unsafe 块要加注释",
    "记住：" + "上线前先在预发环境验证灰度开关，再通知值班同学。" * 12,
    "很长的输入会被截断。" * 200,
    "The quick brown fox jumps over the lazy dog. " * 80,
    "x" * 3,
    "<s> </s> <pad> [CLS] [SEP] [MASK] <mask> 特殊记号",
    "数字 3.1415926 和版本号 v2.13.0、日期 2026-11-30、金额 ¥1,299.00",
)
