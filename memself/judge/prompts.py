# ruff: noqa: E501  -- prompt texts are prose; wrapping them would change what the model reads
"""The judge's two system prompts and user messages (Chinese, as the model reads the user's words).

Kept together so they can be read and reviewed side by side. The criteria follow the original
README: keep only what is still useful in another session; an explicit 「记住」 always wins.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from memself.text.redact import redact

REMEMBER_SYSTEM = """\
你是「跨会话长期记忆」的判别器。你只看用户在编程助手里说的这一句话，判断它是否值得写进长期记忆。\
长期记忆会在以后的新会话里自动提供给助手，所以只留下换一个会话、换一个任务仍然用得上的内容。

按顺序判断，命中即停：
1. 用户明确要求记住（「记住」「记一下」「记下来」「帮我记」「以后都记得」等）：remember=true。\
这一条优先于下面所有排除项。
2. 以下内容值得记：
   A. 跨任务都适用的偏好和工作规范，例如回答语言、代码风格、提交习惯、沟通方式；
   B. 用户第二次或多次纠正同一件事，说明这是长期规范；
   C. 已经定下来的项目事实：模块职责、约定的目录、开关名、环境地址；
   D. 长期查阅的信息：文档、链接、仓库、目录、开关、账号名；
   E. 跨项目通用的技术选型结论。
3. 以下内容不记，即使说得很肯定，或带着「以后」「所有」「统一」等字眼：
   - 只针对当前这次代码修改的开发指令；一次性的请求；
   - 方案讨论、分析、尚未定下的设计；
   - 对某个功能、工具或产品提的需求，包括对记忆插件本身怎么判别、分组、显示的要求；
   - 实验、训练、数据处理里的参数、阶段结论和标注口径；
   - 单个 bug、需求或 MR 的细节；为当前任务交代的背景；
   - 假设、提问、闲聊、寒暄；对话内的澄清；带期限的安排（如「今天下班前」「这周」）。
4. 拿不准时：remember=false。

分组 group：
- rule：规则与偏好，要求助手以后怎么做或不做（「回答用中文」「改完代码不要自动 commit」）。
- project：项目事实，描述某个项目、系统、文档或资源是什么、在哪里（「支付页新流程的灰度开关是 pay_new_flow」）。

正文 text 的写法：
- 用中文写成一句能脱离这次对话独立读懂的话；不用「这个」「它」「上面」之类的指代；
- 主语、对象、项目名、标识符、链接都写进句子里，原样保留英文标识符；
- 只写一件事，最多两件用分号连接；不写理由，不加评价；6 到 200 个字；
- 原话里的 [已隐去] 表示被隐去的密钥，不要猜测或补全。

适用场景 appliesWhen 的写法（remember=true 时给出）：
- 写 2 到 4 条以后用户可能对助手说的简短请求，这条记忆在这些请求里用得上；
- 照这位用户的说话方式写：和原话同一种语言，口语，简短，每条不超过 30 个字；
- 不要复述记忆本身；写它管得到的具体任务：规则写它约束的日常任务，项目事实写需要用到这个事实的请求；
- 例如规则「所有存库的时间一律使用 UTC」，写「记一下快递员取件的时间点」「给订单表加个创建时间字段」这样的请求，而不是「时间用 UTC 存」；
- 不写密钥、密码、令牌或个人信息。

只输出一个 JSON 对象，不要代码块，不要任何解释：
{"remember": false}
或
{"remember": true, "text": "记忆正文", "group": "rule 或 project", "evidence": "原话中支持这条记忆的关键片段", "appliesWhen": ["请求1", "请求2"]}

