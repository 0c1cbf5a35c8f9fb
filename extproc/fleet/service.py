"""The fleet as the server runs it: the state, its scraper and (with Redis) its sharing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extproc.fleet.scrape import Scraper
from extproc.fleet.shared import SharedFleet
from extproc.fleet.state import Fleet

if TYPE_CHECKING:
    from extproc.policy.schema import ModelSpec, Policy
    from extproc.settings import Settings


class FleetService:
    def __init__(self, settings: Settings) -> None:
        conf = settings.fleet
        self.fleet = Fleet(half_life_s=conf.half_life_s, cooldown_after=conf.cooldown_after, cooldown_s=conf.cooldown_s)
        self.scraper = Scraper(self.fleet, interval_s=conf.scrape_interval_s)
        url = conf.redis_url
        if url is None and settings.conversations.enabled and settings.conversations.backend == "redis":
            url = settings.conversations.redis_url
        self.shared = SharedFleet(self.fleet, url, interval_s=conf.share_interval_s) if conf.share and url else None

    def apply_policy(self, policy: Policy) -> None:
        """What to scrape and share: the policy's models (called at load and on every reload)."""
        self.scraper.set_targets({m.name: m.metrics_url for m in policy.models if m.metrics_url})
        if self.shared is not None:
            self.shared.set_models(m.name for m in policy.models)

    def start(self) -> None:
        self.scraper.start()
        if self.shared is not None:
            self.shared.start()

    async def stop(self) -> None:
        await self.scraper.stop()
        if self.shared is not None:
            await self.shared.stop()

    def unavailable(self, model: ModelSpec) -> str | None:
        """Why a conversation should leave `model` now (None: it may stay): cooling down after
        failures, or more requests waiting at its server than its card's `max_waiting`."""
        state = self.fleet.state(model.name)
        if state.cooling_s > 0:
            return "model_down"
        if model.max_waiting is not None and state.waiting is not None and state.waiting > model.max_waiting:
            return "over_max_waiting"
        return None
