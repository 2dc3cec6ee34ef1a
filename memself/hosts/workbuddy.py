"""WorkBuddy: it embeds the CodeBuddy Code engine; its facts are in ``hosts/workbuddy.json``."""

from __future__ import annotations

from memself.hosts.common import claudelike_renderer, never_steps_aside, payload_parser
from memself.hosts.facts import load_facts

FACTS = load_facts("workbuddy")
NAME = FACTS.name
ASK_TOOL = FACTS.ask_tool
POPUP = FACTS.popup
EVENT_NAMES = FACTS.event_names
TIMEOUTS = FACTS.timeouts
CONTEXT_LIMIT = FACTS.context_limit
OWN_MEMORY = FACTS.own_memory
CONFIG_DIR = FACTS.config_dir
CONFIG_ENV = FACTS.config_env
HOOK_SHELLS = FACTS.hook_shells
HOOK_SHELL_FIELD = FACTS.hook_shell_field

parse = payload_parser(FACTS)
render = claudelike_renderer(FACTS)
steps_aside = never_steps_aside