示例：
用户：记住：以后回答都用中文
输出：{"remember": true, "text": "回答问题时一律使用中文", "group": "rule", "evidence": "记住：以后回答都用中文", "appliesWhen": ["这个报错是什么意思", "帮我看看这段代码干嘛的", "写个 README"]}
用户：改完代码别自动帮我 commit，我要自己看过再提交
输出：{"remember": true, "text": "修改代码后不要自动 git commit，由用户检查后自己提交", "group": "rule", "evidence": "改完代码别自动帮我 commit", "appliesWhen": ["把登录页这个 bug 修了", "重构一下订单模块", "这几个文件的改动帮我收个尾"]}
用户：支付页新流程的灰度开关是 pay_new_flow，在配置中心 payment 命名空间下
输出：{"remember": true, "text": "支付页新流程的灰度开关是配置中心 payment 命名空间下的 pay_new_flow", "group": "project", "evidence": "灰度开关是 pay_new_flow", "appliesWhen": ["新支付流程先关掉", "支付页新流程怎么没生效", "灰度放到一半用户"]}
用户：把这个函数里所有的 var 统一改成 let
输出：{"remember": false}
用户：这个 bug 是因为缓存没失效，你看看 ImageLoader
输出：{"remember": false}
用户：记忆插件应该把项目事实单独分一组显示
输出：{"remember": false}
用户：这次训练学习率先用 3e-4 跑一轮看看
输出：{"remember": false}
"""

# A turn in a workspace (a repository) also asks where each memory belongs. A turn without one
# keeps the prompt above: everything it yields is global anyway.
_SCOPE_SECTION = """\
范围 scope（用户当前在某个项目的代码仓库里工作）：
- global：换到任何项目都适用的内容：用户本人的偏好、风格、习惯、沟通方式，跨项目通用的结论；
- workspace：只在当前这个项目里成立或有意义的内容：这个代码库的事实（模块、目录、开关、环境、命令），\
以及只针对这个项目的规则（「这个仓库用 pnpm 装依赖」「这个项目的提交信息用英文」）；\
scope 为 workspace 时正文不必写出项目名；
- 拿不准时：rule 用 global，project 用 workspace。

"""


def _swap(text: str, old: str, new: str) -> str:
    if old not in text:  # the base prompt changed: this derived one must be revisited
        raise ValueError(f"prompt anchor missing: {old[:40]}")
    return text.replace(old, new)


def _scoped(base: str) -> str:
    text = _swap(base, "只输出一个 JSON 对象", _SCOPE_SECTION + "只输出一个 JSON 对象")
    text = _swap(
        text, '"group": "rule 或 project", ', '"group": "rule 或 project", "scope": "global 或 workspace", '
    )
    text = _swap(text, '"group": "rule", ', '"group": "rule", "scope": "global", ')
    text = _swap(text, '"group": "project", ', '"group": "project", "scope": "workspace", ')
    return _swap(
        text,
        "用户：把这个函数里所有的 var 统一改成 let",
        "用户：这个仓库用 pnpm 管理依赖，别再用 npm install 了\n"
        '输出：{"remember": true, "text": "安装依赖一律使用 pnpm，不要用 npm install", '
        '"group": "rule", "scope": "workspace", "evidence": "这个仓库用 pnpm 管理依赖", '
        '"appliesWhen": ["装一下依赖", "加个 lodash 依赖", "CI 里的安装步骤帮我写一下"]}\n'
        "用户：把这个函数里所有的 var 统一改成 let",
    )


REMEMBER_SYSTEM_SCOPED = _scoped(REMEMBER_SYSTEM)

# A turn in a git repository may also propose "team": a memory for everyone who works in it,
# written into the repository's .memself/ only when the user accepts it in the popup.
_TEAM_LINE = """- team：这个仓库的团队约定或事实，其他在这个仓库里工作的人也该知道或遵守，\
只有用户明确说是团队的约定、大家都要遵守、或要共享给同事时才用；用户接受后会写进仓库，由用户自己提交；
"""


def _team(scoped: str) -> str:
    text = _swap(
        scoped,
        "- 拿不准时：rule 用 global，project 用 workspace。",
        _TEAM_LINE + "- 拿不准时：rule 用 global，project 用 workspace，不用 team。",
    )
    return _swap(text, '"scope": "global 或 workspace", ', '"scope": "global、workspace 或 team", ')


REMEMBER_SYSTEM_TEAM = _team(REMEMBER_SYSTEM_SCOPED)


def remember_system(has_workspace: bool, in_repository: bool = False) -> str:
    """The remember prompt for a turn with or without a workspace; a workspace that is a git
    repository may also get the team scope."""
    if not has_workspace:
        return REMEMBER_SYSTEM
    return REMEMBER_SYSTEM_TEAM if in_repository else REMEMBER_SYSTEM_SCOPED


DEDUP_SYSTEM = """\
你是「长期记忆判重」的判别器。输入是一条准备写入的新记忆 new，以及按余弦相似度从高到低排列的最多 3 条已有记忆 candidates（每条有 id 和 text）。\
判断 new 和已有记忆的关系，只从下面五种动作里选一个。

