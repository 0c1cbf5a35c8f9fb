"""Hot reload of the policy: poll the file (mtime, size, then content hash) and take SIGHUP.

A reload validates and builds the new policy completely (signals and the models they load)
in a worker thread, off the event loop, before anything changes. Then, on the loop:

- invalid (any load-time error): the last good policy keeps serving; the diagnostics are
  logged and `vsr_policy_reloads_total{result="failure"}` counts it;
- the same content as the active policy: nothing changes (`result="unchanged"`);
- valid and different: `Router.swap` makes it active for new requests; requests already
  in flight finish on the policy they started with (`Router.route` takes it once);
- valid and different in what the rendered Envoy config reads (clusters, the session header,
  headers decisions set: `extproc.policy.envoy_facts`): applied as well, but the result is
  `envoy_stale`, a warning names what changed and that `extproc envoy-config` must render
  Envoy's config again, and the metric counts it apart: until then Envoy does not pass the new
  session header, route to the new cluster, ...

Reloads never overlap: a SIGHUP arriving during one waits for it. Polling (no inotify
dependency) reads the file only when its mtime or size changed, and reloads only when its
content hash differs from the last one seen, so `touch` does not rebuild the policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from extproc.policy.envoy_facts import envoy_changes
from extproc.policy.load import CompiledPolicy, PolicyError, policy_version

if TYPE_CHECKING:
    from extproc.router import Router

log = logging.getLogger("extproc.server.reload")

ReloadOutcome = Literal["success", "failure", "unchanged", "envoy_stale"]


@dataclass(slots=True)
class ReloadResult:
    result: ReloadOutcome
    reason: str  # what asked for it: watch, sighup, api, ...
    version: str  # the active policy's version afterwards
    previous: str  # the active policy's version before
    at: float = field(default_factory=time.time)
    duration_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unavailable_signals: dict[str, str] = field(default_factory=dict)  # name -> why, in the new policy
    envoy_changes: list[str] = field(default_factory=list)  # what Envoy's rendered config lacks (envoy_stale)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def content_version(path: Path) -> str | None:
    """The version `load_policy` would give the file's current content (None: unreadable)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return policy_version(text)


class PolicyReloader:
    def __init__(
        self,
        router: Router,
        path: Path,
        *,
        interval_s: float = 2.0,
        on_result: Callable[[ReloadResult], None] | None = None,
        on_swap: Callable[[CompiledPolicy], None] | None = None,
    ) -> None:
        self.router = router
        self.path = Path(path)
        self.interval_s = interval_s
        self.on_result = on_result
        self.on_swap = on_swap
        self.last: ReloadResult | None = None
        self.counts: dict[str, int] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._triggered: set[asyncio.Task[ReloadResult]] = set()
        self._stat: tuple[int, int] | None = None
        self._seen: str | None = None  # content version last acted on

    # -- watching -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start polling the file (call on the event loop)."""
        self._stat = self._fingerprint()
        current = content_version(self.path)
        # If the file changed between the router's load and now, the first poll reloads it.
        self._seen = current if current == self.router.policy.version else None
        if self._seen is None:
            self._stat = None
        self._task = asyncio.create_task(self._poll(), name="policy-watch")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._triggered) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._task = None

    def trigger(self, reason: str = "sighup") -> None:
        """Reload soon, from a signal handler or any code on the loop that cannot await."""
        task = asyncio.get_running_loop().create_task(self.reload(reason), name=f"policy-reload:{reason}")
        self._triggered.add(task)
        task.add_done_callback(self._triggered.discard)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:  # the watcher must outlive any surprise
                log.exception("policy watch failed")

    async def check(self) -> ReloadResult | None:
        """Reload if the file's content changed since last seen; None when it did not."""
        stat = self._fingerprint()
        if stat is not None and stat == self._stat:
            return None
        self._stat = stat
        version = content_version(self.path)
        if version is not None and version == self._seen:
            return None
        return await self.reload("watch")

    def _fingerprint(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    # -- reloading ------------------------------------------------------------------------------
    async def reload(self, reason: str = "manual") -> ReloadResult:
        async with self._lock:
            started = time.perf_counter()
            previous = self.router.policy
            self._seen = content_version(self.path)
            try:
                policy = await asyncio.to_thread(self.router.load, self.path)
            except PolicyError as exc:
                errors = [d.format() for d in exc.diagnostics if d.severity == "error"] or [str(exc)]
                result = ReloadResult("failure", reason, previous.version, previous.version, errors=errors)
            except Exception as exc:  # a signal factory blew up: still the last good policy
                log.exception("policy reload raised", extra={"policy": str(self.path)})
                result = ReloadResult("failure", reason, previous.version, previous.version, errors=[repr(exc)])
            else:
                warnings = [d.format() for d in policy.warnings]
                unavailable = {
                    name: reason_
                    for name, signal in policy.signals.items()
                    if (reason_ := signal.unavailable_reason()) is not None
                }
                if policy.version == self.router.policy.version:
                    result = ReloadResult("unchanged", reason, policy.version, previous.version, warnings=warnings)
                else:
                    self.router.swap(policy)
                    if self.on_swap is not None:
                        self.on_swap(policy)
                    changes = envoy_changes(previous.spec, policy.spec)
                    result = ReloadResult(
                        "envoy_stale" if changes else "success",
                        reason,
                        policy.version,
                        previous.version,
                        warnings=warnings,
                        unavailable_signals=unavailable,
                        envoy_changes=changes,
                    )
            result.duration_s = round(time.perf_counter() - started, 4)
            self._record(result)
            return result

    def _record(self, result: ReloadResult) -> None:
        self.last = result
        self.counts[result.result] = self.counts.get(result.result, 0) + 1
        extra: dict[str, Any] = {
            "policy": str(self.path),
            "reason": result.reason,
            "result": result.result,
            "policy_version": result.version,
            "previous_version": result.previous,
            "duration_s": result.duration_s,
        }
        if result.result == "failure":
            log.error(
                "policy reload refused; the last good policy keeps serving:\n%s",
                "\n".join(result.errors),
                extra=extra,
            )
        elif result.result == "envoy_stale":
            extra["envoy_changes"] = result.envoy_changes
            log.warning(
                "policy reloaded, but Envoy's config was rendered for the previous policy: render it again "
                "(`extproc envoy-config`; with `--xds-dir` the running Envoy takes it without a restart) and "
                "reload Envoy; until then these changes do not take effect: %s",
                "; ".join(result.envoy_changes),
                extra=extra,
            )
        elif result.result == "success":
            if result.unavailable_signals:
                extra["unavailable_signals"] = result.unavailable_signals
            log.info("policy reloaded", extra=extra)
            for warning in result.warnings:
                log.warning("policy: %s", warning)
        else:
            log.info("policy reload: content unchanged", extra=extra)
        if self.on_result is not None:
            self.on_result(result)
