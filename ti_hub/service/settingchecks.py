"""TiService's checks of its settings (a mixin: traitlets finds validators on every class of the MRO)."""

from __future__ import annotations

from traitlets import TraitError, validate


class SettingChecks:
    @validate("unix_uid_range")
    def _check_uids(self, proposal):
        first, last = proposal["value"]
        if not 0 < first <= last:
            raise TraitError("TiService.unix_uid_range must be [first, last] with 0 < first <= last")
        return proposal["value"]

    @validate("scheduler_max_share")
    def _check_share(self, proposal):
        if not 0 < proposal["value"] <= 1:
            raise TraitError("TiService.scheduler_max_share must be above 0 and at most 1")
        return proposal["value"]

    @validate("usage_settling_time", "usage_sample_interval", "usage_history_interval", "usage_history_retention")
    def _check_positive(self, proposal):
        if not proposal["value"] > 0:
            raise TraitError(f"TiService.{proposal['trait'].name} must be above 0 seconds")
        return proposal["value"]

    @validate("usage_device_weights")
    def _check_weights(self, proposal):
        for dtype, w in proposal["value"].items():
            if not isinstance(w, (int, float)) or not w > 0:
                raise TraitError(f"TiService.usage_device_weights[{dtype!r}] must be a number above 0")
        return proposal["value"]