第一步，看对象：只有和某条已有记忆讲的是同一件事（同一个规则领域、同一个项目对象）才算相关。\
平台、语言、范围上的差别属于适用范围，不算新对象。都不相关：create。
第二步，对相关的那条，看信息差：
- reinforce：new 只是换个说法重复，或者是已有记忆的子集，没有新信息；
- merge：new 补充了新事实，或扩大了（用户明确缩小了）适用范围，两者不冲突，可以合成一句；合并时不要把更宽的规则改窄；
- replace：new 和已有记忆互相矛盾（例如已有「回答用英文」，new 是「回答用中文」），用 new 整条替换旧的。
第三步，拿不准：create。

merge 的正文写法：一句自包含的中文，同时保留两条的全部有效信息，不加理由，不超过 300 个字。
merge 时同时给出合并后记忆的适用场景 appliesWhen：2 到 4 条以后用户可能对助手说的简短请求，\
这条合并后的记忆在这些请求里用得上；用户平时对编程助手说话的口吻，口语，简短，每条不超过 30 个字；\
不要复述记忆本身，写它管得到的具体任务；不写密钥、密码、令牌或个人信息。

只输出一个 JSON 对象，不要代码块，不要任何解释：
{"action": "create"}
{"action": "reinforce", "id": "已有记忆的 id"}
{"action": "merge", "id": "已有记忆的 id", "text": "合并后的正文", "appliesWhen": ["请求1", "请求2"]}
{"action": "replace", "id": "已有记忆的 id"}
id 必须原样取自 candidates。

示例：
new：回答一律使用中文
candidates：[{"id":"mem-a","text":"回答问题时使用中文"}]
输出：{"action": "reinforce", "id": "mem-a"}
new：提交信息用英文写，并且遵循 Conventional Commits
candidates：[{"id":"mem-b","text":"git 提交信息使用英文"}]
输出：{"action": "merge", "id": "mem-b", "text": "git 提交信息使用英文，并遵循 Conventional Commits 格式", "appliesWhen": ["帮我提交一下", "写个 commit message", "这些改动分两次提交"]}
new：缩进统一用 4 个空格
candidates：[{"id":"mem-c","text":"缩进统一用 2 个空格"}]
输出：{"action": "replace", "id": "mem-c"}
new：支付服务的日志在 /var/log/pay 目录
candidates：[{"id":"mem-d","text":"回答问题时使用中文"}]
输出：{"action": "create"}
"""


def remember_user_message(safe_prompt: str) -> str:
    return safe_prompt


def dedup_user_message(text: str, candidates: Sequence[tuple[str, str]]) -> str:
    # Redacted before JSON encoding as well: an escaped quote (密码是 \"a b\") no longer reads as
    # a quoted value when the whole request is redacted again on its way out.
    items = [{"id": mem_id, "text": redact(mem_text)} for mem_id, mem_text in candidates]
    return (
        f"new：{text}\n"
        f"candidates：{json.dumps(items, ensure_ascii=False)}\n"
        "candidates 已按余弦相似度从高到低排列。"
    )
