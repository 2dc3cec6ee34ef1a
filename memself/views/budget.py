"""The daily budget of the requests filler: what the user allows, what today has spent.

Tokens are estimated from the text (an endpoint's ``usage`` is not read: compatible servers
differ and a stream may carry none): a CJK character counts as one token, any other four
characters as one, rounded up. A request is charged its prompt plus a reserve for its answer
before it is sent, and settled to the answer's estimate when it comes back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from memself.config import Config
from memself.views.state import ViewsState

# What one memory's answer may cost at most (four requests of up to 80 characters, and the JSON
# around them): the reserve charged before sending.
ANSWER_RESERVE_PER_MEMORY = 120


def estimate_tokens(text: str) -> int:
    wide = sum(1 for c in text if _wide(c))
    return wide + math.ceil((len(text) - wide) / 4)


def _wide(char: str) -> bool:
    code = ord(char)
    return 0x2E80 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF or code >= 0x20000


@dataclass(frozen=True)
class Budget:
    requests_allowed: int
    tokens_allowed: int
    requests_spent: int
    tokens_spent: int

    @property
    def requests_left(self) -> int:
        return max(0, self.requests_allowed - self.requests_spent)

    @property
    def tokens_left(self) -> int:
        return max(0, self.tokens_allowed - self.tokens_spent)

    def allows(self, tokens: int) -> bool:
        return self.requests_left >= 1 and tokens <= self.tokens_left


def today_budget(config: Config, state: ViewsState, now: datetime) -> Budget:
    requests, tokens = state.spend_today(now)
    return Budget(int(config.viewsDailyRequests), int(config.viewsDailyTokens), requests, tokens)
